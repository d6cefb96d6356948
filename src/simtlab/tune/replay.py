"""Strategies judged on a recorded brute-force table: every configuration of a space measured once
on a GPU, replayed as the objective, so each strategy can be run over many seeds and budgets at no
GPU cost and compared with the true optimum. The replay is the command's search: the same
`tune` loop, the batch `simtlab tune` proposes on a host of `cpus` CPUs (tune.session's policy),
recorded failures failing as they would live, and the table's order shuffled for each seed (a
table sorted fastest-first would let ties break toward the optimum)."""

from __future__ import annotations

import json
import random
import statistics
from dataclasses import dataclass
from pathlib import Path

from ..space import Config, Space
from .strategies import DEFAULT_STRATEGY
from .tuner import tune

__all__ = ["Table", "load_table", "static_path", "table_rung", "best_so_far", "StrategyScore", "score",
           "command_options", "command_configs", "top_configs", "evaluations_to_reach", "GOAL", "goal_misses"]

# The tuner's goal on a measured space: at 10% of its evaluations the best found is on average within
# 1% of the optimum and never beyond 3%; at 5%, within 2% on average (tests/tune/test_goal.py).
GOAL = {"mean10": 0.01, "worst10": 0.03, "mean5": 0.02}


def goal_misses(mean10: float, worst10: float, mean5: float) -> int:
    """How many of the goal's three bounds these gaps exceed."""
    return (mean10 > GOAL["mean10"]) + (worst10 > GOAL["worst10"]) + (mean5 > GOAL["mean5"])


@dataclass(frozen=True)
class Table:
    params: list[str]
    times: dict[tuple, float | None]  # Space.key(config) -> median ms, None for a failed configuration
    meta: dict
    static: dict | None = None  # Space.key(config) -> its StaticProfile (None: no block fits), where committed
    identity: dict | None = None  # Space.key(config) -> its compiled code's identity, where committed

    @property
    def configs(self) -> list[Config]:
        return [dict(k) for k in self.times]

    @property
    def optimum(self) -> float:
        return min(v for v in self.times.values() if v is not None)

    def __call__(self, config: Config) -> float:
        try:
            value = self.times[Space.key(config)]
        except KeyError:
            raise KeyError(f"{config} is not in the recorded table") from None
        if value is None:
            raise RuntimeError("failed when it was recorded")
        return value


def static_path(table_path: str | Path) -> Path:
    """Where a table's static profiles are committed (benchmarks/table_static.py writes them)."""
    table_path = Path(table_path)
    return table_path.parent / "static" / table_path.name


def load_table(path: str | Path) -> Table:
    """A table written by the benchmarks (params + rows of values and ms), or `simtlab tune --json`
    output; with its configurations' static profiles where they are committed beside it."""
    data = json.loads(Path(path).read_text())
    if isinstance(data, list):  # simtlab tune --json
        names = list(data[0]["config"])
        times = {Space.key(e["config"]): e["ms"] for e in data}
        return Table(names, times, {})
    names = data["params"]
    times = {Space.key(dict(zip(names, row[:-1]))): row[-1] for row in data["rows"]}
    return Table(names, times, {k: v for k, v in data.items() if k not in ("params", "rows")},
                 *_load_static(static_path(path), names))


def _load_static(path: Path, names: list[str]) -> tuple[dict | None, dict | None]:
    """The committed static profiles (key -> StaticProfile, None where no block fits or it did not
    build) and code identities (key -> identity; None where no row has one) of a table's points."""
    if not path.exists():
        return None, None
    from .static import StaticProfile

    data = json.loads(path.read_text())
    if data["params"] != names:
        raise ValueError(f"{path}: parameters {data['params']} are not its table's {names}")
    static, codes = {}, {}
    for row in data["rows"]:
        key, facts = Space.key(dict(zip(names, row[:-1]))), dict(row[-1])
        code = facts.pop("code", None)
        if code is not None:
            codes[key] = code
        static[key] = None if "error" in facts else StaticProfile(**facts)
    return static, codes or None


H200_HOST_CPUS = 16  # the machine `simtlab tune` runs on beside the H200


def command_batch_for(cpus: int) -> int:
    """The batch `simtlab tune` uses on a host of `cpus` CPUs (its default compiler count)."""
    from .session import command_batch
    from .worker import compile_workers

    return command_batch(compile_workers(cpus=cpus))


def command_options(table: Table, strategy: str) -> dict:
    """What `simtlab tune` gives the strategy for the table's rung (meta "rung", e.g. gemm/10_tuned):
    session.strategy_options for that rung; nothing for a table that names no rung."""
    rung_id = table.meta.get("rung")
    if not rung_id:
        return {}
    from ..catalog import family
    from .session import strategy_options

    static = (lambda c: table.static.get(Space.key(c))) if table.static else None
    return strategy_options(family(rung_id.split("/")[0]).rung(rung_id), strategy, static)


def table_rung(table: Table):
    """The rung, its space on the table's architecture and the problem a table was measured at
    (None where the table names no rung or problem)."""
    rung_id, label = table.meta.get("rung"), table.meta.get("problem")
    if not rung_id or not label:
        return None
    from ..catalog import family
    from ..hw.occupancy import arch_limits
    from .session import rung_space

    fam = family(rung_id.split("/")[0])
    rung = fam.rung(rung_id)
    space = rung_space(fam, rung, arch_limits(table.meta.get("arch", "sm_90")).smem_per_block_optin)
    return rung, space, fam.op().parse_size(label)


def command_configs(table: Table) -> list[Config]:
    """The table's configurations as `simtlab tune` would search them at its problem: those the
    launch refuses at that size (session.runnable_at) left out before the search, as the command
    leaves them out. A table that names no rung or problem is searched whole."""
    found = table_rung(table)
    if found is None:
        return table.configs
    from .session import runnable_at

    rung, space, problem = found
    configs = runnable_at(rung, table.configs, problem, None, space.fixed)[0]
    if table.static:  # the command leaves out what does not build or fit on an SM as well
        configs = [c for c in configs if table.static.get(Space.key(c)) is not None]
    return configs


def top_configs(table: Table, k: int = 8) -> list[Config]:
    """The table's `k` fastest configurations: what a warm start from its problem would measure first
    (as tuner.warm_start_from_store takes them from the store)."""
    ok = sorted((k_ for k_ in table.times if table.times[k_] is not None), key=table.times.get)
    return [dict(k_) for k_ in ok[:k]]


def best_so_far(table: Table, strategy: str, budget: int, seed: int, batch: int | None = None,
                shuffle: bool = True, **kw) -> list[float]:
    """The best time found after 1, 2, ... `budget` evaluations (inf until the first success), the
    search run as the command runs it: the configurations it would search (command_configs), `batch`
    proposals at a time (default: the H200 host's), the strategy's options as the command sets them
    (command_options; `kw` adds or overrides), in an order shuffled by `seed`; where the table's
    code identities are committed, a configuration that compiles to the code of one measured takes
    its time without spending an evaluation, as the command's compilers let it."""
    configs = command_configs(table)
    if shuffle:
        random.Random(seed).shuffle(configs)
    batch = batch or command_batch_for(H200_HOST_CPUS)
    kw = {**command_options(table, strategy), **kw}
    if table.identity and "identity" not in kw:
        kw["identity"] = lambda c: table.identity.get(Space.key(c))
    curve, best = [], float("inf")
    for e in tune(configs, table, strategy, budget, seed, batch=batch, **kw).evaluations:
        if e.value is not None:
            best = min(best, e.value)
        if e.status != "same code":  # (free: not an evaluation)
            curve.append(best)
    return curve


@dataclass(frozen=True)
class StrategyScore:
    strategy: str
    fraction: float
    evaluations: int
    mean_gap: float  # mean over seeds of best found / optimum - 1
    worst_gap: float
    seeds: int
    median_gap: float = float("nan")
    found_share: float = float("nan")  # share of seeds whose best found is the optimum
    batch: int | None = None


def score(table: Table, strategies, fractions=(0.05, 0.10, 0.20), seeds: int = 100, batch: int | None = None,
          **kw) -> list[StrategyScore]:
    """Each strategy over `seeds` seeds as the command runs it (see best_so_far), scored at each
    fraction of the table's size: mean, worst and median gap to the optimum, and how often it was found."""
    n = len(table.times)
    budgets = {f: max(1, round(f * n)) for f in fractions}
    top = max(budgets.values())
    batch = batch or command_batch_for(H200_HOST_CPUS)
    out = []
    for strategy in strategies:
        extra = kw.get(strategy, {})
        curves = [best_so_far(table, strategy, top, seed, batch=batch, **extra) for seed in range(seeds)]
        for f, b in budgets.items():
            gaps = [c[min(b, len(c)) - 1] / table.optimum - 1 for c in curves]  # (a search may run out of points)
            out.append(StrategyScore(strategy, f, b, statistics.fmean(gaps), max(gaps), seeds,
                                     statistics.median(gaps), sum(g <= 0 for g in gaps) / len(gaps), batch))
    return out


def evaluations_to_reach(table: Table, strategy: str = DEFAULT_STRATEGY, seeds: int = 100, within: float = 0.01,
                         warm_start=(), budget: float = 0.25, batch: int | None = None, **kw) -> list[int | None]:
    """Per seed, how many evaluations the search needed before its best lay within `within` of the
    table's optimum (None: not within `budget`, a fraction of the table). `warm_start`: configurations
    measured first, as `simtlab tune` measures the best ones stored for another size."""
    goal = table.optimum * (1 + within)
    out = []
    for seed in range(seeds):
        curve = best_so_far(table, strategy, max(1, round(budget * len(table.times))), seed, batch=batch,
                            warm_start=warm_start, **kw)
        out.append(next((i + 1 for i, v in enumerate(curve) if v <= goal), None))
    return out
