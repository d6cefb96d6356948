import time

import pytest

from simtlab.tune import tune
from simtlab.tune.worker import EvaluationCrashed, EvaluationFailed, EvaluationTimeout, IsolatedEvaluator, Precompiler

FACTORY = "tune_objectives:sleepy"


def test_a_hang_is_killed_recorded_as_timeout_and_the_sweep_goes_on():
    configs = [{"x": x} for x in (1, 2, 3, 4, -1, 5)]
    with IsolatedEvaluator(FACTORY, {"hang_on": 3}, timeout_s=3.0) as ev:
        t0 = time.monotonic()
        result = tune(configs, ev, "brute", budget=len(configs))
        assert time.monotonic() - t0 < 60
        assert ev.restarts == 1
    status = {e.config["x"]: (e.status, e.value) for e in result.evaluations}
    assert status[3][0] == "timeout" and status[-1][0] == "failed"
    assert status[4] == ("ok", 4.5) and status[5] == ("ok", 5.5)  # measured by the fresh child
    assert result.best.value == 1.5


def test_a_dying_process_is_reported_as_crashed():
    with IsolatedEvaluator(FACTORY, {"hang_on": -99, "die_on": 2}, timeout_s=30) as ev:
        assert ev({"x": 1}) == 1.5
        with pytest.raises(EvaluationCrashed, match="died"):
            ev({"x": 2})
        assert ev({"x": 6}) == 6.5
        with pytest.raises(EvaluationFailed, match="negative x"):
            ev({"x": -4})


def test_a_child_that_cannot_start_says_why():
    with IsolatedEvaluator("tune_objectives:broken", timeout_s=5) as ev:
        with pytest.raises(EvaluationCrashed, match="no GPU here"):
            ev({"x": 1})
    with pytest.raises(EvaluationTimeout):
        raise EvaluationTimeout("is a TimeoutError") from None


def test_precompiler_fills_the_cache_from_worker_processes(tmp_path, monkeypatch):
    from simtlab.catalog import family
    from simtlab.launch import build
    from simtlab.tune.spaces import gemm_warptile

    monkeypatch.setenv("SIMTLAB_CACHE_DIR", str(tmp_path))
    space = gemm_warptile()
    configs = space.valid()[:2]
    with Precompiler("gemm", "tuned", "sm_90", workers=2, complete=space.complete) as pc:
        pc.submit(configs)
        for c in configs:
            pc.wait(c, timeout=600)
    assert len(list(tmp_path.rglob("*.cubin"))) == 2
    t0 = time.monotonic()
    build(family("gemm").rung("tuned"), space.complete(configs[0]), "sm_90")  # a cache hit now
    assert time.monotonic() - t0 < 2.0
