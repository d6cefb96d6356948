"""Row-wise softmax over the last dimension of a contiguous fp32 or bf16 matrix (fp32 arithmetic):
y[r, c] = exp(x[r, c] - max_r) / sum_c' exp(x[r, c'] - max_r)."""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass

import numpy as np

from ..family import Family, Rung, frozen
from ..verify import UNIT_ROUNDOFF, dot_tolerance
from .base import Reference
from .base import unsupported  # noqa: F401 (FamilyOps' default hook)
from .rows import (DT, DTYPE, MAX_REGISTER_ROW, RowProblem, dtype_params, geometry_row, geometry_vectorized, load,
                   poison_value, register_row_space, row_params, row_references, store, torch_view, vec_ok)

__all__ = ["SoftmaxProblem", "parse_size", "tolerance", "dtype_params", "row_params", "geometry_row",
           "geometry_vectorized", "requested_bytes", "workspace", "make_runner", "references", "store", "load",
           "torch_view", "DT", "DTYPE", "MAX_REGISTER_ROW"]


@dataclass(frozen=True)
class SoftmaxProblem(RowProblem):
    what = "softmax"

    @property
    def flops(self) -> int:
        return 5 * self.rows * self.cols  # nominal: compare, subtract, exponential, add, multiply


def parse_size(text: str, **_) -> SoftmaxProblem:
    """'ROWSxCOLS' (softmax along each row of COLS values), ':bf16' for bf16 storage."""
    return SoftmaxProblem.parse(text)


def tolerance(p: SoftmaxProblem, ws=None) -> float:
    """The row sum is a length-cols fp32 sum; __expf adds a few ulps per element on top; bf16
    storage rounds each output once more (relative 2^-9), which dominates."""
    fp32 = dot_tolerance("float32", p.cols) + 32 * UNIT_ROUNDOFF["float32"]
    return fp32 if p.dtype == "float32" else fp32 + 2 * UNIT_ROUNDOFF["bfloat16"]


def requested_bytes(params, p: SoftmaxProblem, reads: int = 1) -> int:
    """x read `reads` times (once: the family's default; the rungs that read more say so), y written."""
    return p.itemsize * p.rows * p.cols * (reads + 1)


class Workspace:
    def __init__(self, p: SoftmaxProblem, seed: int):
        import cupy

        self.p = p
        x = (cupy.random.default_rng(seed).random((p.rows, p.cols), dtype=cupy.float32) * 2 - 1) * 8
        self.x = store(x, p.dtype)
        self.y = cupy.empty_like(self.x)
        self.stats = cupy.empty(2 * p.rows, dtype=cupy.float32)  # rung 1: row maxima, then row sums

    def poison(self) -> None:
        self.y.fill(poison_value(self.p.dtype))

    def args(self) -> tuple:
        return (self.x, self.y, np.int32(self.p.rows), np.int32(self.p.cols))

    def vec_ok(self) -> bool:
        return vec_ok(self.p, self.x, self.y)

    def expected(self):
        import cupy

        x = load(self.x, self.p.dtype).astype(cupy.float64)
        e = cupy.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def output(self):
        return load(self.y, self.p.dtype)


def workspace(p: SoftmaxProblem, seed: int) -> Workspace:
    return Workspace(p, seed)


def make_runner(inst, problem: SoftmaxProblem, ws: Workspace, device, vec, prepare):
    """Rung 1 is three launches of one kernel (phase 0, 1, 2); the others the default single launch
    (None)."""
    if inst.rung.name != "three_pass":
        return None
    p = problem
    launch = inst.geometry(p, device)
    func = prepare(inst, launch, vec, device)
    phases = [(ws.x, ws.y, ws.stats, np.int32(p.rows), np.int32(p.cols), np.int32(k)) for k in range(3)]

    def run():
        for args in phases:
            func(launch.grid, launch.block, args)

    return run


def _torch(ws: Workspace):
    import torch

    x = torch_view(ws.x, ws.p.dtype)

    def run():  # timed as a user calls it (bf16 in, bf16 out); its values are checked in tests/test_gpu.py
        torch.softmax(x, dim=-1)

    return run


def references() -> list[Reference]:
    return row_references("PyTorch softmax", _torch)


# --- the family: its rungs, one per kernel file -------------------------------------------------

FAMILY = Family(
    name="softmax",
    title="row-wise softmax over the last dimension, fp32 or bf16 storage, fp32 math",
    ops=sys.modules[__name__],
    reference="device copy of the matrix (read + write), PyTorch softmax",
    default_sizes=("32768x4096",),
    rungs=(
        Rung("softmax", 1, "three_pass", "softmax/01_three_pass.cu", "softmax_three_pass", ("DT", "BLOCK"),
             frozen({"DT": 0, "BLOCK": 256}), "max, sum of exponentials, normalise: three launches, three reads of x",
             geometry_row, size_defaults=dtype_params, traffic=functools.partial(requested_bytes, reads=3)),
        Rung("softmax", 2, "fused", "softmax/02_fused.cu", "softmax_fused", ("DT", "BLOCK"),
             frozen({"DT": 0, "BLOCK": 256}), "one launch per matrix, shuffle reductions; rereads of a row hit L2",
             geometry_row, size_defaults=dtype_params, sass_expect=("SHFL",),
             traffic=functools.partial(requested_bytes, reads=3)),
        Rung("softmax", 3, "online", "softmax/03_online.cu", "softmax_online", ("DT", "BLOCK"),
             frozen({"DT": 0, "BLOCK": 256}), "running max and rescaled running sum: the statistics in one read",
             geometry_row, size_defaults=dtype_params, sass_expect=("SHFL",),
             traffic=functools.partial(requested_bytes, reads=2)),
        Rung("softmax", 4, "vectorized", "softmax/04_vectorized.cu", "softmax_vectorized",
             ("DT", "BLOCK", "VPT", "WARP_ROWS"), frozen({"DT": 0, "BLOCK": 1024, "VPT": 1, "WARP_ROWS": 0}),
             "the row held in registers (LDG.128), __expf, a warp or a block per row by length: one read, one write",
             geometry_vectorized, vec_variant=True, size_defaults=row_params,
             sass_expect=("LDG.128", "STG.128", "MUFU"), space=register_row_space),
    ),
    metric="gbs",
    check_size="333x517",
)
