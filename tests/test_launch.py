"""Choosing a launch's parameters (no GPU needed)."""

import json

import pytest

from simtlab.catalog import family
from simtlab.launch import choose_params, rung_source
from simtlab.store import Store


class H200:
    name, compute_capability, driver_version, sms = "NVIDIA H200", (9, 0), 1, 132

    def as_dict(self):
        return {}


def test_the_tuned_rung_takes_the_store_best_only_where_it_is_this_kernels(tmp_path):
    """Rung 10 takes its parameters from the store's best verified row, but not from a row that set
    a knob the rung no longer has (it would not build) or lacked one it has now (another kernel):
    then the size defaults; a row measured on the source as it stands comes before older ones."""
    fam = family("gemm")
    rung = fam.rung("tuned")
    problem = fam.op().parse_size("2048")
    store = Store(tmp_path / "r.db")
    run = store.start_run("x", H200())
    defaults = rung.size_defaults(problem, H200(), True)
    full = dict(rung.params("sm_90", defaults))

    def add(ms, params, source=None):
        store.add_result(run, family="gemm", rung=rung.id, problem=problem.label, median_ms=ms, status="ok",
                         params=params, extra={"source": source} if source else None)

    add(1.0, {**full, "XSLICE": 1})  # a knob since removed
    add(1.1, {k: v for k, v in full.items() if k != "INTERIOR"})  # from before a knob was added
    assert choose_params(rung, problem, H200(), True, store) == defaults
    older = {**full, "STAGES": 3}
    add(1.2, older, "0123456789ab")
    assert choose_params(rung, problem, H200(), True, store) == older
    now = {**full, "STAGES": 2}
    add(1.3, now, rung_source(rung))
    assert choose_params(rung, problem, H200(), True, store) == now
    assert json.loads(store.best("gemm", rung.id, problem.label, H200.name)["params"])["XSLICE"] == 1


def _store_with_best(tmp_path, rung, problem, params):
    """A store holding one verified row of `rung` at `problem` on the H200, measured on its source now."""
    store = Store(tmp_path / "r.db")
    run = store.start_run("x", H200())
    store.add_result(run, family=rung.family, rung=rung.id, problem=problem.label, median_ms=1.0, status="ok",
                     params=params, extra={"source": rung_source(rung)})
    return store


@pytest.mark.parametrize("fam_name, rung_name, size, knob", [
    ("gemm_tc", "wgmma_cluster", "4096:bf16", {"GROUP_M": 8, "STAGES": 5}),
    ("conv2d", "pipelined", "8192:r3", {"BX": 32, "BY": 8, "NT": 2}),
])
def test_the_tuned_spaces_feed_the_ladder_unless_it_runs_shipped(tmp_path, fam_name, rung_name, size, knob):
    """The rungs `simtlab tune` searches beside gemm rung 10 - gemm_tc rung 6, conv2d rung 6 - take the
    store's fastest verified row for the problem in a ladder; `--shipped` (LadderOptions(stored=False))
    measures their shipped parameters, and a sweep's point its own."""
    from simtlab.ladder import LadderOptions, ladder_params

    fam = family(fam_name)
    rung = fam.rung(rung_name)
    problem = fam.op().parse_size(size)
    shipped = rung.size_defaults(problem, H200(), None)
    tuned = {**dict(rung.params("sm_90", shipped)), **knob}
    assert tuned != dict(rung.params("sm_90", shipped))
    store = _store_with_best(tmp_path, rung, problem, tuned)
    assert rung.from_store
    assert ladder_params(rung, problem, H200(), None, store, LadderOptions()) == tuned
    assert ladder_params(rung, problem, H200(), None, store, LadderOptions(stored=False)) == shipped
    name, value = next(iter(knob.items()))
    point = LadderOptions(overrides={rung.name: {name: value}})
    assert ladder_params(rung, problem, H200(), None, store, point) == {**shipped, name: value}


def test_the_ladder_help_names_the_rungs_that_read_the_store():
    """`simtlab ladder --stored/--shipped` names those rungs: the catalog's, no more and no fewer."""
    import inspect

    from simtlab.catalog import FAMILIES
    from simtlab.commands.measure import ladder

    help_text = inspect.signature(ladder).parameters["stored"].default.help
    readers = {(f.name, r.stage) for f in FAMILIES.values() for r in f.rungs if r.from_store}
    assert readers == {("gemm", 10), ("gemm_tc", 6), ("conv2d", 6)}
    assert "gemm 10, gemm_tc 6, conv2d 6" in help_text


def test_a_library_call_takes_the_store_row_and_survives_a_stale_one(tmp_path, monkeypatch):
    """simtlab.gemm_tc and simtlab.gemm build their kernels at the store's fastest row for the shape
    (gemm_plans._with_store_params); a row that no longer builds or launches - its kernel changed since -
    gives a warning and the shipped parameters, not a failed product."""
    from simtlab.ops import gemm_plans as plans
    from simtlab.launch import LaunchError

    fam = family("gemm_tc")
    rung = fam.rung("wgmma_cluster")
    problem = fam.op().parse_size("2048:bf16")
    shipped = rung.size_defaults(problem, H200(), None)
    tuned = {**dict(rung.params("sm_90", shipped)), "STAGES": 5}
    _store_with_best(tmp_path, rung, problem, tuned).close()
    monkeypatch.setenv("SIMTLAB_DB", str(tmp_path / "r.db"))
    plans._store_params.cache_clear()
    try:
        made = plans._with_store_params("gemm_tc", rung, problem, None, H200(), dict)
        assert made == tuned

        def refuse_the_stored(params):
            if dict(params).get("STAGES") == 5:
                raise LaunchError("needs more shared memory than a block may have")
            return dict(params)

        with pytest.warns(RuntimeWarning, match="does not run now .*shipped parameters"):
            assert plans._with_store_params("gemm_tc", rung, problem, None, H200(), refuse_the_stored) == shipped

        def refuse_all(params):
            raise LaunchError("no block fits on an SM")

        with pytest.warns(RuntimeWarning), pytest.raises(LaunchError):  # (the shipped ones failing: the call's error)
            plans._with_store_params("gemm_tc", rung, problem, None, H200(), refuse_all)
    finally:
        plans._store_params.cache_clear()
