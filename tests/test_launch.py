"""Choosing a launch's parameters (no GPU needed)."""

import json

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
