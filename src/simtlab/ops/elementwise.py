"""fp32 vector add z = x + y: 8 bytes read and 4 written per element, 1 FLOP."""

from __future__ import annotations

import sys

import numpy as np

from ..family import Family, Rung, frozen
from ..launch import Launch
from ..space import Space
from ..verify import elementwise_tolerance
from .base import LengthProblem, Reference, device_copy, one_thread_per_element
from .base import make_runner, unsupported  # noqa: F401 (FamilyOps' default hooks)

DTYPE = "float32"


class VecProblem(LengthProblem):
    what = "vector length"

    @property
    def flops(self) -> int:
        return self.n

    @property
    def bytes(self) -> int:
        return 12 * self.n


def parse_size(text: str, **_) -> VecProblem:
    return VecProblem.parse(text)


def tolerance(p: VecProblem, ws=None) -> float:
    return elementwise_tolerance(p.dtype)


def requested_bytes(params, p: VecProblem) -> int:
    """Every rung reads x and y once and writes z once: the ladder changes how, not how much."""
    return p.bytes


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


geometry_scalar = one_thread_per_element


def geometry_float4(params, p: VecProblem, device=None) -> Launch:
    return Launch((_ceil(_ceil(p.n, 4), params["BLOCK"]), 1, 1), (params["BLOCK"], 1, 1))


def geometry_grid_stride(params, p: VecProblem, device=None) -> Launch:
    """Enough blocks to fill every SM once (fewer for short vectors)."""
    block = params["BLOCK"]
    needed = _ceil(_ceil(p.n, 4 * params["UNROLL"]), block)
    if device is not None:
        needed = min(needed, device.sms * (device.max_threads_per_sm // block))
    return Launch((max(needed, 1), 1, 1), (block, 1, 1))


class Workspace:
    def __init__(self, p: VecProblem, seed: int):
        import cupy

        self.p = p
        rng = cupy.random.default_rng(seed)
        self.x = rng.random(p.n, dtype=cupy.float32) * 2 - 1
        self.y = rng.random(p.n, dtype=cupy.float32) * 2 - 1
        self.z = cupy.empty(p.n, dtype=cupy.float32)

    def poison(self) -> None:
        self.z.fill(np.nan)

    def args(self) -> tuple:
        return (self.x, self.y, self.z, np.int64(self.p.n))

    def vec_ok(self) -> bool:
        return all(a.data.ptr % 16 == 0 for a in (self.x, self.y, self.z))

    def expected(self):
        import cupy

        return self.x.astype(cupy.float64) + self.y.astype(cupy.float64)

    def output(self):
        return self.z


def workspace(p: VecProblem, seed: int) -> Workspace:
    return Workspace(p, seed)


def _device_copy(ws: Workspace):
    return device_copy(6 * ws.p.n)  # moves 12n bytes, as the vector add does


def _cupy_add(ws: Workspace):
    import cupy

    def run():
        cupy.add(ws.x, ws.y, out=ws.z)

    return run


def references() -> list[Reference]:
    return [Reference("device copy", _device_copy, verifiable=False), Reference("CuPy add", _cupy_add)]


# --- the family: its rungs, one per kernel file -------------------------------------------------

FAMILY = Family(
    name="elementwise",
    title="fp32 vector add z = x + y (memory-bound)",
    ops=sys.modules[__name__],
    reference="device-to-device copy of the same bytes",
    default_sizes=("268435456",),
    rungs=(
        Rung("elementwise", 1, "scalar", "elementwise/01_scalar.cu", "vadd_scalar", ("BLOCK",),
             frozen({"BLOCK": 256}), "one 4-byte element per thread: coalesced but few bytes in flight",
             geometry_scalar),
        Rung("elementwise", 2, "float4", "elementwise/02_float4.cu", "vadd_float4", ("BLOCK",),
             frozen({"BLOCK": 256}), "one 16-byte access per operand per thread: 4x fewer instructions",
             geometry_float4, vec_variant=True, sass_expect=("LDG.128", "STG.128")),
        Rung("elementwise", 3, "grid_stride", "elementwise/03_grid_stride.cu", "vadd_grid_stride",
             ("BLOCK", "UNROLL"), frozen({"BLOCK": 256, "UNROLL": 4}),
             "grid sized to the GPU, UNROLL independent float4 loads in flight per thread",
             geometry_grid_stride, vec_variant=True, tunable=("BLOCK", "UNROLL"), sass_expect=("LDG.128", "STG.128"),
             space=lambda max_smem: Space({"BLOCK": (128, 256, 512, 1024), "UNROLL": (1, 2, 4, 8)})),
    ),
    metric="gbs",
)
