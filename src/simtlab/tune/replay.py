"""Strategies judged on a recorded brute-force table: every configuration of a space measured once
on a GPU, replayed as the objective, so each strategy can be run over many seeds and budgets at no
GPU cost and compared with the true optimum."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from ..space import Config, Space
from .tuner import tune

__all__ = ["Table", "load_table", "best_so_far", "StrategyScore", "score"]


@dataclass(frozen=True)
class Table:
    params: list[str]
    times: dict[tuple, float | None]  # Space.key(config) -> median ms, None for a failed configuration
    meta: dict

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


def load_table(path: str | Path) -> Table:
    """A table written by the benchmarks (params + rows of values and ms), or `simtlab tune --json` output."""
    data = json.loads(Path(path).read_text())
    if isinstance(data, list):  # simtlab tune --json
        names = list(data[0]["config"])
        times = {Space.key(e["config"]): e["ms"] for e in data}
        return Table(names, times, {})
    names = data["params"]
    times = {Space.key(dict(zip(names, row[:-1]))): row[-1] for row in data["rows"]}
    return Table(names, times, {k: v for k, v in data.items() if k not in ("params", "rows")})


def best_so_far(table: Table, strategy: str, budget: int, seed: int, **kw) -> list[float]:
    """The best time found after 1, 2, ... `budget` evaluations (inf until the first success)."""
    curve, best = [], float("inf")
    for e in tune(table.configs, table, strategy, budget, seed, **kw).evaluations:
        if e.value is not None:
            best = min(best, e.value)
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


def score(table: Table, strategies, fractions=(0.05, 0.10, 0.20), seeds: int = 10, **kw) -> list[StrategyScore]:
    n = len(table.times)
    budgets = {f: max(1, round(f * n)) for f in fractions}
    top = max(budgets.values())
    out = []
    for strategy in strategies:
        extra = kw.get(strategy, {})
        curves = [best_so_far(table, strategy, top, seed, **extra) for seed in range(seeds)]
        for f, b in budgets.items():
            gaps = [c[b - 1] / table.optimum - 1 for c in curves]
            out.append(StrategyScore(strategy, f, b, statistics.fmean(gaps), max(gaps), seeds))
    return out
