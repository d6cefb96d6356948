"""One Jacobi step of the 3D 7-point stencil, fp32, zeros outside the grid:
out[z, y, x] = C0 * u[z, y, x] + C1 * (sum of the six face neighbours of u[z, y, x]); x is contiguous."""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass

import numpy as np

from ..family import IN, OUT, Declared, Family, Operator, Rung, Step, frozen
from ..launch import Launch, grid2
from ..verify import UNIT_ROUNDOFF
from .base import Reference, device_copy, parse_int
from .split import MAX_GRID_YZ
from .base import make_runner, unsupported  # noqa: F401 (FamilyOps' default hooks)

DTYPE = "float32"
C0, C1 = 0.4, 0.1  # Jacobi-style weights (centre and each face neighbour)


@dataclass(frozen=True)
class StencilProblem:
    NZ: int
    NY: int
    NX: int
    dtype: str = DTYPE

    def __post_init__(self):
        for name in ("NZ", "NY", "NX"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"stencil grid {name} must be >= 1, got {getattr(self, name)}")

    @property
    def points(self) -> int:
        return self.NZ * self.NY * self.NX

    @property
    def label(self) -> str:
        return f"{self.NZ}x{self.NY}x{self.NX}"

    @property
    def flops(self) -> int:
        return 8 * self.points  # 5 adds, 1 multiply, 1 FMA (2)

    @property
    def bytes(self) -> int:
        return 8 * self.points  # u read once, out written once


def parse_size(text: str, **_) -> StencilProblem:
    """'512' (a cube) or 'NZxNYxNX'."""
    parts = str(text).lower().split("x")
    if len(parts) == 1:
        n = parse_int(parts[0], "stencil grid size")
        return StencilProblem(n, n, n)
    if len(parts) != 3:
        raise ValueError(f"stencil size {text!r}: use N (a cube) or NZxNYxNX")
    return StencilProblem(*(parse_int(q, f"stencil size {text!r}") for q in parts))


def tolerance(p: StencilProblem, ws=None) -> float:
    """Seven fp32 roundings per point (six adds and the FMA), 2x margin."""
    return 16 * UNIT_ROUNDOFF[p.dtype]


def geometry_naive(params, p: StencilProblem, device=None) -> Launch:
    gx, gy, _ = grid2(p.NX, p.NY, params["BX"], params["BY"])
    return Launch((gx, gy, p.NZ), (params["BX"], params["BY"], 1))


def geometry_25d(params, p: StencilProblem, device=None) -> Launch:
    gx, gy, _ = grid2(p.NX, p.NY, params["BX"], params["BY"])
    return Launch((gx, gy, -(-p.NZ // params["ZC"])), (params["BX"], params["BY"], 1))


def geometry_25d_pipelined(params, p: StencilProblem, device=None) -> Launch:
    gx, gy, _ = grid2(p.NX, p.NY, params["BX"], params["BY"] * params["RY"])
    return Launch((gx, gy, -(-p.NZ // params["ZC"])), (params["BX"], params["BY"], 1))


def ring_slot_floats(params) -> int:
    """Rung 4: one plane of the ring with its halo (rows padded so the interior starts at 16 bytes)."""
    return (params["BY"] * params["RY"] + 2) * (params["BX"] + 8)


def geometry_async_ring(params, p: StencilProblem, device=None) -> Launch:
    if p.NX * p.NY >= 2 ** 31:
        raise ValueError(f"stencil rung 4 indexes a plane with 32-bit offsets: {p.NY}x{p.NX} has 2^31 points or more")
    gx, gy, _ = grid2(p.NX, p.NY, params["BX"], params["BY"] * params["RY"])
    shared = 4 * (params["P"] + 3) * ring_slot_floats(params)
    return Launch((gx, gy, -(-p.NZ // params["ZC"])), (params["BX"], params["BY"], 1), shared)


def requested_bytes(params, p: StencilProblem, corners: bool = True) -> int:
    """Loads the threads issue (caches aside) in the 2.5D rungs: one per point and plane of the
    column (plus the two planes around each z chunk) and each plane's halo ring (rungs 3-4's tile
    is BY*RY rows tall; rung 4's ring has no corners)."""
    bx, by, zc = params["BX"], params["BY"] * params.get("RY", 1), params["ZC"]
    columns = -(-p.NX // bx) * -(-p.NY // by)
    chunks = -(-p.NZ // zc)
    own = columns * bx * by * (p.NZ + 2 * chunks)
    ring = columns * (2 * (bx + (2 if corners else 0)) + 2 * by) * p.NZ
    return 4 * (own + ring) + 4 * p.points


def naive_bytes(params, p: StencilProblem) -> int:
    """Rung 1: seven loads a point, one store."""
    return 4 * 8 * p.points


class Workspace:
    def __init__(self, p: StencilProblem, seed: int):
        import cupy

        self.p = p
        self.u = cupy.random.default_rng(seed).random((p.NZ, p.NY, p.NX), dtype=cupy.float32) * 2 - 1
        self.out = cupy.empty_like(self.u)

    def poison(self) -> None:
        self.out.fill(np.nan)

    def args(self) -> tuple:
        p = self.p
        return (self.u, self.out, np.int32(p.NX), np.int32(p.NY), np.int32(p.NZ), np.float32(C0), np.float32(C1))

    def expected(self):
        import cupy

        v = cupy.pad(self.u.astype(cupy.float64), 1)
        faces = (v[:-2, 1:-1, 1:-1] + v[2:, 1:-1, 1:-1] + v[1:-1, :-2, 1:-1] + v[1:-1, 2:, 1:-1]
                 + v[1:-1, 1:-1, :-2] + v[1:-1, 1:-1, 2:])
        return float(np.float32(C0)) * v[1:-1, 1:-1, 1:-1] + float(np.float32(C1)) * faces

    def output(self):
        return self.out


def workspace(p: StencilProblem, seed: int) -> Workspace:
    return Workspace(p, seed)


def _device_copy(ws: Workspace):
    return device_copy(4 * ws.p.points)


def _cupy_slices(ws: Workspace):
    """What a CuPy user would write: zero-padded copy, then six shifted slices summed."""
    import cupy

    c0, c1 = np.float32(C0), np.float32(C1)

    def run():
        v = cupy.pad(ws.u, 1)
        faces = (v[:-2, 1:-1, 1:-1] + v[2:, 1:-1, 1:-1] + v[1:-1, :-2, 1:-1] + v[1:-1, 2:, 1:-1]
                 + v[1:-1, 1:-1, :-2] + v[1:-1, 1:-1, 2:])
        cupy.multiply(faces, c1, out=ws.out)
        ws.out += c0 * ws.u

    return run


def references() -> list[Reference]:
    return [Reference("device copy", _device_copy, verifiable=False), Reference("CuPy slices", _cupy_slices)]


# --- the public operator (simtlab.stencil) --------------------------------------------------------

def check_grid(shape: tuple) -> None:
    """One line for a grid simtlab.stencil cannot take (its declaration's and its fake's)."""
    if len(shape) != 3:
        raise ValueError(f"simtlab.stencil takes a 3-D grid (NZ, NY, NX), got shape {shape}")


def _declare(shapes, dtype, options, device, vec, build) -> Declared:
    """A (NZ, NY, NX) grid to its Jacobi step: rung 4 (the cp.async ring; 16-byte copies where NX is
    a multiple of 4 and the grid 16-byte aligned, which the kernel checks itself) from sm_80, rung 3
    before it, at their catalog parameters."""
    shape = shapes[0]
    check_grid(shape)
    p = StencilProblem(*(max(n, 1) for n in shape))
    rung = FAMILY.rung(4 if tuple(device.compute_capability) >= (8, 0) else 3)
    params = rung.params(device.arch)
    launch = rung.geometry(params, p, device)
    if launch.grid[1] > MAX_GRID_YZ or launch.grid[2] > MAX_GRID_YZ:
        raise ValueError(f"simtlab.stencil: a {p.label} grid needs {launch.grid[1]} x {launch.grid[2]} blocks in y "
                         f"and z; the grid holds {MAX_GRID_YZ} each")
    c0, c1 = np.float32(options.get("c0", C0)), np.float32(options.get("c1", C1))
    step = Step(rung, params, launch, ((IN, 0), (OUT, 0), np.int32(p.NX), np.int32(p.NY), np.int32(p.NZ), c0, c1))
    return Declared(((shape, dtype),), (step,), f"{p.label}: {rung.id} {dict(params)}", vec=False, align=4)


OPERATORS = (Operator("stencil", ("u",), (DTYPE,), _declare),)


# --- the family: its rungs, one per kernel file -------------------------------------------------

FAMILY = Family(
    name="stencil",
    title="3D 7-point Jacobi step, fp32, zeros outside the grid",
    ops=sys.modules[__name__],
    reference="device copy of the grid (read + write), CuPy slices",
    default_sizes=("512",),
    rungs=(
        Rung("stencil", 1, "naive", "stencil/01_naive.cu", "stencil_naive", ("BX", "BY"), frozen({"BX": 32, "BY": 8}),
             "one thread per point, seven global loads: the z neighbours are a plane away", geometry_naive,
             traffic=naive_bytes),
        Rung("stencil", 2, "blocking_25d", "stencil/02_blocking_25d.cu", "stencil_25d", ("BX", "BY", "ZC"),
             frozen({"BX": 32, "BY": 8, "ZC": 64}),
             "2.5D: the plane in shared memory with its halo, z neighbours in registers, marching along z",
             geometry_25d, sass_expect=("LDS", "BAR")),
        Rung("stencil", 3, "pipelined_25d", "stencil/03_pipelined_25d.cu", "stencil_25d_pipelined",
             ("BX", "BY", "RY", "ZC"), frozen({"BX": 32, "BY": 8, "RY": 4, "ZC": 32}),
             "2.5D with plane z+2 loading while plane z computes (double-buffered tile, one barrier a plane)",
             geometry_25d_pipelined, sass_expect=("LDS", "BAR")),
        Rung("stencil", 4, "async_ring", "stencil/04_async_ring.cu", "stencil_async_ring",
             ("BX", "BY", "RY", "ZC", "P"), frozen({"BX": 256, "BY": 2, "RY": 8, "ZC": 32, "P": 2}),
             "planes stream by cp.async into a ring of shared slots P planes ahead: loads in flight "
             "without registers",
             geometry_async_ring, min_cc=(8, 0), sass_expect=("LDGSTS", "BAR"),
             traffic=functools.partial(requested_bytes, corners=False)),
    ),
    metric="gbs",
    check_size="33x65x17",
    operators=OPERATORS,
)
