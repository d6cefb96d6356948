import json

import pytest
from typer.testing import CliRunner

from simtlab.analyze.roofline import Ceilings, ceilings_from_store, datasheet_ceilings, gpu_spec, points_from_rows
from simtlab.cli import app
from simtlab.store import Store


class Dev:
    name, compute_capability, driver_version = "NVIDIA H200", (9, 0), 13000

    def as_dict(self):
        return {}


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "r.db")
    run = s.start_run("t", Dev())
    s.add_result(run, family="elementwise", rung="device copy", problem="1000", status="reference",
                 gflops=300.0, gbs=4000.0, median_ms=1.0)
    s.add_result(run, family="elementwise", rung="device copy", problem="2000", status="reference",
                 gflops=350.0, gbs=4200.0, median_ms=1.0)
    s.add_result(run, family="gemm", rung="cuBLAS", problem="4096x4096x4096", status="reference",
                 gflops=51000.0, gbs=1500.0, median_ms=2.7)
    s.add_result(run, family="gemm", rung="gemm/10_tuned", problem="4096x4096x4096", status="ok",
                 gflops=47700.0, gbs=1400.0, median_ms=2.9)
    s.add_result(run, family="gemm", rung="gemm/01_naive", problem="4096x4096x4096", status="wrong")
    s.add_result(run, family="gemm_tc", rung="gemm_tc/03_mma_multistage", problem="4096x4096x4096:fp16",
                 dtype="float16", status="ok", gflops=165000.0, gbs=900.0, median_ms=0.83)
    return s


def test_ceilings_are_the_best_stored_references(store):
    c = ceilings_from_store(store, "NVIDIA H200")
    assert c.bandwidth_gbs == 4200.0 and c.compute_gflops == 51000.0
    assert c.datasheet_bandwidth_gbs == 4800.0 and c.measured
    assert c.ridge == pytest.approx(51000 / 4200)
    assert c.roof(1.0) == 4200.0 and c.roof(1000.0) == 51000.0
    assert c.bound(0.1) == "memory-bound" and c.bound(100) == "compute-bound"
    with pytest.raises(LookupError, match="ladder"):
        ceilings_from_store(store, "NVIDIA A100")


def test_points_skip_unverified_rows(store):
    c = ceilings_from_store(store, "NVIDIA H200")
    pts = points_from_rows(store.results(), c)
    assert [p.kernel for p in pts] == ["device copy", "device copy", "cuBLAS", "gemm/10_tuned"]
    tuned = pts[-1]
    assert tuned.intensity == pytest.approx(2 * 4096**3 / (4 * 3 * 4096**2))
    assert tuned.pct_of_roof == pytest.approx(100 * 47700 / 51000) and tuned.bound == "compute-bound"
    assert pts[0].bound == "memory-bound"


def test_datasheet_table():
    c = datasheet_ceilings(gpu_spec("a100"))
    assert not c.measured and c.compute_gflops == 19500.0
    assert datasheet_ceilings(gpu_spec("h200"), "bfloat16").compute_gflops == 989000.0
    assert isinstance(c, Ceilings)
    with pytest.raises(ValueError, match="no datasheet entry"):
        gpu_spec("b300x")


def test_roofline_cli(store, tmp_path):
    out = tmp_path / "roof.png"
    res = CliRunner().invoke(app, ["roofline", "--db", str(store.path), "-o", str(out), "--json"])
    assert res.exit_code == 0, res.output
    assert out.read_bytes()[:4] == b"\x89PNG"
    data = json.loads(res.output[: res.output.rindex("}") + 1])
    assert data["ceilings"]["bandwidth_gbs"] == 4200.0 and len(data["points"]) == 4


def test_plan_cli_without_gpu():
    res = CliRunner().invoke(app, ["plan", "gemm", "--gpu", "h200", "--size", "4096", "--json"])
    assert res.exit_code == 0, res.output
    plan = json.loads(res.output)
    assert plan["arch"] == "sm_90" and plan["bound"] == "compute-bound"
    assert plan["roof_gflops"] == pytest.approx(66900.0)
    by_rung = {r["rung"].split("/")[-1]: r for r in plan["rungs"]}
    assert by_rung["01_naive"]["flop_per_requested_byte"] == pytest.approx(0.25, rel=1e-3)
    assert by_rung["03_smem_tiling"]["flop_per_requested_byte"] == pytest.approx(8.0, rel=0.01)
    assert by_rung["10_tuned"]["flop_per_requested_byte"] > by_rung["09_multistage"]["flop_per_requested_byte"]
    assert all(r["spill_bytes"] == 0 for r in plan["rungs"])
    # 512 tiles of 128x256, one block per SM on 132 SMs: 3.88 rounds, the last 16 SMs short
    assert by_rung["10_tuned"]["waves"]["units"] == 512 and by_rung["10_tuned"]["waves"]["slots"] == 132
    assert by_rung["10_tuned"]["waves"]["idle_share"] == pytest.approx(16 / 528)
    res = CliRunner().invoke(app, ["plan", "gemm", "--gpu", "a100", "--size", "4096", "--json"])
    a100 = {r["rung"].split("/")[-1]: r for r in json.loads(res.output)["rungs"]}
    assert a100["10_tuned"]["waves"]["slots"] == 108  # the named GPU's SMs
    res = CliRunner().invoke(app, ["plan", "elementwise", "--gpu", "a100", "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["bound"] == "memory-bound"
    res = CliRunner().invoke(app, ["plan", "gemm", "--gpu", "b999"])
    assert res.exit_code == 2 and "no datasheet entry" in res.output
