"""Warp divergence, data-dependent: particles step x = p + v*dt and reflect off the walls
of [0, 1]. Inputs sit on a 2^-10 grid and dt = 1/8, so every step is exact in fp32 and the
reference (float64) agrees bit for bit - including which side of a wall each particle lands."""

from __future__ import annotations

import sys

import numpy as np

from ..family import Family, Rung, frozen
from .base import LengthProblem, Reference, device_copy, one_thread_per_element
from .base import make_runner, unsupported  # noqa: F401 (FamilyOps' default hooks)

DTYPE = "float32"
LO, HI, DT = 0.0, 1.0, 0.125


class BoundaryProblem(LengthProblem):
    what = "particle count"

    @property
    def flops(self) -> int:
        return 2 * self.n

    @property
    def bytes(self) -> int:
        return 16 * self.n  # p and v read, position and velocity written


def parse_size(text: str, **_) -> BoundaryProblem:
    return BoundaryProblem.parse(text)


def tolerance(p: BoundaryProblem, ws=None) -> float:
    return 0.0


geometry = one_thread_per_element


def requested_bytes(params, p: BoundaryProblem) -> int:
    return p.bytes


class Workspace:
    def __init__(self, p: BoundaryProblem, seed: int):
        import cupy

        self.p = p
        rng = cupy.random.default_rng(seed)
        # positions in [-0.25, 1.25) and velocities in [-2, 2) on a 2^-10 grid: about 40% reflect
        self.pos = (rng.integers(-256, 1280, p.n) / 1024).astype(cupy.float32)
        self.vel = (rng.integers(-2048, 2048, p.n) / 1024).astype(cupy.float32)
        self.out = cupy.empty(2 * p.n, dtype=cupy.float32)

    def poison(self) -> None:
        self.out.fill(np.nan)

    def args(self) -> tuple:
        return (self.pos, self.vel, self.out, np.float32(LO), np.float32(HI), np.float32(DT), np.int64(self.p.n))

    def vec_ok(self) -> bool:
        return True

    def expected(self):
        import cupy

        x = self.pos.astype(cupy.float64) + self.vel.astype(cupy.float64) * DT
        below, above = x < LO, x > HI
        x = cupy.where(below, 2 * LO - x, cupy.where(above, 2 * HI - x, x))
        u = cupy.where(below | above, -self.vel.astype(cupy.float64), self.vel.astype(cupy.float64))
        return cupy.concatenate([x, u])

    def output(self):
        return self.out


def workspace(p: BoundaryProblem, seed: int) -> Workspace:
    return Workspace(p, seed)


def references() -> list[Reference]:
    return [Reference("device copy", lambda ws: device_copy(8 * ws.p.n), verifiable=False)]


# --- the family: its rungs, one per kernel file -------------------------------------------------

FAMILY = Family(
    name="boundary",
    title="warp divergence: particles reflecting off walls, if/else chain vs select",
    ops=sys.modules[__name__],
    reference="device copy of the same bytes",
    default_sizes=("268435456",),
    rungs=(
        Rung("boundary", 1, "if_else_chain", "boundary/01_if_else_chain.cu", "boundary_if_else", ("BLOCK",),
             frozen({"BLOCK": 256}), "data-dependent if/else: lanes of a warp disagree on the branch", geometry),
        Rung("boundary", 2, "select", "boundary/02_select.cu", "boundary_select", ("BLOCK",),
             frozen({"BLOCK": 256}), "the same reflection as selects: no control flow", geometry),
    ),
    metric="gbs",
)
