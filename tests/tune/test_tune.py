import math
import random

import pytest

from simtlab.catalog import family
from simtlab.compile import CompileError
from simtlab.launch import build
from simtlab.tune import Space, tune
from simtlab.ops.gemm import gemm_warptile
from simtlab.tune.tuner import history_from_store


def test_space_basics():
    s = Space({"a": (1, 2, 3), "b": (4, 8)}, [("a divides b", lambda c: c["b"] % c["a"] == 0)], {"z": 1})
    assert s.size == 6 and s.names == ["a", "b"]
    assert [Space.key(c) for c in s.valid()] == [(("a", 1), ("b", 4)), (("a", 1), ("b", 8)),
                                                 (("a", 2), ("b", 4)), (("a", 2), ("b", 8))]
    assert s.violations({"a": 3, "b": 4}) == ["a divides b"]
    assert s.complete({"a": 1, "b": 4}) == {"z": 1, "a": 1, "b": 4}
    with pytest.raises(ValueError, match="no values"):
        Space({"a": ()})


def test_gemm_space_is_large_and_holds_the_measured_winner():
    space = gemm_warptile()
    valid = space.valid()
    assert len(valid) >= 500
    winner = dict(BM=128, BN=256, BK=16, WM=64, WN=64, WMITER=4, WNITER=2, STAGES=3, MINB=1)
    assert winner in valid


def test_valid_configurations_compile_and_rejected_ones_do_not():
    """The restrictions mirror the kernel's static_asserts: sampled valid points compile for sm_90,
    points rejected only by a kernel rule fail in NVRTC."""
    space = gemm_warptile()
    rung = family("gemm").rung("tuned")
    for config in random.Random(3).sample(space.valid(), 4):
        inst = build(rung, space.complete(config), "sm_90")
        assert inst.resources(True).registers > 0
    rejected = [dict(BM=128, BN=128, BK=8, WM=32, WN=32, WMITER=2, WNITER=2, STAGES=2, MINB=2),  # 16 lanes
                dict(BM=128, BN=128, BK=8, WM=64, WN=128, WMITER=4, WNITER=2, STAGES=2, MINB=1)]  # 64 threads
    for config in rejected:
        assert space.violations(config)
        with pytest.raises(CompileError):
            build(rung, space.complete(config), "sm_90")


def _objective(config):
    """A recorded-table stand-in: a smooth landscape with an optimum and some failing points."""
    if config["BK"] == 32 and config["STAGES"] == 4:
        raise RuntimeError("launch-error: too much shared memory")
    area = config["BM"] * config["BN"]
    return (1.0 + abs(math.log2(area) - 15) * 0.3 + abs(config["WMITER"] * config["WNITER"] - 8) * 0.05
            + 0.02 * config["STAGES"] + (0.1 if config["MINB"] == 2 else 0.0) + 0.01 * config["BK"] / 8)


def test_failures_are_recorded_and_the_loop_goes_on():
    configs = gemm_warptile().valid()
    result = tune(configs, _objective, "brute", budget=len(configs))
    failed = [e for e in result.evaluations if e.status == "failed"]
    assert failed and all("launch-error" in e.error for e in failed)
    assert len(result.evaluations) == len(configs)
    assert result.best.value == min(_objective(c) for c in configs if not (c["BK"] == 32 and c["STAGES"] == 4))


def test_cost_model_beats_random_at_ten_percent():
    configs = gemm_warptile().valid()
    optimum = min(v for v in (_safe(c) for c in configs) if v is not None)
    budget = len(configs) // 10
    gaps = {"model": [], "random": []}
    for seed in range(6):
        for strategy in gaps:
            best = tune(configs, _objective, strategy, budget=budget, seed=seed).best.value
            gaps[strategy].append(best / optimum - 1)
    assert sum(gaps["model"]) < sum(gaps["random"])
    assert max(gaps["model"]) < 0.05


def _safe(c):
    try:
        return _objective(c)
    except RuntimeError:
        return None


class Killed(BaseException):
    """Stands in for a kill: not an Exception, so the loop does not record it as a failure."""


def test_resume_measures_nothing_twice():
    configs = gemm_warptile().valid()[:40]
    calls, kill_at = [], [12]

    def objective(c):
        calls.append(Space.key(c))
        if len(calls) == kill_at[0]:
            raise Killed  # the run is killed mid-way
        return _objective(c)

    done = []
    with pytest.raises(Killed):
        tune(configs, objective, "random", budget=30, seed=1, on_eval=lambda e: done.append((e.config, e.value)))
    assert len(done) == 11
    calls.clear()
    kill_at[0] = None
    result = tune(configs, objective, "random", budget=30, seed=1, history=done)
    assert not set(calls) & {Space.key(c) for c, _ in done}
    assert len([e for e in result.evaluations if e.status == "history"]) == 11


def test_history_from_store(tmp_path):
    from simtlab.store import Store

    s = Store(tmp_path / "r.db")
    run = s.start_run("t")
    for params, ms, status in (({"BM": 64}, 2.0, "ok"), ({"BM": 64}, 1.5, "ok"), ({"BM": 128}, None, "wrong")):
        s.add_result(run, family="gemm", rung="gemm/10_tuned", problem="4096x4096x4096", params=params,
                     median_ms=ms, status=status)
    hist = {Space.key(c): v for c, v in history_from_store(s, "gemm", "gemm/10_tuned", "4096x4096x4096", None)}
    assert hist == {(("BM", 64),): 1.5, (("BM", 128),): None}


def test_tune_cli_arguments():
    from typer.testing import CliRunner

    from simtlab.cli import app

    r = CliRunner().invoke(app, ["tune", "gemm", "--rung", "naive"])
    assert r.exit_code == 2 and "no search space" in r.output
    r = CliRunner().invoke(app, ["tune", "gemm", "--strategy", "annealing"])
    assert r.exit_code == 2 and "unknown strategy" in r.output


def test_tpe_proposes_only_valid_new_points_and_beats_random():
    configs = gemm_warptile().valid()
    valid = {Space.key(c) for c in configs}
    optimum = min(v for v in (_safe(c) for c in configs) if v is not None)
    gaps = {"tpe": [], "random": []}
    for seed in range(3):
        for strategy in gaps:
            result = tune(configs, _objective, strategy, budget=60, seed=seed)
            keys = [Space.key(e.config) for e in result.evaluations]
            assert len(keys) == len(set(keys)) == 60 and set(keys) <= valid
            gaps[strategy].append(result.best.value / optimum - 1)
    assert sum(gaps["tpe"]) < sum(gaps["random"])


def test_tpe_takes_history():
    configs = gemm_warptile().valid()[:50]
    history = [(c, _safe(c)) for c in configs[:20]]
    result = tune(configs, _objective, "tpe", budget=10, seed=0, history=history)
    measured = [Space.key(e.config) for e in result.evaluations if e.status != "history"]
    assert len(measured) == 10 and not set(measured) & {Space.key(c) for c, _ in history}


def test_a_resumed_search_retries_a_configuration_that_faulted_once(tmp_path):
    """History from the store: a configuration whose only record is one fault (a timeout, a crash,
    a sticky CUDA error that an earlier configuration may have caused) is tried again; a second
    fault, or a failure of the configuration itself, stands."""
    from simtlab.store import Store
    from simtlab.tune.tuner import history_from_store

    store = Store(tmp_path / "r.db")
    run = store.start_run("simtlab tune")
    rows = [({"X": 1}, "timeout", None, None), ({"X": 2}, "crashed", None, None), ({"X": 2}, "crashed", None, None),
            ({"X": 3}, "failed", "RuntimeError: cudaErrorIllegalAddress: an illegal memory access", None),
            ({"X": 3}, "ok", None, 2.0), ({"X": 4}, "compile-error", "too much shared memory", None),
            ({"X": 5}, "failed", "EvaluationFailed: an illegal memory access was encountered", None)]
    for params, status, error, ms in rows:
        store.add_result(run, family="gemm", rung="gemm/10_tuned", params=params, problem="64x64x64", status=status,
                         error=error, median_ms=ms)
    history = {c["X"]: v for c, v in history_from_store(store, "gemm", "gemm/10_tuned", "64x64x64", None)}
    assert history == {2: None, 3: 2.0, 4: None}  # 1 and 5 faulted once: tried again


def test_cost_model_options_split_a_batch_between_the_model_and_random_draws():
    """explore random configurations a batch beside the model's fastest; members > 1 ranks by an
    optimistic bound over several fits. The defaults are the command's: one draw, one fit."""
    from simtlab.tune.strategies import CostModel

    configs = [{"a": a, "b": b} for a in range(12) for b in range(12)]
    cost = {(c["a"], c["b"]): 1.0 + (c["a"] - 7) ** 2 + (c["b"] - 3) ** 2 for c in configs}
    for kw, model_picks in (({}, 14), ({"explore": 3}, 12), ({"members": 3, "kappa": 1.0, "explore": 0}, 15)):
        s = CostModel(configs, seed=4, **kw)
        for c in s.ask(15):
            s.tell(c, cost[(c["a"], c["b"])])
        picks = s.ask(15)
        assert len(picks) == 15 and len({(c["a"], c["b"]) for c in picks}) == 15, kw
        assert not any(s.measured.get(tuple(sorted(c.items()))) for c in picks), kw  # nothing measured again
        fastest = sorted(picks[:model_picks], key=lambda c: cost[(c["a"], c["b"])])[0]
        assert cost[(fastest["a"], fastest["b"])] <= 5, kw  # the model's share lands near the optimum


def test_a_configuration_that_compiles_to_measured_code_takes_its_time_without_an_evaluation():
    """With the compiled code's identity, a knob that changes nothing (here: Z, in half the space)
    costs no evaluation: such a configuration takes the time of the one with its code, measured
    before or earlier in its batch, and the budget goes to configurations with new code."""
    configs = [{"X": x, "Z": z} for x in range(8) for z in (0, 1)]
    measured = []

    def objective(c):
        measured.append(c)
        return 1.0 + c["X"]

    result = tune(configs, objective, "brute", budget=8, batch=4, identity=lambda c: f"code-{c['X']}")
    assert len(measured) == 8 and sorted(c["X"] for c in measured) == list(range(8))
    same = [e for e in result.evaluations if e.status == "same code"]
    # (the last batches are cut to the budget left, so a twin or two may not be proposed)
    assert len(same) >= 6 and all(e.value == 1.0 + e.config["X"] for e in same)
    assert "compiles to the same code as" in same[0].error
    # no identity known (a build that failed): measured as before
    measured.clear()
    tune(configs, objective, "brute", budget=4, batch=4, identity=lambda c: None)
    assert len(measured) == 4
