"""LayerNorm forward over the last dimension of a contiguous fp32 or bf16 matrix, with weight and
bias of the row's length in the same storage type (fp32 arithmetic):
y[r, c] = (x[r, c] - mean_r) / sqrt(var_r + eps) * w[c] + b[c], var the biased (population) variance."""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass

import numpy as np

from ..family import Family, Rung, frozen
from ..verify import UNIT_ROUNDOFF, dot_tolerance
from .base import Reference
from .base import make_runner, unsupported  # noqa: F401 (FamilyOps' default hooks)
from .rows import (DT, DTYPE, RowProblem, dtype_params, geometry_row, geometry_vectorized, load, poison_value,
                   register_row_space, row_references, store, torch_view, vec_ok)
from .rows import row_params as _row_params

__all__ = ["LayerNormProblem", "parse_size", "tolerance", "dtype_params", "row_params", "geometry_row",
           "geometry_vectorized", "requested_bytes", "workspace", "references", "EPS", "DT", "DTYPE"]

EPS = 1e-5  # PyTorch's default


@dataclass(frozen=True)
class LayerNormProblem(RowProblem):
    what = "layernorm"

    @property
    def flops(self) -> int:
        return 8 * self.rows * self.cols  # nominal: sum, deviation, square-add, normalise, scale, shift

    @property
    def bytes(self) -> int:
        return self.itemsize * (2 * self.rows * self.cols + 2 * self.cols)  # x and y once, w and b once


def row_params(p: LayerNormProblem, device=None, vec=None) -> dict:
    """The register-row launch shape, plus EARLY (weight and bias loaded before the reduction) for
    fp32 rows of at most 4 groups per thread (beyond, their registers would cap a 1024-thread block).
    bf16 rows longer than a warp's take 8 groups per thread in a smaller block, weight and bias
    late: at 32768x4096 that measured 68.7% of the copy against 53.5% for fp32's shape and 50.0%
    with EARLY (benchmarks/results/2026-12-02_h200_43e8ab/layernorm_sweep.json)."""
    q = _row_params(p, device, vec)
    if p.dtype == "bfloat16" and not q["WARP_ROWS"]:
        block = min(1024, max(128, -(-p.cols // (8 * 4 * 32)) * 32))
        return {**q, "BLOCK": block, "VPT": -(-p.cols // (4 * block)), "EARLY": 0}
    return {**q, "EARLY": int(q["VPT"] <= 4 and p.dtype == "float32")}


def parse_size(text: str, **_) -> LayerNormProblem:
    """'ROWSxCOLS' (normalise each row of COLS values), ':bf16' for bf16 storage."""
    return LayerNormProblem.parse(text)


def tolerance(p: LayerNormProblem, ws=None) -> float:
    """Mean and variance are length-cols fp32 sums; bf16 storage rounds each output once more."""
    fp32 = 2 * dot_tolerance("float32", p.cols) + 32 * UNIT_ROUNDOFF["float32"]
    return fp32 if p.dtype == "float32" else fp32 + 2 * UNIT_ROUNDOFF["bfloat16"]


def requested_bytes(params, p: LayerNormProblem, reads: int = 1) -> int:
    """x read `reads` times (once: the family's default; the rung that reads more says so), y
    written, the weight and bias read."""
    return p.itemsize * (p.rows * p.cols * (reads + 1) + 2 * p.cols)


class Workspace:
    def __init__(self, p: LayerNormProblem, seed: int):
        import cupy

        self.p = p
        rng = cupy.random.default_rng(seed)
        # Rows with an offset larger than their spread: E[x^2] - E[x]^2 would cancel badly here.
        x = rng.random((p.rows, p.cols), dtype=cupy.float32) * 4 - 2 + rng.random((p.rows, 1), dtype=cupy.float32) * 8
        self.x = store(x, p.dtype)
        self.w = store(rng.random(p.cols, dtype=cupy.float32) + 0.5, p.dtype)
        self.b = store(rng.random(p.cols, dtype=cupy.float32) - 0.5, p.dtype)
        self.y = cupy.empty_like(self.x)

    def poison(self) -> None:
        self.y.fill(poison_value(self.p.dtype))

    def args(self) -> tuple:
        p = self.p
        return (self.x, self.w, self.b, self.y, np.int32(p.rows), np.int32(p.cols), np.float32(EPS))

    def vec_ok(self) -> bool:
        return vec_ok(self.p, self.x, self.w, self.b, self.y)

    def expected(self):
        import cupy

        dt = self.p.dtype
        x = load(self.x, dt).astype(cupy.float64)
        mean = x.mean(axis=1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
        w, b = (load(a, dt).astype(cupy.float64) for a in (self.w, self.b))
        return (x - mean) / cupy.sqrt(var + EPS) * w + b

    def output(self):
        return load(self.y, self.p.dtype)


def workspace(p: LayerNormProblem, seed: int) -> Workspace:
    return Workspace(p, seed)


def _torch(ws: Workspace):
    import torch.nn.functional as F

    dt = ws.p.dtype
    x, w, b = (torch_view(a, dt) for a in (ws.x, ws.w, ws.b))

    def run():  # timed as a user calls it (same storage type in and out); values checked in tests/test_gpu.py
        F.layer_norm(x, (ws.p.cols,), w, b, EPS)

    return run


def references() -> list[Reference]:
    return row_references("PyTorch layer_norm", _torch)


# --- the family: its rungs, one per kernel file -------------------------------------------------

FAMILY = Family(
    name="layernorm",
    title="LayerNorm forward over the last dimension with weight and bias, fp32 or bf16 storage, fp32 math",
    ops=sys.modules[__name__],
    reference="device copy of the matrix (read + write), PyTorch layer_norm",
    default_sizes=("32768x4096",),
    rungs=(
        Rung("layernorm", 1, "two_pass", "layernorm/01_two_pass.cu", "layernorm_two_pass", ("DT", "BLOCK"),
             frozen({"DT": 0, "BLOCK": 256}),
             "mean, then variance around it (no cancellation), then normalise: three reads of each row",
             geometry_row, size_defaults=dtype_params, sass_expect=("SHFL", "MUFU"),
             traffic=functools.partial(requested_bytes, reads=3)),
        Rung("layernorm", 2, "welford", "layernorm/02_welford.cu", "layernorm_welford",
             ("DT", "BLOCK", "VPT", "WARP_ROWS", "EARLY"),
             frozen({"DT": 0, "BLOCK": 1024, "VPT": 1, "WARP_ROWS": 0, "EARLY": 1}),
             "the row in registers, per-thread moments merged by Chan/Welford in one shuffle reduction: one read",
             geometry_vectorized, vec_variant=True, size_defaults=row_params,
             sass_expect=("LDG.128", "STG.128", "SHFL"), space=functools.partial(register_row_space, early=True)),
        Rung("layernorm", 3, "two_sums", "layernorm/03_two_sums.cu", "layernorm_two_sums",
             ("DT", "BLOCK", "VPT", "WARP_ROWS", "EARLY"),
             frozen({"DT": 0, "BLOCK": 1024, "VPT": 1, "WARP_ROWS": 0, "EARLY": 1}),
             "issue-bound, not memory-bound: two one-value sums (mean, then squared deviations) over the "
             "row in registers replace the three-value Chan merge; each value unpacked once",
             geometry_vectorized, vec_variant=True, size_defaults=row_params,
             sass_expect=("LDG.128", "STG.128", "SHFL"), space=functools.partial(register_row_space, early=True)),
    ),
    metric="gbs",
    check_size="333x517",
)
