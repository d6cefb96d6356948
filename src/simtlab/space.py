"""A parameter space: named values per parameter and restrictions that remove
invalid combinations before anything is compiled."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping, Sequence

Config = dict[str, int]


@dataclass(frozen=True)
class Space:
    params: Mapping[str, Sequence[int]]
    restrictions: Sequence[tuple[str, Callable[[Config], bool]]] = field(default_factory=tuple)
    fixed: Mapping[str, int] = field(default_factory=dict)  # parameters held constant

    def __post_init__(self):
        empty = [k for k, v in self.params.items() if not v]
        if empty:
            raise ValueError(f"parameters with no values: {', '.join(empty)}")

    @property
    def names(self) -> list[str]:
        return list(self.params)

    @property
    def size(self) -> int:
        n = 1
        for v in self.params.values():
            n *= len(v)
        return n

    def violations(self, config: Config) -> list[str]:
        """The first restriction a configuration breaks, in declaration order (empty: valid).
        Later restrictions may assume the earlier ones hold (e.g. a non-zero thread count)."""
        full = {**self.fixed, **config}
        for name, ok in self.restrictions:
            try:
                if not ok(full):
                    return [name]
            except ZeroDivisionError:
                return [name]
        return []

    def all(self) -> Iterator[Config]:
        for values in itertools.product(*self.params.values()):
            yield dict(zip(self.params, values))

    def valid(self) -> list[Config]:
        return [c for c in self.all() if not self.violations(c)]

    def complete(self, config: Config) -> Config:
        return {**self.fixed, **config}

    @staticmethod
    def key(config: Config) -> tuple:
        return tuple(sorted(config.items()))
