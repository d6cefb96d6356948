"""Search strategies over a finite list of valid configurations.

A strategy proposes configurations (`ask`) and learns from measured times
(`tell`; None for a failure). Brute force walks the list; random shuffles it;
the cost model (gradient-boosted trees, scikit-learn) is trained on what has
been measured - including history from the store - and proposes the batch it
predicts fastest, keeping one random pick per batch to keep exploring.
"""

from __future__ import annotations

import math
import random
from typing import Callable, Sequence

from .space import Config, Space

__all__ = ["Strategy", "BruteForce", "RandomSearch", "CostModel", "STRATEGIES", "make_strategy"]


class Strategy:
    def __init__(self, configs: Sequence[Config], seed: int = 0):
        self.configs = list(configs)
        self.rng = random.Random(seed)
        self.measured: dict[tuple, float | None] = {}

    def pending(self) -> list[Config]:
        return [c for c in self.configs if Space.key(c) not in self.measured]

    def tell(self, config: Config, value: float | None) -> None:
        self.measured[Space.key(config)] = value

    def ask(self, n: int) -> list[Config]:
        raise NotImplementedError


class BruteForce(Strategy):
    def ask(self, n: int) -> list[Config]:
        return self.pending()[:n]


class RandomSearch(Strategy):
    def __init__(self, configs, seed: int = 0):
        super().__init__(configs, seed)
        self.rng.shuffle(self.configs)

    def ask(self, n: int) -> list[Config]:
        return self.pending()[:n]


class CostModel(Strategy):
    """Gradient-boosted trees on log(time); failures count as twice the slowest time seen."""

    def __init__(self, configs, seed: int = 0, initial: int = 8, features: Callable[[Config], list[float]] | None = None):
        super().__init__(configs, seed)
        self.initial = initial
        self.features = features or (lambda c: [float(v) for _, v in sorted(c.items())])

    def ask(self, n: int) -> list[Config]:
        pending = self.pending()
        if not pending:
            return []
        known = [(k, v) for k, v in self.measured.items()]
        good = [v for _, v in known if v is not None]
        if len(good) < max(self.initial, 2):
            return self.rng.sample(pending, min(n, len(pending)))
        from sklearn.ensemble import GradientBoostingRegressor

        worst = max(good)
        X = [self.features(dict(k)) for k, _ in known]
        y = [math.log(v if v is not None else 2 * worst) for _, v in known]
        model = GradientBoostingRegressor(n_estimators=120, max_depth=3, learning_rate=0.1,
                                          random_state=self.rng.randrange(2**31))
        model.fit(X, y)
        predicted = model.predict([self.features(c) for c in pending])
        order = sorted(range(len(pending)), key=lambda i: predicted[i])
        picks = [pending[i] for i in order[: max(n - 1, 1)]]
        rest = [c for c in pending if c not in picks]
        if n > 1 and rest:
            picks.append(self.rng.choice(rest))  # keep exploring
        return picks[:n]


STRATEGIES = {"brute": BruteForce, "random": RandomSearch, "model": CostModel}


def make_strategy(name: str, configs: Sequence[Config], seed: int = 0, **kw) -> Strategy:
    try:
        cls = STRATEGIES[name]
    except KeyError:
        raise ValueError(f"unknown strategy {name!r}; choose from {', '.join(STRATEGIES)}") from None
    return cls(configs, seed, **kw) if cls is CostModel else cls(configs, seed)
