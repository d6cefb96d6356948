"""How work is cut between ranks: balanced index ranges, a near-square process grid, and the
SUMMA schedule (which rank broadcasts which panel at each step). Pure Python: tested on the CPU."""

from __future__ import annotations

import math
from dataclasses import dataclass


def split(n: int, parts: int) -> list[tuple[int, int]]:
    """[start, stop) ranges of n items over `parts` owners, sizes differing by at most one (the
    first n % parts get one more). An owner may get an empty range when parts > n."""
    if n < 0 or parts < 1:
        raise ValueError(f"cannot split {n} items over {parts} parts")
    q, r = divmod(n, parts)
    out, start = [], 0
    for p in range(parts):
        size = q + (p < r)
        out.append((start, start + size))
        start += size
    return out


def grid_shape(world: int) -> tuple[int, int]:
    """The most square rows x cols factorisation of `world` (rows <= cols): 8 -> 2 x 4, 6 -> 2 x 3."""
    if world < 1:
        raise ValueError(f"world size must be >= 1, got {world}")
    rows = max(r for r in range(1, math.isqrt(world) + 1) if world % r == 0)
    return rows, world // rows


@dataclass(frozen=True)
class RowPanels:
    """1D: rank r owns rows rows[r] of A and C and the same rows of B; each rank all-gathers B
    (K x N) and computes its C panel = A_panel @ B. Communication: (world - 1)/world of B per rank."""

    M: int
    N: int
    K: int
    world: int

    @property
    def rows(self) -> list[tuple[int, int]]:
        return split(self.M, self.world)

    @property
    def b_rows(self) -> list[tuple[int, int]]:
        return split(self.K, self.world)

    def bytes_received(self, itemsize: int = 4) -> int:
        """Per rank: the parts of B it does not hold."""
        mine = max(b - a for a, b in self.b_rows)
        return itemsize * (self.K - mine) * self.N if self.world > 1 else 0


@dataclass(frozen=True)
class Summa:
    """2D SUMMA on a pr x pc grid (rank = i * pc + j): rank (i, j) owns block (i, j) of A (rows
    split pr ways, K split pc ways), of B (K split pr ways, columns split pc ways) and of C. K is
    cut into panels at the union of both splits' boundaries, so every panel of A lies in one grid
    column and every panel of B in one grid row; at each panel the owning column broadcasts its A
    panel along each grid row and the owning row its B panel along each grid column, and every
    rank adds A_panel @ B_panel into its C block."""

    M: int
    N: int
    K: int
    world: int

    @property
    def grid(self) -> tuple[int, int]:
        return grid_shape(self.world)

    def coords(self, rank: int) -> tuple[int, int]:
        if not 0 <= rank < self.world:
            raise ValueError(f"rank {rank} outside a world of {self.world}")
        return divmod(rank, self.grid[1])

    def rank(self, i: int, j: int) -> int:
        return i * self.grid[1] + j

    @property
    def a_rows(self):
        return split(self.M, self.grid[0])

    @property
    def a_cols(self):  # K as A's columns: split over grid columns
        return split(self.K, self.grid[1])

    @property
    def b_rows(self):  # K as B's rows: split over grid rows
        return split(self.K, self.grid[0])

    @property
    def b_cols(self):
        return split(self.N, self.grid[1])

    def panels(self) -> list[tuple[int, int, int, int]]:
        """(k0, k1, A owner column, B owner row) for each K panel, in order."""
        cuts = sorted({0, self.K} | {a for a, _ in self.a_cols} | {a for a, _ in self.b_rows})
        out = []
        for k0, k1 in zip(cuts, cuts[1:]):
            col = next(j for j, (a, b) in enumerate(self.a_cols) if a <= k0 < b)
            row = next(i for i, (a, b) in enumerate(self.b_rows) if a <= k0 < b)
            out.append((k0, k1, col, row))
        return out

    def blocks(self, rank: int) -> dict:
        """The index ranges rank owns: A rows/cols, B rows/cols, C rows/cols."""
        i, j = self.coords(rank)
        return {"A": (self.a_rows[i], self.a_cols[j]), "B": (self.b_rows[i], self.b_cols[j]),
                "C": (self.a_rows[i], self.b_cols[j])}

    def bytes_received(self, rank: int, itemsize: int = 4) -> int:
        """Panels of A and B this rank receives (not the ones it broadcasts)."""
        i, j = self.coords(rank)
        (r0, r1), (c0, c1) = self.a_rows[i], self.b_cols[j]
        total = 0
        for k0, k1, col, row in self.panels():
            if col != j:
                total += (r1 - r0) * (k1 - k0)
            if row != i:
                total += (k1 - k0) * (c1 - c0)
        return itemsize * total
