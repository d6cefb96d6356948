"""The isolated ladder's bookkeeping, with a stand-in for the measuring child (no GPU needed)."""

from simtlab.catalog import family
from simtlab.children import EvaluationFailed, EvaluationTimeout
from simtlab.ladder import LadderOptions, Row, run_ladder_isolated
from simtlab.store import Store


class FakeChild:
    """Answers like `ladder_child`: references time 1 ms; `hang` rungs time out, `fault` rungs come
    back with a sticky error, `crash` rungs lose the process."""

    def __init__(self, hang=(), fault=(), crash=()):
        self.hang, self.fault, self.crash = set(hang), set(fault), set(crash)
        self.requests, self.resets = [], 0

    def __call__(self, request):
        self.requests.append(request)
        label = family("gemm").op().parse_size(request["size"]).label
        if not request["rungs"]:
            return [Row("gemm", label, "cuBLAS", None, "reference", median_ms=1.0)], {label: (1.0, "cuBLAS")}
        name = request["rungs"][0]
        if name in self.hang:
            raise EvaluationTimeout("no result within 1 s: the process was killed")
        if name in self.crash:
            raise EvaluationFailed("the measuring process died (exit code -11)")
        row = Row("gemm", label, name, 1, "ok", median_ms=2.0)
        if name in self.fault:
            row.status, row.error = "error", "CUDARuntimeError: cudaErrorIllegalAddress: an illegal memory access"
        return [row], request["refs"]

    def reset(self):
        self.resets += 1


def test_a_hung_or_faulting_rung_costs_that_rung_only(tmp_path):
    fam = family("gemm")
    rungs = fam.rungs[:4]
    child = FakeChild(hang={rungs[1].name}, fault={rungs[2].name}, crash={rungs[3].name})
    store = Store(tmp_path / "r.db")
    run = store.start_run("isolated")
    seen = []
    rows = run_ladder_isolated(fam, ["128"], rungs, store, run, LadderOptions(), on_row=seen.append, child=child)
    assert [r.status for r in rows] == ["reference", "ok", "timeout", "error", "error"]
    assert "killed" in rows[2].error and "died" in rows[4].error
    assert child.resets == 1  # after the sticky error, a fresh process for the next rung
    assert seen == rows
    # the child stored its own rows; the ones it could not give were stored here, with the reason
    stored = store.results(run_id=run)
    assert {(r["rung"], r["status"]) for r in stored} == {(rungs[1].id, "timeout"), (rungs[3].id, "error")}
    # every rung request carried the references timed once, so none timed them again
    label = fam.op().parse_size("128").label
    assert all(req["refs"] == {label: (1.0, "cuBLAS")} for req in child.requests[1:])


def test_references_that_fail_are_not_timed_again_per_rung():
    fam = family("gemm")

    class NoReferences(FakeChild):
        def __call__(self, request):
            if not request["rungs"]:
                raise EvaluationTimeout("no result within 1 s: the process was killed")
            return super().__call__(request)

    child = NoReferences()
    rows = run_ladder_isolated(fam, ["128"], fam.rungs[:2], child=child)
    assert [r.status for r in rows] == ["timeout", "ok", "ok"]
    assert rows[0].name == "references"
    assert all(req["refs"] == {fam.op().parse_size("128").label: None} for req in child.requests[1:])


def test_a_sweep_measures_each_point_in_the_child_and_a_hung_point_costs_itself():
    """`points`: the rung once per parameter set, each request carrying its own overrides; the
    point that hangs is stored with its parameters, and the next is measured."""
    fam = family("gemm")
    rung = fam.rungs[1]

    class HangsAtBK16(FakeChild):
        def __call__(self, request):
            if request.get("overrides", {}).get(rung.name, {}).get("BK") == 16:
                self.requests.append(request)
                raise EvaluationTimeout("no result within 1 s: the process was killed")
            return super().__call__(request)

    child = HangsAtBK16()
    points = [{"BK": 8}, {"BK": 16}, {"BK": 32}]
    rows = run_ladder_isolated(fam, ["128"], [rung], child=child, points=points)
    assert [r.status for r in rows] == ["reference", "ok", "timeout", "ok"]
    assert rows[2].params == {"BK": 16}
    assert [req.get("overrides") for req in child.requests] == [None] + [{rung.name: p} for p in points]


def test_the_fp32_ladder_times_each_precision_of_the_public_call_where_it_runs(monkeypatch):
    """The gemm ladder's API rows: simtlab.gemm at the default precision, tf32x3 and f16x3. Off
    Hopper the f16x3 call (rung 13, sm_90 only) is a row marked unsupported, not a failure; the
    others are attempted (here, with no GPU, they fail and are reported, as any reference would)."""
    from types import SimpleNamespace

    import simtlab.device
    import simtlab.ladder
    from simtlab.api_calls import GEMM_CALL, GEMM_F16X3_CALL, GEMM_TF32X3_CALL
    from simtlab.ladder import run_ladder

    monkeypatch.setattr(simtlab.ladder, "_free_gpu_memory", lambda: None)  # (no GPU here)

    for cc, arch in (((8, 0), "sm_80"), ((9, 0), "sm_90")):
        monkeypatch.setattr(simtlab.device, "device_info",
                            lambda cc=cc, arch=arch: SimpleNamespace(compute_capability=cc, arch=arch, name="stand-in"))
        rows = {r.name: r for r in run_ladder(family("gemm"), ["64"], rungs=[], opts=LadderOptions(clocks=False))}
        assert {GEMM_CALL, GEMM_TF32X3_CALL, GEMM_F16X3_CALL} <= set(rows)
        assert rows[GEMM_TF32X3_CALL].status == "error"  # (attempted: sm_80 runs rung 12)
        if arch == "sm_80":
            assert rows[GEMM_F16X3_CALL].status == "unsupported" and "sm_80" in rows[GEMM_F16X3_CALL].error
        else:
            assert rows[GEMM_F16X3_CALL].status == "error"


def test_every_family_with_an_operator_times_its_public_call_in_its_ladder():
    """A ladder shows what users get: every family that declares an operator has a row timing the
    public call (spmv two: the one-off call and a prepared plan's)."""
    from simtlab.api_calls import PLAN_CALL, api_references
    from simtlab.catalog import families

    for fam in families():
        if fam.operators:
            assert api_references(fam.name), fam.name
    assert PLAN_CALL in {r.name for r in api_references("spmv")}
