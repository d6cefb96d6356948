"""fp32 matrix transpose, out (cols x rows) = in (rows x cols)^T, any shape."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from ..family import IN, OUT, Declared, Family, Operator, Rung, Step, frozen
from ..launch import Launch, grid2
from .base import Reference, device_copy, parse_int
from .base import make_runner, unsupported  # noqa: F401 (FamilyOps' default hooks)

DTYPE = "float32"


@dataclass(frozen=True)
class TransposeProblem:
    rows: int
    cols: int
    dtype: str = DTYPE

    def __post_init__(self):
        if int(self.rows) < 1 or int(self.cols) < 1:
            raise ValueError(f"transpose shape must be at least 1x1, got {self.rows}x{self.cols}")

    @property
    def label(self) -> str:
        return f"{self.rows}x{self.cols}"

    @property
    def flops(self) -> int:
        return 0

    @property
    def bytes(self) -> int:
        return 8 * self.rows * self.cols  # every element read once and written once


def parse_size(text: str, **_) -> TransposeProblem:
    """'8192' (square) or 'ROWSxCOLS'."""
    parts = str(text).lower().split("x")
    if len(parts) == 1:
        n = parse_int(parts[0], "transpose size")
        return TransposeProblem(n, n)
    if len(parts) != 2:
        raise ValueError(f"transpose size {text!r}: use N or ROWSxCOLS")
    return TransposeProblem(*(parse_int(q, f"transpose size {text!r}") for q in parts))


def tolerance(p: TransposeProblem, ws=None) -> float:
    return 0.0  # data movement only: exact


def geometry_tiles(params, p: TransposeProblem, device=None) -> Launch:
    return Launch(grid2(p.cols, p.rows, params["TILE"], params["TILE"]), (params["TILE"], params["ROWS"], 1))


def geometry_vectorized(params, p: TransposeProblem, device=None) -> Launch:
    t = params["TILE"]
    return Launch(grid2(p.cols, p.rows, t, t), (t * t // 4, 1, 1))


def geometry_wide(params, p: TransposeProblem, device=None) -> Launch:
    t = params["TILE"]
    return Launch(grid2(p.cols, p.rows, t, t), (params["THREADS"], 1, 1))


def requested_bytes(params, p: TransposeProblem) -> int:
    return p.bytes


class Workspace:
    def __init__(self, p: TransposeProblem, seed: int):
        import cupy

        self.p = p
        self.x = cupy.random.default_rng(seed).random((p.rows, p.cols), dtype=cupy.float32) * 2 - 1
        self.out = cupy.empty((p.cols, p.rows), dtype=cupy.float32)

    def poison(self) -> None:
        self.out.fill(np.nan)

    def args(self) -> tuple:
        return (self.x, self.out, np.int32(self.p.rows), np.int32(self.p.cols))

    def vec_ok(self) -> bool:
        aligned = self.x.data.ptr % 16 == 0 and self.out.data.ptr % 16 == 0
        return aligned and self.p.rows % 4 == 0 and self.p.cols % 4 == 0

    def expected(self):
        return self.x.T

    def output(self):
        return self.out


def workspace(p: TransposeProblem, seed: int) -> Workspace:
    return Workspace(p, seed)


def _device_copy(ws: Workspace):
    return device_copy(4 * ws.p.rows * ws.p.cols)


def _tile_copy(ws: Workspace):
    """Our 32x32-tile copy (kernels/transpose/tile_copy.cu): the transposes' access shape without the transpose."""
    import cupy

    from ..compile import compile_file
    from ..device import current_arch

    expr = "tile_copy<32, 8>"
    cubin = compile_file("transpose/tile_copy.cu", [expr], arch=current_arch())
    func = cupy.RawModule(path=str(cubin.path)).get_function(cubin.mangled(expr))
    dst = cupy.empty_like(ws.x)
    launch = geometry_tiles({"TILE": 32, "ROWS": 8}, ws.p)
    args = (ws.x, dst, np.int32(ws.p.rows), np.int32(ws.p.cols))

    def run():
        func(launch.grid, launch.block, args)

    return run


def _cupy_transpose(ws: Workspace):
    def run():
        ws.out[...] = ws.x.T  # CuPy's strided copy: .T made contiguous, into the preallocated output

    return run


def references() -> list[Reference]:
    return [Reference("device copy", _device_copy, verifiable=False),
            Reference("tile copy (same access shape)", _tile_copy, verifiable=False),
            Reference("CuPy .T contiguous", _cupy_transpose)]


def batched_transposer(x, out):
    """A callable writing out[..., j, i] = x[..., i, j] with the top rung (fp32, contiguous, any
    shape; a leading batch dimension is walked one launch per matrix): for other families that need
    an operand transposed, e.g. B^T for TF32 wgmma."""
    from ..device import current_arch
    from ..launch import build, prepare

    rows, cols = x.shape[-2:]
    if out.shape[-2:] != (cols, rows) or out.shape[:-2] != x.shape[:-2]:
        raise ValueError(f"transpose of {tuple(x.shape)} needs an output of shape {x.shape[:-2] + (cols, rows)}, "
                         f"got {tuple(out.shape)}")
    if x.dtype != np.float32 or out.dtype != np.float32 or not (x.flags.c_contiguous and out.flags.c_contiguous):
        raise ValueError("transpose takes contiguous float32 arrays")
    rung = FAMILY.rung("wide_tile")
    inst = build(rung, None, current_arch())
    p = TransposeProblem(rows, cols)
    launch = inst.geometry(p)
    xs = x.reshape(-1, rows, cols)
    outs = out.reshape(-1, cols, rows)
    vec = rows % 4 == 0 and cols % 4 == 0 and x.data.ptr % 16 == 0 and out.data.ptr % 16 == 0
    func = prepare(inst, launch, vec)
    calls = [(xs[i], outs[i], np.int32(rows), np.int32(cols)) for i in range(xs.shape[0])]

    def run():
        for args in calls:
            func(launch.grid, launch.block, args)

    return run


# --- the public operator (simtlab.transpose) ------------------------------------------------------

MAX_GRID_Y = 65535


def _declare(shapes, dtype, options, device, vec, build) -> Declared:
    """A (rows, cols) matrix to its (cols, rows) transpose: rung 5 (64x64 tiles, LDG.128 where rows
    and columns are multiples of 4 and the matrix 16-byte aligned; element moves otherwise)."""
    shape = shapes[0]
    if len(shape) != 2:
        raise ValueError(f"simtlab.transpose: the plan takes a matrix, got shape {shape}")
    rows, cols = shape
    rung = FAMILY.rung(5)
    params = rung.params(device.arch)
    p = TransposeProblem(max(rows, 1), max(cols, 1))
    launch = rung.geometry(params, p, device)
    if launch.grid[1] > MAX_GRID_Y:
        raise ValueError(f"simtlab.transpose: {rows} rows are {launch.grid[1]} tiles of {params['TILE']}, past the "
                         f"grid's {MAX_GRID_Y} in y")
    vec = vec and rows % 4 == 0 and cols % 4 == 0
    step = Step(rung, params, launch, ((IN, 0), (OUT, 0), np.int32(p.rows), np.int32(p.cols)))
    return Declared((((cols, rows), dtype),), (step,), f"{rows}x{cols}: {rung.id} {dict(params)}", vec=vec)


OPERATORS = (Operator("transpose", ("x",), (DTYPE,), _declare),)


# --- the family: its rungs, one per kernel file -------------------------------------------------

_TILE = ("TILE", "ROWS")


FAMILY = Family(
    name="transpose",
    title="fp32 matrix transpose, any rows x cols",
    ops=sys.modules[__name__],
    reference="device-to-device copy of the same bytes",
    default_sizes=("16384",),
    rungs=(
        Rung("transpose", 1, "naive", "transpose/01_naive.cu", "transpose_naive", _TILE,
             frozen({"TILE": 32, "ROWS": 8}), "coalesced reads, writes 32 rows apart: one sector per element written",
             geometry_tiles),
        Rung("transpose", 2, "shared_tile", "transpose/02_shared_tile.cu", "transpose_shared_tile", _TILE,
             frozen({"TILE": 32, "ROWS": 8}),
             "transpose inside a shared 32x32 tile: both sides coalesced, column reads 32-way bank-conflicted",
             geometry_tiles, sass_expect=("LDS", "STS", "BAR")),
        Rung("transpose", 3, "padded_tile", "transpose/03_padded_tile.cu", "transpose_padded_tile", _TILE,
             frozen({"TILE": 32, "ROWS": 8}), "tile[32][33]: one float of padding puts a column in 32 banks",
             geometry_tiles, sass_expect=("LDS", "STS", "BAR")),
        Rung("transpose", 4, "vectorized", "transpose/04_vectorized.cu", "transpose_vectorized", ("TILE",),
             frozen({"TILE": 32}), "LDG.128 / STG.128: four elements per access, a quarter of the instructions",
             geometry_vectorized, vec_variant=True, sass_expect=("LDG.128", "STG.128")),
        Rung("transpose", 5, "wide_tile", "transpose/05_wide_tile.cu", "transpose_wide_tile", ("TILE", "THREADS"),
             frozen({"TILE": 64, "THREADS": 256}),
             "64x64 tile, four LDG.128 in flight per thread before any shared store: enough bytes to fill the DRAM pipe",
             geometry_wide, vec_variant=True, sass_expect=("LDG.128", "STG.128", "BAR")),
    ),
    metric="gbs",
    check_size="333x517",
    operators=OPERATORS,
)
