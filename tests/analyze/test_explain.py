import json

from typer.testing import CliRunner

from simtlab.analyze.explain import copy_share, explain, header_comment, limiter
from simtlab.catalog import family
from simtlab.cli import app
from simtlab.store import Store


class Dev:
    name, compute_capability, driver_version = "NVIDIA H200", (9, 0), 13000

    def as_dict(self):
        return {}


def test_header_comment_is_the_rung_description():
    text = header_comment(family("gemm").rung(7))
    assert text.startswith("Rung 7 - bank-conflict-free") and "Buys:" in text


def test_explain_compares_with_previous_rung_and_store(tmp_path):
    s = Store(tmp_path / "r.db")
    run = s.start_run("t", Dev())
    for rung, ms in (("gemm/06_vectorized", 4.4), ("gemm/07_bank_conflict_free", 4.2)):
        s.add_result(run, family="gemm", rung=rung, problem="4096x4096x4096", status="ok", median_ms=ms,
                     gflops=137438.95 / ms, gbs=1.0, pct_of_reference=60.0)
    fam = family("gemm")
    page = explain(fam, fam.rung(7), "sm_90", s, "NVIDIA H200", "4096")
    assert page["previous"] == "gemm/06_vectorized"
    assert page["static"]["shared_bytes"] > page["static_previous"]["shared_bytes"]  # the padding
    assert abs(page["speedup_over_previous"]["4096x4096x4096"] - 4.4 / 4.2) < 1e-9
    assert page["static"]["spill_bytes"] == 0 and "LDS.128" in page["static"]["sass_memory"]
    assert page["static"]["rounds"] == "3.88 on 132 SMs, 3% idle"  # 1024 tiles of 128x128, two blocks an SM
    assert page["limiter"]
    first = explain(fam, fam.rung(1), "sm_90", None, None, "4096")
    assert first["previous"] is None and first["limiter"].startswith("memory")


def test_limiter_rules():
    g, e = family("gemm"), family("elementwise")
    assert limiter(e, {"occupancy": 1.0}, 102.0).startswith("memory bandwidth")
    assert limiter(e, {"occupancy": 0.25}, 60.0).startswith("latency: low occupancy")
    facts = {"occupancy": 0.25, "limiter": "registers", "flop_per_requested_byte": 31.5, "loop_fma_share": 0.89}
    assert limiter(g, facts, 93.0).startswith("compute")
    assert limiter(g, facts, 78.0).startswith("latency: 25% occupancy")
    assert limiter(g, {**facts, "loop_fma_share": 0.56}, 60.0).startswith("instruction overhead")
    tc = family("gemm_tc")  # tensor-core rungs: a low FMA share is the point, not overhead
    assert "tensor cores" in limiter(tc, {**facts, "loop_fma_share": 0.01, "tensor_cores": "HGMMA"}, 97.0)
    assert limiter(tc, {**facts, "loop_fma_share": 0.05, "tensor_cores": "HMMA"}, 23.0).startswith("feeding")
    assert limiter(tc, {**facts, "loop_fma_share": 0.01, "tensor_cores": "HGMMA"}, 85.0).startswith("the wgmma")
    # a memory-bound family whose reference is a library (CUB's sort): at its rate is not at the memory's
    sort = family("sort")
    assert limiter(sort, {"occupancy": 0.5}, 101.0, copy=0.09).startswith("not memory bandwidth: 9%")
    assert limiter(sort, {"occupancy": 0.5}, 101.0, copy=0.92).startswith("memory bandwidth: 92%")
    assert limiter(sort, {"occupancy": 0.25}, 60.0, copy=0.3).startswith("latency: low occupancy")


def test_the_copy_share_is_read_on_the_page_problem_or_the_largest():
    """The limiter reads the share of the copy on the problem the page shows (reduction 8 once
    named the 1M problem's 46% beside the 2^30 figures); where that was not timed beside the copy,
    the largest problem that was."""
    got = {"2^24": {"gbs": 300.0, "pct_of_reference": 101.0}, "2^28": {"gbs": 2800.0, "pct_of_reference": 93.0}}
    copy = {"2^24": 3000.0, "2^28": 4000.0}
    assert copy_share(got, copy, "2^24") == 0.1
    assert copy_share(got, copy, "2^28") == 0.7
    assert copy_share(got, copy, "2^30") == 0.7  # (not measured: the largest that was)
    assert copy_share(got, {"2^30": 4000.0}, "2^24") is None  # (no copy timed beside the rung)
    assert copy_share({}, {"2^24": 3000.0}) is None


def test_explain_reads_the_device_copy_beside_a_library_reference(tmp_path):
    """Sort rung 4 at CUB's rate but a tenth of the device copy's bandwidth: explain says the work
    per byte, not memory, sets the pace."""
    s = Store(tmp_path / "r.db")
    run = s.start_run("t", Dev())
    s.add_result(run, family="sort", rung="sort/04_radix_onesweep", problem="268435456", status="ok", median_ms=7.7,
                 gbs=278.0, pct_of_reference=93.0)
    s.add_result(run, family="sort", rung="device copy", problem="268435456", status="reference", median_ms=0.51,
                 gbs=4218.0)
    assert s.reference_per_problem("sort", "device copy", "NVIDIA H200") == {"268435456": 4218.0}
    fam = family("sort")
    page = explain(fam, fam.rung("radix_onesweep"), "sm_90", s, "NVIDIA H200", "268435456")
    assert page["limiter"].startswith("not memory bandwidth: 7%")


def test_static_facts_name_the_tensor_core_instruction():
    from simtlab.analyze.explain import static_facts

    tc = family("gemm_tc")
    p = tc.op().parse_size("4096:bf16")
    assert static_facts(tc.rung("mma_multistage"), "sm_90", p)["tensor_cores"] == "HMMA"
    assert static_facts(tc.rung("wgmma_ws"), "sm_90", p)["tensor_cores"] == "HGMMA"


def test_explain_cli(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMTLAB_DB", str(tmp_path / "none.db"))  # (no store yet: the static facts alone)
    res = CliRunner().invoke(app, ["explain", "gemm", "multistage", "--arch", "sm_90", "--json"])
    assert res.exit_code == 0, res.output
    page = json.loads(res.output)
    assert page["rung"] == "gemm/09_multistage" and page["measured"] == {}
    missing = CliRunner().invoke(app, ["explain", "gemm", "7", "--arch", "sm_90", "--db", str(tmp_path / "typo.db")])
    assert missing.exit_code == 2 and "no results database" in missing.output  # (a store asked for by name)
    table = CliRunner().invoke(app, ["explain", "gemm", "7", "--arch", "sm_90"], env={"COLUMNS": "140"})
    assert table.exit_code == 0 and "As[k][m]" in table.output and "no measurements" in table.output



def test_explain_takes_the_architecture_from_the_store_and_names_what_it_shows(tmp_path):
    """No GPU and no --arch: the store's runs say which architecture (sm_90); the measured table
    says best, latest and median of the runs."""
    s = Store(tmp_path / "r.db")
    for pct in (99.0, 103.0, 100.0):
        run = s.start_run("ladder", Dev())
        s.add_result(run, family="reduction", rung="reduction/08_warp_shuffle", problem="2^30", status="ok",
                     median_ms=1.0 / pct, gbs=40.0 * pct, pct_of_reference=pct)
    s.close()
    res = CliRunner().invoke(app, ["explain", "reduction", "8", "--db", str(tmp_path / "r.db"), "--json"])
    assert res.exit_code == 0, res.output
    page = json.loads(res.output)
    assert page["arch"] == "sm_90"
    m = page["measured"]["2^30"]
    assert (m["pct_of_reference"], m["best_run"], m["latest_pct"], m["latest_run"], m["median_pct"], m["runs"]) == \
        (103.0, 2, 100.0, 3, 100.0, 3)


def test_static_facts_build_the_shape_the_size_needs():
    """A rung whose shape follows the problem (rung 6 splits a row over a cluster's blocks) is built at
    the size's shape, not its defaults, which cannot hold a long row."""
    from simtlab.analyze.explain import static_facts
    from simtlab.ops import softmax

    for fam, size in (("softmax", "4096x32768:bf16:softmax_backward"), ("layernorm", "4096x32768:bf16:layer_norm_backward")):
        rung = family(fam).rung(6)
        facts = static_facts(rung, "sm_90", rung.ops.parse_size(size))
        assert facts["spill_bytes"] == 0 and facts["shared_bytes"] > 64 * 1024, (fam, facts)
    expr = static_facts(family("softmax").rung(6), "sm_90", softmax.parse_size("4096x32768:bf16"))["expression"]
    assert expr.replace(" ", "") == "softmax_cluster<1,512,4,4,4,0,true>"  # (bf16, 4 blocks of 512 x 16, 4 stages)
