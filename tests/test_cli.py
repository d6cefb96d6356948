import json

import pytest
from typer.testing import CliRunner

from simtlab.cli import app
from simtlab.device import gpu_count

runner = CliRunner()


def test_help_lists_commands():
    out = runner.invoke(app, ["--help"])
    assert out.exit_code == 0
    for cmd in ("device", "kernels", "compile", "ladder", "results"):
        assert cmd in out.output


def test_kernels_json():
    out = runner.invoke(app, ["kernels", "--json"])
    assert out.exit_code == 0, out.output
    data = {f["family"]: f for f in json.loads(out.output)}
    assert [r["name"] for r in data["gemm"]["rungs"]][:3] == ["naive", "coalesced", "smem_tiling"]
    assert len(data["gemm"]["rungs"]) == 14 and len(data["elementwise"]["rungs"]) == 3
    assert data["gemm"]["rungs"][8]["min_cc"] == "8.0"
    assert (data["gemm"]["rungs"][11]["name"], data["gemm"]["rungs"][11]["min_cc"]) == ("tf32x3_mma", "8.0")
    assert (data["gemm"]["rungs"][12]["name"], data["gemm"]["rungs"][12]["min_cc"]) == ("f16x3", "9.0")


def test_kernels_table():
    out = runner.invoke(app, ["kernels", "--family", "elementwise"])
    assert out.exit_code == 0 and "grid_stride" in out.output


def test_compile_json_static_report():
    out = runner.invoke(app, ["compile", "elementwise", "--arch", "sm_90", "--json"])
    assert out.exit_code == 0, out.output
    entries = json.loads(out.output)
    assert {e["rung"] for e in entries} == {"elementwise/01_scalar", "elementwise/02_float4",
                                            "elementwise/03_grid_stride"}
    for e in entries:
        assert e["registers"] > 0 and e["spill_bytes"] == 0 and 0 < e["occupancy"] <= 1
        assert e["arch"] == "sm_90" and e["threads"] == 256


def test_compile_table_one_rung():
    out = runner.invoke(app, ["compile", "gemm", "--arch", "sm_80", "--rung", "warptiling"], env={"COLUMNS": "160"})
    assert out.exit_code == 0, out.output
    assert "08_war" in out.output and "128-bit" in out.output  # (cut to "08_war…" where the console is 80 wide)


def test_compile_bad_arguments():
    out = runner.invoke(app, ["compile", "fft", "--arch", "sm_90"])
    assert out.exit_code == 2 and "no kernel family" in out.output
    out = runner.invoke(app, ["compile", "gemm", "--arch", "volta"])
    assert out.exit_code == 2 and "arch must look like" in out.output


@pytest.mark.skipif(gpu_count() > 0, reason="checks the message printed where there is no GPU")
def test_ladder_without_gpu_says_so_in_one_line():
    out = runner.invoke(app, ["ladder", "gemm"])
    assert out.exit_code == 2
    lines = [l for l in out.output.splitlines() if l.strip()]
    assert len(lines) == 1 and "needs a GPU" in lines[0] and "compile" in lines[0] and "--arch" in lines[0]
    assert "Traceback" not in out.output


@pytest.mark.skipif(gpu_count() > 0, reason="checks the message printed where there is no GPU")
def test_device_without_gpu():
    out = runner.invoke(app, ["device"])
    assert out.exit_code == 2 and "no CUDA GPU" in out.output


def test_compile_json_reports_max_threads_per_block():
    out = runner.invoke(app, ["compile", "gemm", "--arch", "sm_90", "--rung", "tuned", "--json"])
    assert out.exit_code == 0, out.output
    for e in json.loads(out.output):
        assert e["max_threads_per_block"] == 256 and e["threads"] <= e["max_threads_per_block"]


def test_results_without_database(tmp_path):
    out = runner.invoke(app, ["results", "--db", str(tmp_path / "none.db")])
    assert out.exit_code == 2 and "no results database" in out.output


def test_results_json_round_trip(tmp_path):
    from simtlab.store import Store

    s = Store(tmp_path / "r.db")
    run = s.start_run("t")
    s.add_result(run, family="gemm", rung="gemm/01_naive", problem="3x3x3", status="ok", median_ms=1.0)
    out = runner.invoke(app, ["results", "--db", str(tmp_path / "r.db"), "--json"])
    assert out.exit_code == 0 and json.loads(out.output)[0]["rung"] == "gemm/01_naive"
    out = runner.invoke(app, ["results", "--db", str(tmp_path / "r.db"), "--runs"])
    assert out.exit_code == 0 and "t" in out.output


def test_plot_redraws_a_saved_ladder(tmp_path):
    from simtlab.ladder import Row

    rows = [Row("gemm", p, name, stage, status, median_ms=ms, gflops=g)
            for p in ("64x64x64", "128x128x128")
            for name, stage, status, ms, g in (("cuBLAS", None, "reference", 1.0, 5e4),
                                               ("gemm/01_naive", 1, "ok", 10.0, 1e3),
                                               ("gemm/02_coalesced", 2, "wrong", None, None))]
    src = tmp_path / "rows.json"
    src.write_text(json.dumps([r.as_dict() for r in rows]))
    out = tmp_path / "chart.png"
    res = runner.invoke(app, ["plot", str(src), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
    bad = runner.invoke(app, ["plot", str(tmp_path / "missing.json"), "-o", str(out)])
    assert bad.exit_code == 2 and "cannot read" in bad.output


def test_compile_says_which_rungs_cannot_take_the_problem_without_failing():
    """Hopper rungs on sm_80 and TF32 problems on rungs without a TF32 form are reported as such; only
    a real compile error makes the command fail."""
    out = runner.invoke(app, ["compile", "gemm_tc", "--arch", "sm_90", "--size", "256:tf32", "--json"])
    assert out.exit_code == 0, out.output
    rows = {e["rung"]: e for e in json.loads(out.output)}
    assert rows["gemm_tc/01_wmma"]["unsupported"] and "TF32 inputs run on rung" in rows["gemm_tc/01_wmma"]["error"]
    assert not rows["gemm_tc/05_wgmma_ws"].get("error")
    out = runner.invoke(app, ["compile", "gemm_tc", "--arch", "sm_80", "--rung", "wgmma_ws", "--json"])
    assert out.exit_code == 0 and json.loads(out.output)[0]["unsupported"]


def test_kernels_names_each_familys_tests_and_ladder():
    from typer.testing import CliRunner

    from simtlab.cli import app

    out = CliRunner().invoke(app, ["kernels", "--family", "scan"], env={"COLUMNS": "200"}).output
    assert "python -m pytest -m scan" in out and "simtlab ladder scan" in out and "simtlab explain scan 7" in out


MY_KERNEL = r"""
#include <cstdio>
template <int TILE>
__global__ void my_axpby(int n, float alpha, const float* x, float beta, float* y) {
  uint i = blockIdx.x * TILE * blockDim.x + threadIdx.x;
  for (int t = 0; t < TILE; ++t, i += blockDim.x)
    if (i < n) y[i] = alpha * x[i] + (beta != 0.0f ? beta * y[i] : 0.0f);
}
"""

MY_SETUP = """
import cupy
n = 100_003
def setup():
    x, y = cupy.random.random(n, dtype=cupy.float32), cupy.random.random(n, dtype=cupy.float32)
    return {"args": (n, 2.0, x, 0.5, y), "template": [4], "block": 128,
            "grid": lambda n, *a: (-(-n // 512),), "reference": lambda n, a, x, b, y: a * x + b * y, "inouts": [4]}
"""


def test_explain_reports_your_own_file_with_no_gpu(tmp_path):
    from typer.testing import CliRunner

    from simtlab.cli import app

    src = tmp_path / "mine.cu"
    src.write_text(MY_KERNEL)
    r = CliRunner().invoke(app, ["explain", str(src), "my_axpby", "--template", "4", "--block", "128", "--arch", "sm_90",
                                 "--json"])
    assert r.exit_code == 0, r.output
    page = json.loads(r.output)
    assert page["kernel"] == "my_axpby<4>" and page["occupancy"] == 1.0 and page["param_sizes"] == [4, 4, 8, 4, 8]
    assert "LDG.32" in page["sass"]["memory"]
    table = CliRunner().invoke(app, ["explain", str(src), "my_axpby", "--template", "4", "--arch", "sm_90"],
                               env={"COLUMNS": "120"})
    assert table.exit_code == 0 and "registers a thread" in table.output and "pass --block" in table.output
    bad = CliRunner().invoke(app, ["explain", str(src), "my_axpby", "--template", "four", "--arch", "sm_90"])
    assert bad.exit_code == 2 and "--template 'four'" in bad.output


def test_check_names_what_is_wrong_in_a_setup_file(tmp_path):
    import pytest as _pytest
    import typer

    from simtlab.commands.measure import load_setup

    cases = {"none.py": "x = 1\n", "kind.py": "def setup():\n    return [1]\n",
             "keys.py": "def setup():\n    return {'args': (), 'grid': 1, 'bloc': 32}\n",
             "outputs.py": "def setup():\n    return {'args': (), 'grid': 1, 'block': 32, 'reference': len}\n",
             "raises.py": "def setup():\n    raise RuntimeError('no data')\n"}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        with _pytest.raises(typer.Exit):
            load_setup(tmp_path / name)
    good = tmp_path / "good.py"
    good.write_text("def setup():\n    return {'args': (1,), 'grid': 1, 'block': 32}\n")
    assert load_setup(good)["block"] == 32


@pytest.mark.gpu
def test_check_verifies_and_times_your_own_kernel(tmp_path):
    from typer.testing import CliRunner

    from simtlab.cli import app

    (tmp_path / "mine.cu").write_text(MY_KERNEL)
    (tmp_path / "setup.py").write_text(MY_SETUP)
    r = CliRunner().invoke(app, ["check", str(tmp_path / "mine.cu"), "my_axpby", "--setup", str(tmp_path / "setup.py"),
                                 "--target-ms", "20", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["verified"][0]["ok"] and out["median_ms"] > 0 and out["kernel"] == "my_axpby<4>"
