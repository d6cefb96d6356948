"""Row-wise softmax over the last dimension of a contiguous fp32 or bf16 matrix (fp32 arithmetic):
y[r, c] = exp(x[r, c] - max_r) / sum_c' exp(x[r, c'] - max_r)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..launch import Launch
from ..verify import UNIT_ROUNDOFF, dot_tolerance
from .base import ITEMSIZE, Reference, bf16_bits_to_float32, device_copy, parse_int, to_bf16_bits

DTYPE = "float32"
DTYPES = {"fp32": "float32", "bf16": "bfloat16"}  # size suffixes
DT = {"float32": 0, "bfloat16": 1}  # the kernels' DT template argument
MAX_REGISTER_ROW = 32768  # rung 4 keeps a row in registers: 1024 threads x 8 float4


@dataclass(frozen=True)
class SoftmaxProblem:
    rows: int
    cols: int
    dtype: str = DTYPE

    def __post_init__(self):
        if int(self.rows) < 1 or int(self.cols) < 1:
            raise ValueError(f"softmax shape must be at least 1x1, got {self.rows}x{self.cols}")
        if self.dtype not in DT:
            raise ValueError(f"softmax storage is float32 or bfloat16, not {self.dtype}")

    @property
    def itemsize(self) -> int:
        return ITEMSIZE[self.dtype]

    @property
    def label(self) -> str:
        return f"{self.rows}x{self.cols}" + ("" if self.dtype == DTYPE else ":bf16")

    @property
    def flops(self) -> int:
        return 5 * self.rows * self.cols  # nominal: compare, subtract, exponential, add, multiply

    @property
    def bytes(self) -> int:
        return 2 * self.itemsize * self.rows * self.cols  # x read once, y written once


def parse_size(text: str, **_) -> SoftmaxProblem:
    """'ROWSxCOLS' (softmax along each row of COLS values), ':bf16' for bf16 storage."""
    size, _, kind = str(text).lower().partition(":")
    if kind and kind not in DTYPES:
        raise ValueError(f"softmax {text!r}: the storage type is fp32 or bf16, not {kind!r}")
    parts = size.split("x")
    if len(parts) != 2:
        raise ValueError(f"softmax size {text!r}: use ROWSxCOLS, e.g. 32768x4096 or 32768x4096:bf16")
    return SoftmaxProblem(*(parse_int(q, f"softmax size {text!r}") for q in parts), DTYPES.get(kind, DTYPE))


def tolerance(p: SoftmaxProblem, ws=None) -> float:
    """The row sum is a length-cols fp32 sum; __expf adds a few ulps per element on top; bf16
    storage rounds each output once more (relative 2^-9), which dominates."""
    fp32 = dot_tolerance("float32", p.cols) + 32 * UNIT_ROUNDOFF["float32"]
    return fp32 if p.dtype == "float32" else fp32 + 2 * UNIT_ROUNDOFF["bfloat16"]


def dtype_params(p: SoftmaxProblem, device=None, vec=None) -> dict:
    """The storage type picks the DT template argument."""
    return {"DT": DT[p.dtype]}


def row_params(p: SoftmaxProblem, device=None, vec=None) -> dict:
    """Rung 4's launch shape for the row length: a warp per row up to 1024 floats, a block of 256
    up to 8192 and of 1024 up to 32768, with VPT float4 per thread covering the row."""
    if p.cols > MAX_REGISTER_ROW:
        raise ValueError(f"rung 4 keeps a row in registers: at most {MAX_REGISTER_ROW} columns, got {p.cols}")
    dt = DT[p.dtype]
    if p.cols <= 1024:
        return {"DT": dt, "BLOCK": 128, "VPT": -(-p.cols // 128), "WARP_ROWS": 1}
    block = 256 if p.cols <= 8192 else 1024
    return {"DT": dt, "BLOCK": block, "VPT": -(-p.cols // (4 * block)), "WARP_ROWS": 0}


def geometry_row(params, p: SoftmaxProblem, device=None) -> Launch:
    return Launch((p.rows, 1, 1), (params["BLOCK"], 1, 1))


def geometry_vectorized(params, p: SoftmaxProblem, device=None) -> Launch:
    rows_per_block = params["BLOCK"] // 32 if params["WARP_ROWS"] else 1
    return Launch((-(-p.rows // rows_per_block), 1, 1), (params["BLOCK"], 1, 1))


READS = {"three_pass": 3, "fused": 3, "online": 2, "vectorized": 1}  # times each rung reads x


def requested_bytes(rung_name: str, params, p: SoftmaxProblem) -> int:
    return p.itemsize * p.rows * p.cols * (READS[rung_name] + 1)


def store(values, dtype: str):
    """A float32 CuPy array in the problem's storage type (bf16 as uint16 bits)."""
    return values if dtype == "float32" else to_bf16_bits(values)


def load(stored, dtype: str):
    """The float32 values of stored data."""
    return stored if dtype == "float32" else bf16_bits_to_float32(stored)


class Workspace:
    def __init__(self, p: SoftmaxProblem, seed: int):
        import cupy

        self.p = p
        x = (cupy.random.default_rng(seed).random((p.rows, p.cols), dtype=cupy.float32) * 2 - 1) * 8
        self.x = store(x, p.dtype)
        self.y = cupy.empty_like(self.x)
        self.stats = cupy.empty(2 * p.rows, dtype=cupy.float32)  # rung 1: row maxima, then row sums

    def poison(self) -> None:
        self.y.fill(np.nan if self.p.dtype == "float32" else 0x7FC0)  # NaN in either type

    def args(self) -> tuple:
        return (self.x, self.y, np.int32(self.p.rows), np.int32(self.p.cols))

    def vec_ok(self) -> bool:
        return self.p.cols % 4 == 0 and self.x.data.ptr % 16 == 0 and self.y.data.ptr % 16 == 0

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


def _device_copy(ws: Workspace):
    return device_copy(ws.p.itemsize * ws.p.rows * ws.p.cols)


def torch_view(stored, dtype: str):
    """A PyTorch tensor over stored data (bf16 bits reinterpreted as torch.bfloat16, no copy)."""
    import torch

    t = torch.as_tensor(stored, device="cuda")
    return t if dtype == "float32" else t.view(torch.bfloat16)


def _torch(ws: Workspace):
    import torch

    x = torch_view(ws.x, ws.p.dtype)

    def run():  # timed as a user calls it (bf16 in, bf16 out); its values are checked in tests/test_gpu.py
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
