"""The tuner's goal, asserted on every measured space committed under tests/fixtures (brute-force
tables from the H200): the default strategy, at the batch `simtlab tune` uses on the H200's host,
with each configuration's static profile and code identity as the command computes them
(tests/fixtures/static/: a kernel measured once), over 100 seeds, the table shuffled per seed, the
configurations the command would refuse at the table's size left out as it leaves them out (budgets
stay fractions of the whole space). At 10% of the space's evaluations the best found is on average
within 1% of the optimum and never beyond 3%; at 5%, within 2% on average. A change to the
strategies, the batch policy or the tuning loop that breaks this fails here."""

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # (~5 minutes of replays: the quick run leaves them out)

from simtlab.tune.replay import evaluations_to_reach, load_table, score, top_configs
from simtlab.tune.strategies import DEFAULT_STRATEGY

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# whole spaces only: a table marked as a sample (a run's time limit cut it short) is replayed in the
# docs but is not one of the goal's spaces (those of >= 300 configurations, measured whole)
TABLES = [p for p in sorted(FIXTURES.glob("*_h200_*.json")) if "sample" not in load_table(p).meta]
SEEDS = 100


# Spaces on which the default is known to miss the goal, with what it scored: kept as strict expected
# failures, so a change that mends one fails here until it is moved out of this list.
KNOWN_MISSES = {
    "gemm_warptiling_h200_2048": "held out from the default's first choice; with the builds' static profiles and one "
                                 "evaluation a kernel, chosen leaving it out: 10% mean +0.52%, worst +5.12%; 5% mean "
                                 "+2.26% (docs/design/tune.md)",
    # measured after the default was chosen (run 2026-12-05_h200_134060_warptiling_tables): the honest test
    "gemm_warptiling_h200_4096": "measured after the default was chosen, never used to choose it: 10% mean +2.10%, "
                                 "worst +6.02%; 5% mean +3.56% (docs/design/tune.md)",
    "gemm_warptiling_h200_4096x4096x1024": "measured after the default was chosen, never used to choose it: 10% mean "
                                           "+1.93%, worst +9.52%; 5% mean +3.74% (docs/design/tune.md)",
}


def test_there_are_six_whole_measured_spaces_of_300_or_more_and_a_memory_bound_one():
    sizes = {p.stem: len(load_table(p).times) for p in TABLES}
    assert sum(n >= 300 for n in sizes.values()) >= 6, sizes
    assert any(s.startswith(("softmax", "layernorm")) for s in sizes), sizes


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=KNOWN_MISSES[p.stem]))
                                  if p.stem in KNOWN_MISSES else p for p in TABLES], ids=lambda p: p.stem)
def test_the_default_strategy_meets_the_goal(path):
    t = load_table(path)
    rows = {r.fraction: r for r in score(t, [DEFAULT_STRATEGY], fractions=(0.05, 0.10), seeds=SEEDS)}
    at5, at10 = rows[0.05], rows[0.10]
    assert at10.batch == 15 and at10.seeds == SEEDS
    assert at10.mean_gap <= 0.01, f"10%: mean {at10.mean_gap:+.2%}"
    assert at10.worst_gap <= 0.03, f"10%: worst {at10.worst_gap:+.2%}"
    assert at5.mean_gap <= 0.02, f"5%: mean {at5.mean_gap:+.2%}"


# (source table, target table): sizes of one rung whose optima differ
WARM_PAIRS = [("gemm_tuned_h200_2048", "gemm_tuned_h200_4096x4096x1024"),
              ("conv2d_pipelined_h200_8192_r3", "conv2d_pipelined_h200_8192_r1")]


@pytest.mark.parametrize("source, target", WARM_PAIRS, ids=lambda s: s)
def test_a_warm_start_from_another_size_pays(source, target):
    """Tuned at one size, the search at another (whose optimum is a different configuration) starts
    from the first size's 8 best and comes within 1% of the optimum in fewer evaluations."""
    src, dst = (load_table(FIXTURES / f"{n}.json") for n in (source, target))
    assert min(src.times, key=lambda k: src.times[k] or float("inf")) != \
        min(dst.times, key=lambda k: dst.times[k] or float("inf"))
    cold = evaluations_to_reach(dst, seeds=10)
    warm = evaluations_to_reach(dst, seeds=10, warm_start=top_configs(src))
    big = 10 ** 6
    total = lambda runs: sum(big if n is None else n for n in runs)  # noqa: E731
    assert total(warm) < total(cold), (warm, cold)
