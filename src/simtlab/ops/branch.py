"""Warp divergence, even/odd: y[i] = p_even(x[i]) or p_odd(x[i]) by the parity of i,
two DEGREE-term polynomials (compute-bound at DEGREE = 64)."""

from __future__ import annotations

import sys

import numpy as np

from ..family import Family, Rung, frozen
from ..verify import UNIT_ROUNDOFF
from .base import LengthProblem, Reference, device_copy, one_thread_per_element
from .base import make_runner, unsupported  # noqa: F401 (FamilyOps' default hooks)

DTYPE = "float32"
DEGREE = 64


class BranchProblem(LengthProblem):
    @property
    def flops(self) -> int:
        return 2 * (DEGREE - 1) * self.n  # one Horner evaluation per element: the useful work

    @property
    def bytes(self) -> int:
        return 8 * self.n


def parse_size(text: str, **_) -> BranchProblem:
    return BranchProblem.parse(text)


def tolerance(p: BranchProblem, ws=None) -> float:
    return UNIT_ROUNDOFF[p.dtype] * (4 * DEGREE + 16)  # Horner on |x| < 1 with decaying coefficients


geometry = one_thread_per_element


def requested_bytes(params, p: BranchProblem) -> int:
    return p.bytes


class Workspace:
    def __init__(self, p: BranchProblem, seed: int):
        import cupy

        self.p = p
        rng = cupy.random.default_rng(seed)
        self.x = rng.random(p.n, dtype=cupy.float32) * 2 - 1
        decay = cupy.asarray(0.7 ** np.arange(DEGREE), dtype=cupy.float32)  # well-conditioned polynomials
        self.coef = ((rng.random(2 * DEGREE, dtype=cupy.float32) * 2 - 1) * cupy.tile(decay, 2)).astype(cupy.float32)
        self.y = cupy.empty(p.n, dtype=cupy.float32)

    def poison(self) -> None:
        self.y.fill(np.nan)

    def args(self) -> tuple:
        return (self.x, self.y, self.coef, np.int64(self.p.n))

    def vec_ok(self) -> bool:
        return True

    def expected(self):
        import cupy

        x = self.x.astype(cupy.float64)
        out = cupy.empty_like(x)
        for parity in (0, 1):
            c = self.coef[parity * DEGREE:(parity + 1) * DEGREE].astype(cupy.float64)
            acc = cupy.full(x[parity::2].shape, float(c[DEGREE - 1]))
            for k in range(DEGREE - 2, -1, -1):
                acc = acc * x[parity::2] + float(c[k])
            out[parity::2] = acc
        return out

    def output(self):
        return self.y


def workspace(p: BranchProblem, seed: int) -> Workspace:
    return Workspace(p, seed)


def references() -> list[Reference]:
    return [Reference("device copy", lambda ws: device_copy(4 * ws.p.n), verifiable=False)]


# --- the family: its rungs, one per kernel file -------------------------------------------------

FAMILY = Family(
    name="branch",
    title="warp divergence: even/odd branch vs branch-free (64-term polynomials, compute-bound)",
    ops=sys.modules[__name__],
    reference="device copy of the same bytes (the memory floor)",
    default_sizes=("67108864",),
    rungs=(
        Rung("branch", 1, "even_odd", "branch/01_even_odd.cu", "branch_even_odd", ("BLOCK", "DEGREE"),
             frozen({"BLOCK": 256, "DEGREE": 64}), "neighbouring lanes take opposite sides: each warp runs both loops",
             geometry),
        Rung("branch", 2, "branch_free", "branch/02_branch_free.cu", "branch_free", ("BLOCK", "DEGREE"),
             frozen({"BLOCK": 256, "DEGREE": 64}), "select the coefficients, not the code: one loop for every lane",
             geometry),
    ),
    metric="tflops",
)
