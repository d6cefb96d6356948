"""Strategies on the brute-force tables measured on the H200 (committed as test data)."""

from pathlib import Path

import pytest

from simtlab.tune import Space
from simtlab.tune.replay import best_so_far, command_configs, load_table
from simtlab.ops.gemm import gemm_features

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TABLES = sorted(FIXTURES.glob("gemm_tuned_h200_*.json"))


H200_SMEM_OPTIN = 232448  # the bytes of shared memory a block may opt into on the H200 (its spaces' limit)


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*_h200_*.json")), ids=lambda p: p.stem)
def test_every_table_covers_exactly_its_rungs_valid_space(path):
    """Each committed table is the whole space its rung declares (failed points kept, as None): the
    restrictions prune exactly what the table lacks, and nothing was left unmeasured. A table that
    says it is a sample (a run's time limit) holds only points of the space, failures aside (a rule
    added since may exclude what failed)."""
    from simtlab.catalog import family

    t = load_table(path)
    rung_id = t.meta["rung"]
    space = family(rung_id.split("/")[0]).rung(rung_id).space(H200_SMEM_OPTIN)
    valid = {Space.key(c) for c in space.valid()}
    if t.meta.get("sample"):
        assert {k for k, v in t.times.items() if v is not None} <= valid and len(t.times) >= 100, path.name
    else:
        assert set(t.times) == valid, path.name
    assert t.meta["device"] == "NVIDIA H200" and t.optimum > 0 and t.meta["commit"]


@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.stem)
def test_model_and_tpe_beat_random_at_ten_percent(path):
    t = load_table(path)
    budget = len(t.times) // 10
    seeds = range(4)
    mean = {}
    for strategy, kw in (("random", {}), ("model", {"features": gemm_features}), ("tpe", {})):
        gaps = [best_so_far(t, strategy, budget, s, **kw)[-1] / t.optimum - 1 for s in seeds]
        mean[strategy] = sum(gaps) / len(gaps)
    assert mean["model"] < mean["random"] and mean["tpe"] < mean["random"], mean
    assert mean["model"] < 0.02, mean


def test_a_table_with_failures_exists_and_the_command_leaves_them_out_by_reason():
    """The memory-bound tables keep their failed points (a row the lanes cannot hold, refused at
    launch on the GPU); the command's size filter (session.runnable_at) predicts exactly those, so the
    replay - as the command - searches only the rest. No measured point is filtered out."""
    failing = [p for p in sorted(FIXTURES.glob("*_h200_*.json")) if None in load_table(p).times.values()]
    whole = [p for p in failing if not load_table(p).meta.get("sample")]
    assert {p.stem for p in whole} >= {"softmax_vectorized_h200_131072x1024", "layernorm_two_sums_h200_131072x1024"}
    for p in whole:
        t = load_table(p)
        kept = {Space.key(c) for c in command_configs(t)}
        assert kept == {k for k, v in t.times.items() if v is not None}, p.name


def test_a_recorded_failure_raises():
    t = load_table(TABLES[0])
    key = next(iter(t.times))
    broken = type(t)(t.params, {**t.times, key: None}, t.meta)
    with pytest.raises(RuntimeError, match="failed"):
        broken(dict(key))
    with pytest.raises(KeyError):
        t({"BM": 1})


def test_warm_start_from_another_size_finds_the_optimum_at_once(tmp_path):
    """The 2048^3 table's best configurations, stored, seed a search on the 4096^3 table."""
    from simtlab.store import Store
    from simtlab.tune import tune
    from simtlab.tune.tuner import warm_start_from_store

    small, large = (load_table(FIXTURES / f"gemm_tuned_h200_{n}.json") for n in (2048, 4096))
    store = Store(tmp_path / "r.db")
    run = store.start_run("t")
    flops = 2 * 2048 ** 3
    for key, ms in small.times.items():
        store.add_result(run, family="gemm", rung="gemm/10_tuned", problem="2048x2048x2048",
                         params={**dict(key), "GROUP_M": 8}, median_ms=ms, gflops=flops / ms / 1e6, status="ok")
    seeds = warm_start_from_store(store, "gemm", "gemm/10_tuned", "4096x4096x4096", small.params, {"GROUP_M": 8})
    assert len(seeds) == 8 and seeds[0] == dict(min(small.times, key=small.times.get))
    cold = tune(large.configs, large, "model", budget=8, seed=0, features=gemm_features)
    warm = tune(large.configs, large, "model", budget=8, seed=0, features=gemm_features, warm_start=seeds)
    assert [Space.key(e.config) for e in warm.evaluations] == [Space.key(c) for c in seeds]
    assert warm.best.value / large.optimum - 1 < 0.005 < cold.best.value / large.optimum - 1


def test_the_replay_runs_the_commands_search():
    """The replay proposes the batch `simtlab tune` does on the H200 host (15 compilers: 15 at once),
    shuffles the table per seed (the same seed, the same order), and scores mean, median, worst and
    the share of seeds that found the optimum."""
    from simtlab.tune.replay import H200_HOST_CPUS, command_batch_for, score
    from simtlab.tune.session import command_batch

    assert command_batch_for(H200_HOST_CPUS) == 15 and command_batch(2) == 4
    t = load_table(TABLES[0])
    once = best_so_far(t, "random", 20, seed=3)
    assert once == best_so_far(t, "random", 20, seed=3) != best_so_far(t, "random", 20, seed=4)
    rows = score(t, ["random"], fractions=(0.05, 0.2), seeds=6)
    assert [r.fraction for r in rows] == [0.05, 0.2] and all(r.batch == 15 and r.seeds == 6 for r in rows)
    for r in rows:
        assert 0 <= r.median_gap <= r.worst_gap and r.mean_gap <= r.worst_gap and 0 <= r.found_share <= 1
    assert rows[1].mean_gap <= rows[0].mean_gap  # (a larger budget never finds worse: same seeds)


def test_a_recorded_failure_fails_the_evaluation_as_it_would_live():
    from simtlab.tune import tune

    t = load_table(TABLES[0])
    failing = next(iter(t.times))
    broken = type(t)(t.params, {**t.times, failing: None}, t.meta)
    result = tune(broken.configs[:8], broken, "brute", budget=8, batch=4)  # (the failing one first)
    statuses = {Space.key(e.config): e.status for e in result.evaluations}
    assert statuses[failing] == "failed" and sum(s == "ok" for s in statuses.values()) == 7


def test_the_replay_measures_one_kernel_once_as_the_command_does():
    """Where a table's code identities are committed, configurations that compile to one kernel cost
    one evaluation: the others take its time ("same code", as `simtlab tune`'s compilers tell it),
    and the curve counts only the evaluations spent - `budget` of them."""
    import dataclasses

    from simtlab.tune import tune

    t = load_table(TABLES[0])
    keys = sorted(t.times)
    code = {k: str(i // 2) for i, k in enumerate(keys)}  # every two neighbours one kernel
    twins = dataclasses.replace(t, identity=code)
    curve = best_so_far(twins, "random", 40, seed=1)
    assert len(curve) == 40 and curve == sorted(curve, reverse=True)
    configs = command_configs(twins)
    result = tune(configs, twins, "random", 40, seed=1, batch=15, identity=lambda c: code[Space.key(c)])
    same = [e for e in result.evaluations if e.status == "same code"]
    assert same and sum(e.status == "ok" for e in result.evaluations) == 40
    for e in same:  # the twin's time
        i = keys.index(Space.key(e.config))
        assert e.value == t.times[keys[i ^ 1]]
    # without the identities every point costs an evaluation
    assert all(e.status == "ok" for e in tune(configs, t, "random", 40, seed=1, batch=15).evaluations)
