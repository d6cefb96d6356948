import pytest
from typer.testing import CliRunner

from simtlab.cli import app
from simtlab.device import gpu_count
from simtlab.tools.nvtools import parse_ncu_csv, parse_sanitizer

MEMCHECK_CLEAN = """========= COMPUTE-SANITIZER
gemm/01_naive: gemm_naive<16> grid=(8, 9, 1) block=(16, 16, 1)
========= ERROR SUMMARY: 0 errors
"""
MEMCHECK_BAD = """========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at gemm_naive<16>(int, int, int, float, const float *, const float *, float, float *)+0x2a0
=========     by thread (3,0,0) in block (8,0,0)
========= ERROR SUMMARY: 3 errors
"""
RACECHECK = """========= COMPUTE-SANITIZER
========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)
"""
NCU = '''==PROF== Connected to process 1
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","python3","h","gemm_naive<16>(int, int)","1","7","(16, 16, 1)","(8, 8, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","1,234.50"
"0","1","python3","h","gemm_naive<16>(int, int)","1","7","(16, 16, 1)","(8, 8, 1)","0","9.0","Command line profiler metrics","l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum","","0"
"1","1","python3","h","reduce_x<256, 0>","1","7","(256, 1, 1)","(4, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","n/a"
'''


def test_parse_sanitizer():
    assert parse_sanitizer(MEMCHECK_CLEAN) == (0, "ERROR SUMMARY: 0 errors", "")
    errors, summary, first = parse_sanitizer(MEMCHECK_BAD)
    assert errors == 3 and first.startswith("Invalid __global__ write of size 4")
    assert parse_sanitizer(RACECHECK)[0] == 0
    api = ("========= Program hit CUDA_ERROR_NOT_FOUND (error 500) due to \"named symbol not found\" on CUDA API "
           "call to cuGetProcAddress_v2.\n========= ERROR SUMMARY: 1 error\n")
    assert parse_sanitizer(api)[2].startswith("Program hit CUDA_ERROR_NOT_FOUND")  # (an API call's error)
    assert parse_sanitizer("Traceback ... no summary")[0] is None


def test_parse_ncu_csv():
    parsed = parse_ncu_csv(NCU)
    assert set(parsed) == {"0 gemm_naive<16>(int, int)", "1 reduce_x<256, 0>"}
    naive = parsed["0 gemm_naive<16>(int, int)"]
    assert naive["gpu__time_duration.sum"] == 1234.5
    assert naive["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"] == 0.0
    assert parsed["1 reduce_x<256, 0>"]["gpu__time_duration.sum"] == "n/a"
    assert parse_ncu_csv("no csv here") == {}


@pytest.mark.skipif(gpu_count() > 0, reason="checks the messages printed where there is no GPU")
def test_cli_without_gpu():
    r = CliRunner().invoke(app, ["sanitize", "gemm", "--rung", "naive"])
    assert r.exit_code == 2 and "no CUDA GPU" in r.output
    r = CliRunner().invoke(app, ["profile", "gemm", "naive"])
    assert r.exit_code == 2 and "no CUDA GPU" in r.output


def test_cli_argument_errors():
    r = CliRunner().invoke(app, ["sanitize", "gemm", "--tool", "leakcheck"])
    assert r.exit_code == 2 and "unknown sanitizer tool" in r.output
    r = CliRunner().invoke(app, ["sanitize", "gemm", "--rung", "fastest"])
    assert r.exit_code == 2 and "no rung" in r.output


def test_a_timeout_kills_the_tool_and_what_it_started(tmp_path):
    """compute-sanitizer and ncu start the kernel's process as their child: a timeout ends both."""
    import subprocess
    import time

    from simtlab.tools.nvtools import run_group

    pid_file = tmp_path / "child.pid"
    script = f"sleep 60 & echo $! > {pid_file}; wait"
    start = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_group(["sh", "-c", script], timeout=1.0)
    assert time.monotonic() - start < 10
    child = int(pid_file.read_text())
    time.sleep(0.2)
    try:  # gone, or a zombie waiting for whoever adopted it: not running either way
        state = open(f"/proc/{child}/stat").read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        state = "gone"
    assert state in ("gone", "Z", "X"), state
    assert run_group(["sh", "-c", "echo out; echo err >&2"], timeout=10).stdout == "out\n"
