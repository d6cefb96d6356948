"""Row-wise softmax over the last dimension of a contiguous fp32 matrix:
y[r, c] = exp(x[r, c] - max_r) / sum_c' exp(x[r, c'] - max_r)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..launch import Launch
from ..verify import UNIT_ROUNDOFF, dot_tolerance
from .base import Reference, device_copy, parse_int

DTYPE = "float32"
MAX_REGISTER_ROW = 32768  # rung 4 keeps a row in registers: 1024 threads x 8 float4


@dataclass(frozen=True)
class SoftmaxProblem:
    rows: int
    cols: int
    dtype: str = DTYPE

    def __post_init__(self):
        if int(self.rows) < 1 or int(self.cols) < 1:
            raise ValueError(f"softmax shape must be at least 1x1, got {self.rows}x{self.cols}")

    @property
    def label(self) -> str:
        return f"{self.rows}x{self.cols}"

    @property
    def flops(self) -> int:
        return 5 * self.rows * self.cols  # nominal: compare, subtract, exponential, add, multiply

    @property
    def bytes(self) -> int:
        return 8 * self.rows * self.cols  # x read once, y written once


def parse_size(text: str, **_) -> SoftmaxProblem:
    """'ROWSxCOLS' (softmax along each row of COLS values)."""
    parts = str(text).lower().split("x")
    if len(parts) != 2:
        raise ValueError(f"softmax size {text!r}: use ROWSxCOLS, e.g. 32768x4096")
    return SoftmaxProblem(*(parse_int(q, f"softmax size {text!r}") for q in parts))


def tolerance(p: SoftmaxProblem, ws=None) -> float:
    """The row sum is a length-cols fp32 sum; __expf adds a few ulps per element on top."""
    return dot_tolerance(p.dtype, p.cols) + 32 * UNIT_ROUNDOFF[p.dtype]


def row_params(p: SoftmaxProblem, device=None, vec=None) -> dict:
    """Rung 4's launch shape for the row length: a warp per row up to 1024 floats, a block of 256
    up to 8192 and of 1024 up to 32768, with VPT float4 per thread covering the row."""
    if p.cols > MAX_REGISTER_ROW:
        raise ValueError(f"rung 4 keeps a row in registers: at most {MAX_REGISTER_ROW} columns, got {p.cols}")
    if p.cols <= 1024:
        return {"BLOCK": 128, "VPT": -(-p.cols // 128), "WARP_ROWS": 1}
    block = 256 if p.cols <= 8192 else 1024
    return {"BLOCK": block, "VPT": -(-p.cols // (4 * block)), "WARP_ROWS": 0}


def geometry_row(params, p: SoftmaxProblem, device=None) -> Launch:
    return Launch((p.rows, 1, 1), (params["BLOCK"], 1, 1))


def geometry_vectorized(params, p: SoftmaxProblem, device=None) -> Launch:
    rows_per_block = params["BLOCK"] // 32 if params["WARP_ROWS"] else 1
    return Launch((-(-p.rows // rows_per_block), 1, 1), (params["BLOCK"], 1, 1))


READS = {"three_pass": 3, "fused": 3, "online": 2, "vectorized": 1}  # times each rung reads x


def requested_bytes(rung_name: str, params, p: SoftmaxProblem) -> int:
    return 4 * p.rows * p.cols * (READS[rung_name] + 1)


class Workspace:
    def __init__(self, p: SoftmaxProblem, seed: int):
        import cupy

        self.p = p
        self.x = (cupy.random.default_rng(seed).random((p.rows, p.cols), dtype=cupy.float32) * 2 - 1) * 8
        self.y = cupy.empty_like(self.x)
        self.stats = cupy.empty(2 * p.rows, dtype=cupy.float32)  # rung 1: row maxima, then row sums

    def poison(self) -> None:
        self.y.fill(np.nan)

    def args(self) -> tuple:
        return (self.x, self.y, np.int32(self.p.rows), np.int32(self.p.cols))

    def vec_ok(self) -> bool:
        return self.p.cols % 4 == 0 and self.x.data.ptr % 16 == 0 and self.y.data.ptr % 16 == 0

    def expected(self):
        import cupy

        x = self.x.astype(cupy.float64)
        e = cupy.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def output(self):
        return self.y


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


def _device_copy(ws: Workspace):
    return device_copy(4 * ws.p.rows * ws.p.cols)


def _torch(ws: Workspace):
    import torch

    x = torch.as_tensor(ws.x, device="cuda")

    def run():  # timed as a user calls it; its values are checked in tests/test_gpu.py
        torch.softmax(x, dim=-1)

    return run


def references() -> list[Reference]:
    refs = [Reference("device copy", _device_copy, verifiable=False)]
    try:
        import torch  # noqa: F401

        refs.append(Reference("PyTorch softmax", _torch, verifiable=False))
    except Exception:
        pass
    return refs
