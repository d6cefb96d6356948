"""Strategies on the brute-force tables measured on the H200 (committed as test data)."""

from pathlib import Path

import pytest

from simtlab.tune import Space
from simtlab.tune.replay import best_so_far, load_table
from simtlab.tune.spaces import gemm_features, gemm_warptile

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TABLES = sorted(FIXTURES.glob("gemm_tuned_h200_*.json"))


def test_the_tables_cover_exactly_the_valid_space():
    space = gemm_warptile()
    valid = {Space.key(c) for c in space.valid()}
    for path in TABLES:
        t = load_table(path)
        assert set(t.times) == valid, path.name  # the restrictions prune exactly what the table lacks
        assert t.meta["device"] == "NVIDIA H200" and t.optimum > 0


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


def test_a_recorded_failure_raises():
    t = load_table(TABLES[0])
    key = next(iter(t.times))
    broken = type(t)(t.params, {**t.times, key: None}, t.meta)
    with pytest.raises(RuntimeError, match="failed"):
        broken(dict(key))
    with pytest.raises(KeyError):
        t({"BM": 1})
