"""Nsight Compute and compute-sanitizer over catalog rungs.

Each rung runs in a child process (`python -m simtlab.tools.launch_once`) under
the tool, so a fault, a hang (killed at the time limit) or a tool failure is
reported for that rung and the sweep goes on.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["ToolUnavailable", "find_tool", "SANITIZER_TOOLS", "DEFAULT_METRICS", "SanitizeResult", "sanitize_rung",
           "parse_sanitizer", "profile_rung", "parse_ncu_csv"]

SANITIZER_TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
DEFAULT_METRICS = (
    "gpu__time_duration.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "smsp__sass_average_branch_targets_threads_uniform.pct",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "smsp__thread_inst_executed_per_inst_executed.ratio",
)


class ToolUnavailable(RuntimeError):
    pass


def find_tool(name: str) -> str:
    env = os.environ.get(f"SIMTLAB_{name.upper().replace('-', '_')}")
    candidates = [env, shutil.which(name), f"/usr/local/cuda/bin/{name}"]
    for c in candidates:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return c
    what = "Nsight Compute" if name == "ncu" else "the CUDA toolkit's compute-sanitizer"
    raise ToolUnavailable(f"{name} not found: install {what} or put it on PATH")


def _launch_cmd(family: str, rung: str, size: str) -> list[str]:
    return [sys.executable, "-m", "simtlab.tools.launch_once", family, rung, "--size", size]


@dataclass(frozen=True)
class SanitizeResult:
    rung: str
    tool: str
    errors: int | None  # None: the run did not finish (timeout, crash, tool failure)
    summary: str
    first_error: str

    @property
    def clean(self) -> bool:
        return self.errors == 0

    def as_dict(self) -> dict:
        return {**asdict(self), "clean": self.clean}


_SUMMARY = re.compile(r"(ERROR SUMMARY: (\d+) errors?|SUMMARY: \d+ hazards? displayed \((\d+) errors?)")


def parse_sanitizer(output: str) -> tuple[int | None, str, str]:
    """(errors, summary line, first error line) from compute-sanitizer's output."""
    errors, summary = None, ""
    for m in _SUMMARY.finditer(output):
        summary = m.group(0)
        errors = int(m.group(2) or m.group(3))
    first = next((line.strip("= ").strip() for line in output.splitlines()
                  if line.startswith("=========") and ("Error" in line or "Invalid" in line or "Hazard" in line
                                                       or "Uninitialized" in line or "Program hit" in line)), "")
    return errors, summary, first


def run_group(cmd: list[str], timeout: float) -> subprocess.CompletedProcess:
    """subprocess.run(cmd, capture_output=True, text=True, timeout=...) with the command in a
    process group of its own, the whole group killed on a timeout: the tools start the kernel's
    process as their child, and killing the tool alone would leave that child running."""
    import os
    import signal

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def sanitize_rung(family: str, rung: str, tool: str, size: str, timeout: float = 300) -> SanitizeResult:
    if tool not in SANITIZER_TOOLS:
        raise ValueError(f"--tool must be one of {', '.join(SANITIZER_TOOLS)}, not {tool!r}")
    cmd = [find_tool("compute-sanitizer"), "--tool", tool, "--print-limit", "20"]
    if tool == "racecheck":
        cmd += ["--racecheck-report", "all"]
    try:
        out = run_group(cmd + _launch_cmd(family, rung, size), timeout)
    except subprocess.TimeoutExpired:
        return SanitizeResult(rung, tool, None, f"timed out after {timeout:.0f} s", "")
    text = out.stdout + out.stderr
    errors, summary, first = parse_sanitizer(text)
    if errors is None:
        tail = text.strip().splitlines()[-1] if text.strip() else f"exit status {out.returncode}"
        return SanitizeResult(rung, tool, None, "no summary", tail)
    if out.returncode not in (0,) and errors == 0 and "Traceback" in text:
        return SanitizeResult(rung, tool, None, summary, text.strip().splitlines()[-1])
    return SanitizeResult(rung, tool, errors, summary, first)


def parse_ncu_csv(text: str) -> dict[str, dict[str, float | str]]:
    """{"<launch id> <kernel name>": {metric: value}} from `ncu --csv` output (numbers with separators parsed)."""
    start = text.find('"ID"')
    if start < 0:
        return {}
    out: dict[str, dict] = {}
    for row in csv.DictReader(io.StringIO(text[start:])):
        kernel = row.get("Kernel Name", "")
        value = row.get("Metric Value", "")
        try:
            value = float(value.replace(",", ""))
        except ValueError:
            pass
        out.setdefault(f"{row.get('ID', '')} {kernel}", {})[row.get("Metric Name", "")] = value
    return out


def profile_rung(family: str, rung: str, kernel: str, size: str, metrics=DEFAULT_METRICS,
                 timeout: float = 600) -> dict[str, dict]:
    cmd = [find_tool("ncu"), "--clock-control", "none", "--csv", "--metrics", ",".join(metrics),
           "-k", f"regex:{kernel}"] + _launch_cmd(family, rung, size)
    try:
        out = run_group(cmd, timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"ncu timed out after {timeout:.0f} s") from None
    parsed = parse_ncu_csv(out.stdout)
    if not parsed:
        raise RuntimeError(f"ncu produced no metrics (exit {out.returncode}): "
                           f"{(out.stderr or out.stdout).strip().splitlines()[-1:] or ['no output']}")
    return parsed
