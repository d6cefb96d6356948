"""The GPU runs' phase table, checked with no GPU: every test step selects by markers pytest knows,
every command names a script or a simtlab command that exists."""

import re
import shlex
import sys
from pathlib import Path

import importlib.util

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("gpu_run", ROOT / "benchmarks" / "gpu_run.py")
gpu_run = sys.modules["gpu_run"] = importlib.util.module_from_spec(_spec)  # (dataclasses look it up)
_spec.loader.exec_module(gpu_run)


def _known_markers(config) -> set[str]:
    return {line.split(":")[0].split("(")[0].strip() for line in config.getini("markers")}


@pytest.mark.parametrize("phase", list(gpu_run.PHASES))
def test_every_step_selects_real_markers_and_runs_real_commands(phase, pytestconfig):
    from simtlab.cli import app

    commands = {c.name or c.callback.__name__ for c in app.registered_commands}
    markers = _known_markers(pytestconfig)
    _, steps = gpu_run.PHASES[phase]
    assert steps
    for step in steps:
        if isinstance(step, gpu_run.Tests):
            names = set(re.findall(r"[a-z_0-9]+", step.markers or "")) - {"and", "or", "not"}
            assert names <= markers, (phase, names - markers)
            continue
        for part in re.split(r"&&|;|\|", step.command.format(out="OUT")):
            words = shlex.split(part.replace("$(", "").replace(")", ""))
            for i, w in enumerate(words):
                if w == "simtlab":
                    assert words[i + 1] in commands, (phase, part)
                if w.endswith(".py") and "/" in w:
                    assert (ROOT / w).is_file(), (phase, w)


def test_the_list_and_an_unknown_phase(capsys, monkeypatch):
    monkeypatch.setattr("sys.argv", ["gpu_run.py", "--list"])
    assert gpu_run.main() == 0 and "suite" in capsys.readouterr().out
    monkeypatch.setattr("sys.argv", ["gpu_run.py", "nosuch"])
    assert gpu_run.main() == 2 and "unknown phase(s) nosuch" in capsys.readouterr().err
