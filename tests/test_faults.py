"""Faults a user meets with no GPU: Ctrl-C at any moment of a command, values that would turn a
check off, leftovers of interrupted writes, damaged cache entries (issue: faults that cost a user
their results or the right kernel)."""

import math
import os
import signal
import subprocess
import sys
import time
import warnings

import pytest


def _run_entry(code_before: str, *args: str, timeout: float = 120):
    script = f"{code_before}\nfrom simtlab.entry import entry\nentry()"
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=timeout)


def test_ctrl_c_while_the_command_line_imports_is_one_line_and_exit_130():
    """A KeyboardInterrupt raised while the commands import (what Ctrl-C in a command's first few
    tenths of a second is): 'interrupted', status 130, no traceback."""
    stub = ("import builtins\nreal = builtins.__import__\n"
            "def imp(name, *a, **k):\n"
            "    if name in ('cli', 'simtlab.cli') or name.endswith('.cli') or (a[2:3] and a[2] and 'main' in a[2]):\n"
            "        raise KeyboardInterrupt\n"
            "    return real(name, *a, **k)\n"
            "builtins.__import__ = imp")
    out = _run_entry(stub, "kernels")
    assert out.returncode == 130 and out.stderr.strip() == "interrupted", out.stderr
    assert "Traceback" not in out.stderr


def test_a_real_ctrl_c_early_in_a_command_prints_no_traceback():
    proc = subprocess.Popen([sys.executable, "-c", "from simtlab.entry import entry; entry()", "kernels"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(0.15)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err
    assert proc.returncode in (0, 130)


def test_charts_draw_without_warnings(tmp_path):
    """`simtlab roofline` / `report`: the roofline draws with no matplotlib warning (its legend used
    to defeat tight_layout and say so with a source path)."""
    from simtlab.analyze.roofline import Ceilings, Point, roofline_chart

    points = [Point(f"fam{i % 7}", f"fam{i % 7}/{i:02d}_rung", "1", 0.1 * (i + 1), 100.0 * (i + 1), 1e4, "memory")
              for i in range(90)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        roofline_chart(points, Ceilings("GPU", 3000.0, 60000.0), tmp_path / "r.png")
    assert (tmp_path / "r.png").stat().st_size > 10_000


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e309", "-0.5"])
def test_compare_refuses_a_floor_that_would_turn_the_gate_off(value, tmp_path, capsys):
    from simtlab.cli import main
    from simtlab.store import Store

    store = Store(tmp_path / "x.db")
    for _ in range(2):
        run = store.start_run("ladder")
        store.add_result(run, family="gemm", rung="gemm/01_naive", problem="64", status="ok", median_ms=1.0)
    store.close()
    assert main(["compare", "1", "2", "--db", str(tmp_path / "x.db"), "--floor", value]) == 2
    assert "--floor" in capsys.readouterr().err


def test_run_ids_beyond_64_bits_are_bad_input_not_internal_errors(tmp_path):
    from simtlab.cli import main
    from simtlab.store import Store

    Store(tmp_path / "r.db").close()
    for args in (["results", "--run", str(2 ** 63)], ["results", "--run", str(2 ** 70)]):
        assert main([*args, "--db", str(tmp_path / "r.db")]) == 2


@pytest.mark.parametrize("option", [["--timeout", "-1"], ["--timeout", "nan"], ["--target-ms", "0"],
                                    ["--time-budget", "-5"], ["--jobs", "-2"], ["--budget", "0"],
                                    ["--target-ms", "inf"]])
def test_tune_refuses_options_out_of_range(option, capsys):
    from simtlab.cli import main

    assert main(["tune", "gemm", "--rung", "tuned", "--size", "256", *option]) == 2
    assert option[0] in capsys.readouterr().err  # (the option named, before any GPU is looked for)


def test_kernel_refuses_negative_shared_memory_and_bad_timeouts():
    import simtlab

    src = "__global__ void k(float* x) { x[0] = 1.0f; }"
    with pytest.raises(ValueError, match="shared"):
        simtlab.Kernel(src, "k", grid=1, block=32, shared=-1)
    from simtlab.compile import compile_source

    for bad in (-1, math.nan):
        with pytest.raises(ValueError, match="timeout"):
            compile_source(src, "k.cu", arch="sm_90", timeout=bad)


def test_an_interrupted_cache_write_leaves_no_temporary_file(tmp_cache, monkeypatch):
    from simtlab import compile as comp

    def interrupted(tmp, path):
        raise KeyboardInterrupt

    monkeypatch.setattr(comp.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        comp.compile_source("__global__ void k(float* x) { x[0] = 2.0f; }", "k.cu", arch="sm_90")
    assert not [p for p in tmp_cache.iterdir() if p.name.endswith(".tmp")]


def test_temporary_files_of_killed_writers_are_swept(tmp_cache):
    """A process killed while writing (kill -9: nothing of it runs again) leaves its `.NAME.PID.tmp`:
    the next write into the folder removes those of processes that no longer exist."""
    from simtlab.compile import compile_source

    tmp_cache.mkdir(parents=True, exist_ok=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    stale = tmp_cache / f".abc.cubin.{pid}.tmp"
    stale.write_bytes(b"x" * 1000)
    live = tmp_cache / f".abc.cubin.{os.getpid()}.tmp"  # (ours, this process is alive: kept)
    live.write_bytes(b"y")
    compile_source("__global__ void k(float* x) { x[0] = 3.0f; }", "k.cu", arch="sm_90")
    assert not stale.exists() and live.exists()
    live.unlink()


def test_a_cache_entry_missing_a_field_or_a_folder_in_its_place_is_rebuilt(tmp_cache):
    import json

    from simtlab.compile import compile_source

    src = "template <int S> __global__ void k(float* x) { x[0] = S; }"
    first = compile_source(src, "k.cu", ["k<4>"], arch="sm_90")
    meta_path = tmp_cache / f"{first.key}.json"
    meta = json.loads(meta_path.read_text())
    del meta["symbols"]
    meta_path.write_text(json.dumps(meta))
    again = compile_source(src, "k.cu", ["k<4>"], arch="sm_90")
    assert not again.from_cache and again.mangled("k<4>")
    first.path.unlink()
    first.path.mkdir()  # a folder where the cubin should be
    (first.path / "junk").write_text("x")
    third = compile_source(src, "k.cu", ["k<4>"], arch="sm_90")
    assert not third.from_cache and third.path.is_file() and third.data()[:4] == b"\x7fELF"


def test_an_interrupted_export_leaves_no_temporary_file(tmp_path, monkeypatch):
    from simtlab.store import Store

    store = Store(tmp_path / "r.db")
    run = store.start_run("ladder")
    store.add_result(run, family="gemm", rung="r", problem="1", status="ok", median_ms=1.0)
    import simtlab.store as store_mod

    def interrupted(tmp, path):
        raise KeyboardInterrupt

    monkeypatch.setattr(store_mod.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        store.write_text(tmp_path / "out.jsonl")
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_the_fault_injection_script_loses_nothing(tmp_path):
    """benchmarks/fault_injection.py, short: killed and concurrent writers, look-alike merges, a
    read-only reader, interrupted compiles, damaged cache entries, killed exports - 0 lost, 0 wrong."""
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "fault_injection.py"
    out = subprocess.run([sys.executable, str(script), "--rounds", "3"], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path, env={**os.environ, "SIMTLAB_CACHE_DIR": str(tmp_path / "c")})
    assert out.returncode == 0 and "nothing lost, no wrong kernel" in out.stdout, out.stdout + out.stderr


@pytest.mark.parametrize("kwargs", [{"target_ms": -1}, {"target_ms": math.nan}, {"target_ms": math.inf},
                                    {"min_reps": 0}, {"min_reps": 10, "max_reps": 5}, {"warmup": -1}])
def test_timing_refuses_values_that_would_time_nothing_or_forever(kwargs):
    from simtlab.bench import time_gpu

    with pytest.raises(ValueError):
        time_gpu(lambda: None, **kwargs)
