"""Single-channel 2D image filter (correlation, as cuDNN and scipy.ndimage.correlate compute it),
fp32, "same" output size with zeros outside the image, filter radius 1-7:
out[y, x] = sum over dy, dx in [-R, R] of in[y + dy, x + dx] * filt[dy + R, dx + R]."""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, replace

import numpy as np

from ..family import IN, OUT, Declared, Family, Operator, Rung, Step, frozen
from ..hw.occupancy import SMEM_WITHOUT_OPT_IN
from ..launch import Launch, grid2
from ..space import Space
from ..verify import dot_tolerance
from .base import Reference, device_copy, parse_int, torch_reference
from .base import unsupported  # noqa: F401 (FamilyOps' default hook)
from .split import MAX_GRID_YZ
from .tma import TMA_SWIZZLE_NONE, TmaBox, encode_tensor_map

DTYPE = "float32"
MAX_RADIUS = 7  # the kernels' __constant__ filter holds 15 x 15 taps
# What a rung does beyond the naive launch (Rung.capabilities):
CONSTANT_FILTER = "c_filter"  # reads the filter from its module's __constant__ c_filter (rungs 2-7)
RADIUS_ARGUMENT = "radius_argument"  # takes the radius at run time, not as a template argument (rung 2)
TMA = "tma"  # reads the image through a tensor map instead of its pointer (rung 7)
FILTER_ARGUMENT = "filter_argument"  # takes the filter as a pointer, after the image (rung 8)
TX = 4  # outputs per thread along x in rungs 4-5 (rungs 6-7: their TX parameter)


@dataclass(frozen=True)
class ConvProblem:
    H: int
    W: int
    R: int = 3
    dtype: str = DTYPE

    def __post_init__(self):
        if int(self.H) < 1 or int(self.W) < 1:
            raise ValueError(f"image must be at least 1x1, got {self.H}x{self.W}")
        if not 1 <= int(self.R) <= MAX_RADIUS:
            raise ValueError(f"filter radius must be 1..{MAX_RADIUS}, got {self.R}")

    @property
    def taps(self) -> int:
        return (2 * self.R + 1) ** 2

    @property
    def label(self) -> str:
        return f"{self.H}x{self.W}:r{self.R}"

    @property
    def flops(self) -> int:
        return 2 * self.taps * self.H * self.W

    @property
    def bytes(self) -> int:
        return 8 * self.H * self.W + 4 * self.taps  # the image read once, the output written once


def parse_size(text: str, **_) -> ConvProblem:
    """'8192' (square, radius 3), 'HxW', either with ':rN' for radius N."""
    size, _, radius = str(text).lower().partition(":")
    r = 3
    if radius:
        if not radius.startswith("r"):
            raise ValueError(f"conv2d size {text!r}: give the radius as ':r3'")
        r = parse_int(radius[1:], f"conv2d radius in {text!r}")
    parts = size.split("x")
    if len(parts) == 1:
        n = parse_int(parts[0], "conv2d image size")
        return ConvProblem(n, n, r)
    if len(parts) != 2:
        raise ValueError(f"conv2d size {text!r}: use N or HxW, optionally with :rR")
    h, w = (parse_int(q, f"conv2d size {text!r}") for q in parts)
    return ConvProblem(h, w, r)


def tolerance(p: ConvProblem, ws=None) -> float:
    return dot_tolerance(p.dtype, p.taps)


def radius_params(p: ConvProblem, device=None, vec=None) -> dict:
    """The problem's radius is a template argument of the tiled rungs (their loops unroll)."""
    return {"R": p.R}


def patch_rows(r: int) -> int:
    """Rung 5's output rows per thread: fewer as the filter grows, so the fully unrolled
    TY*4*(2R+1)^2 FMAs stay within a few thousand instructions (the instruction cache)."""
    return 4 if r <= 5 else 2  # 4 beat 8 at radius 3 on the H200 (benchmarks/results/*_7c53c2)


def radius_rows_params(p: ConvProblem, device=None, vec=None) -> dict:
    """Rungs 5-6: the radius and the rows per thread that suit it."""
    return {"R": p.R, "TY": patch_rows(p.R)}


# Rung 6's block shape where its whole space was measured (every one of 760 points, 8192^2 on the
# H200: tests/fixtures/conv2d_pipelined_h200_8192_r{1,3}.json). The shape it had (BX 32, BY 8, NT 2)
# ranked 29th at radius 1 (+1.98%) and 6th at radius 3 (+1.08%); other radii keep it.
PIPELINED_MEASURED = {1: {"BX": 64, "BY": 8, "TX": 4, "TY": 4, "NT": 1},
                      3: {"BX": 16, "BY": 16, "TX": 4, "TY": 4, "NT": 4}}


def pipelined_params(p: ConvProblem, device=None, vec=None) -> dict:
    """Rung 6: the radius, and the block shape measured best for it where there is one."""
    return {**radius_rows_params(p), **PIPELINED_MEASURED.get(p.R, {})}


# Rung 8's block shape where its space was sampled (a random walk of 390 / 248 points at 8192^2 radius
# 3 and 4096^2 radius 7 on an H100: tests/fixtures/conv2d_filter_arg_h100_*.json). Its staged taps
# live in registers, so taller patches over fewer threads won: rung 6's shape ran 1.21x / 1.05x slower.
FILTER_ARG_MEASURED = {3: {"BX": 32, "BY": 4, "TX": 4, "TY": 8, "NT": 2},
                       7: {"BX": 32, "BY": 32, "TX": 4, "TY": 2, "NT": 16}}


def filter_arg_params(p: ConvProblem, device=None, vec=None) -> dict:
    """Rung 8: its own measured shape at a radius where there is one, else rung 6's rule."""
    return {**pipelined_params(p), **FILTER_ARG_MEASURED.get(p.R, {})}


def tma_params(p: ConvProblem, device=None, vec=None) -> dict:
    """Rung 7: with no fill instructions left, taller patches (8 rows a thread up to radius 3) and
    longer walks (8 tiles a block: one exposed first copy per 8 tiles) won on the H200
    (benchmarks/results/2026-12-03_h200_4cdb15/: 81.1% of the copy against 77.7% at rung 6's shape)."""
    return {"R": p.R, "TY": 8 if p.R <= 3 else patch_rows(p.R), "NT": 8}


def halo_pad(r: int) -> int:
    """Rung 6's halo columns on each side: the radius rounded up to 16 bytes (4 floats)."""
    return 4 * -(-r // 4)


def pipelined_tile(params, r: int) -> tuple[int, int]:
    """Rungs 6-7's shared tile (rows, floats per row) for one stage."""
    return params["BY"] * params["TY"] + 2 * r, params["BX"] * params["TX"] + 2 * halo_pad(r)


# --- search spaces: 2D block shapes (and rows per thread, tiles per block), the radius from the
# problem; a tile is sized for the largest radius so every point compiles for every problem ----

STATIC_SMEM = SMEM_WITHOUT_OPT_IN  # a block's static __shared__ arrays can take no more


def _block_rules(c) -> bool:
    return 64 <= c["BX"] * c["BY"] <= 1024


def block_space(max_smem: int) -> Space:
    """Rungs 3-4: one output (or four along x) per thread in BX x BY blocks."""
    rows = lambda c: c["BY"] + 2 * MAX_RADIUS  # noqa: E731
    cols = lambda c: c["BX"] * TX + 4 * -(-2 * MAX_RADIUS // 4) + 4  # noqa: E731 (rung 4's wider tile row)
    return Space({"BX": (16, 32, 64), "BY": (2, 4, 8, 16, 32)},
                 [("64..1024 threads a block", _block_rules),
                  ("the tile fits in static shared memory", lambda c: 4 * rows(c) * cols(c) <= STATIC_SMEM)])


def patch_space(max_smem: int) -> Space:
    """Rung 5: a TY x 4 patch per thread."""
    tile = lambda c: 4 * (c["BY"] * c["TY"] + 2 * MAX_RADIUS) * (c["BX"] * TX + 4 * -(-2 * MAX_RADIUS // 4) + 4)  # noqa: E731
    return Space({"BX": (16, 32, 64), "BY": (2, 4, 8, 16), "TY": (1, 2, 4, 8)},
                 [("64..1024 threads a block", _block_rules),
                  ("the tile fits in static shared memory", lambda c: tile(c) <= STATIC_SMEM)])


def pipeline_space(max_smem: int, tma: bool = False) -> Space:
    """Rungs 6-7: a TY x TX patch per thread, NT tiles down a strip, two stages of dynamic shared
    memory (rung 7: TMA boxes of at most 256 elements a side). Wide on purpose (from 8-wide blocks
    and one tile a strip to 128-wide blocks and 16 tiles): the tuner's measured tables need spaces
    whose optimum is not on the defaults' doorstep."""
    def stage_bytes(c):
        th, tw = pipelined_tile(c, MAX_RADIUS)
        return 4 * th * tw

    rules = [("64..1024 threads a block", _block_rules),
             ("two stages within the opt-in limit", lambda c: 2 * stage_bytes(c) + 256 <= max_smem)]
    if tma:
        rules.append(("a TMA box of at most 256 a side",
                      lambda c: max(pipelined_tile(c, MAX_RADIUS)) <= 256))
    return Space({"BX": (8, 16, 32, 64, 128), "BY": (1, 2, 4, 8, 16, 32), "TX": (4, 8), "TY": (1, 2, 4, 8),
                  "NT": (1, 2, 4, 8, 16)}, rules)


def pipeline_features(c) -> list[float]:
    """What the tuner's cost model sees of a rung 6-7 point: its parameters and what they make -
    threads a block, the strip's width, rows a tile, outputs a thread, a stage's shared bytes (the
    largest radius) and the rows a block walks. Raw values alone leave the trees to learn products."""
    th, tw = pipelined_tile(c, MAX_RADIUS)
    return [float(c[k]) for k in sorted(c)] + [c["BX"] * c["BY"], c["BX"] * c["TX"], c["BY"] * c["TY"],
                                               c["TX"] * c["TY"], 4 * th * tw, c["BY"] * c["TY"] * c["NT"]]


# --- launch geometry -------------------------------------------------------------------------

def geometry_pixel(params, p: ConvProblem, device=None) -> Launch:
    return Launch(grid2(p.W, p.H, params["BX"], params["BY"]), (params["BX"], params["BY"], 1))


def geometry_register_x(params, p: ConvProblem, device=None) -> Launch:
    return Launch(grid2(p.W, p.H, params["BX"] * TX, params["BY"]), (params["BX"], params["BY"], 1))


def geometry_register_xy(params, p: ConvProblem, device=None) -> Launch:
    return Launch(grid2(p.W, p.H, params["BX"] * TX, params["BY"] * params["TY"]), (params["BX"], params["BY"], 1))


def geometry_pipelined(params, p: ConvProblem, device=None) -> Launch:
    """A block per column strip of BX*TX outputs and NT consecutive tiles of BY*TY rows; two tile
    stages in dynamic shared memory."""
    th, tw = pipelined_tile(params, params["R"])
    grid = grid2(p.W, p.H, params["BX"] * params["TX"], params["BY"] * params["TY"] * params["NT"])
    return Launch(grid, (params["BX"], params["BY"], 1), 2 * 4 * th * tw)


def tma_stage_bytes(params, r: int) -> int:
    """Rung 7's stage: the tile rounded up to the 128-byte alignment TMA writes at."""
    th, tw = pipelined_tile(params, r)
    return -(-4 * th * tw // 128) * 128


def geometry_tma(params, p: ConvProblem, device=None) -> Launch:
    """Rung 6's grid and blocks; two stages, their two mbarriers and 128 bytes to align the first stage."""
    return replace(geometry_pipelined(params, p), shared=2 * tma_stage_bytes(params, params["R"]) + 16 + 128)


def tma_box(params, p: ConvProblem, width: int) -> TmaBox:
    """The image (rows of `width` floats, a multiple of 4) as a 2-D tensor, read in tile boxes."""
    th, tw = pipelined_tile(params, p.R)
    return TmaBox((width, p.H), (4 * width,), (tw, th))


def requested_bytes(params, p: ConvProblem) -> int:
    """Global bytes the threads ask for (caches aside) in the tiled rungs: each block's haloed tile
    once (rung 3: BX + 2R columns of BY rows, one output a thread), and the output."""
    bx, by, r = params["BX"], params["BY"], p.R
    return _tiles_bytes(p, bx + 2 * r, bx, by * params.get("TY", 1))


def _tiles_bytes(p: ConvProblem, tile_width: int, cols: int, rows: int) -> int:
    tiles = -(-p.W // cols) * -(-p.H // rows)
    return 4 * tiles * tile_width * (rows + 2 * p.R) + 4 * p.H * p.W


def per_pixel_bytes(params, p: ConvProblem, filter_loads: bool = False) -> int:
    """Rungs 1-2: every tap's input (and, in rung 1, every tap's filter value) for every pixel."""
    return (8 if filter_loads else 4) * p.taps * p.H * p.W + 4 * p.H * p.W


def register_bytes(params, p: ConvProblem) -> int:
    """Rungs 4-5: TX outputs a thread, each row of the window read as whole 16-byte chunks."""
    bx, nc = params["BX"], (TX + 2 * p.R + 3) // 4
    return _tiles_bytes(p, bx * TX + 4 * nc, bx * TX, params["BY"] * params.get("TY", 1))


def pipelined_bytes(params, p: ConvProblem) -> int:
    """Rungs 6-7: each tile of the strip read once as its (TMA-shaped) haloed box."""
    th, tw = pipelined_tile(params, p.R)
    rows = params["BY"] * params.get("TY", 1)
    return 4 * -(-p.W // (params["BX"] * params["TX"])) * -(-p.H // rows) * th * tw + 4 * p.H * p.W


# --- inputs, outputs, references ---------------------------------------------------------------

class Workspace:
    def __init__(self, p: ConvProblem, seed: int):
        import cupy

        self.p = p
        rng = cupy.random.default_rng(seed)
        self.img = rng.random((p.H, p.W), dtype=cupy.float32) * 2 - 1
        d = 2 * p.R + 1
        self.filt = (rng.random((d, d), dtype=cupy.float32) * 2 - 1) / d
        self.out = cupy.empty((p.H, p.W), dtype=cupy.float32)

    def poison(self) -> None:
        self.out.fill(np.nan)

    def args(self) -> tuple:
        """Rung 1's arguments (the others take theirs from make_runner)."""
        p = self.p
        return (self.img, self.filt, self.out, np.int32(p.H), np.int32(p.W), np.int32(p.R))

    def expected(self):
        import cupy
        from cupyx.scipy import ndimage

        return ndimage.correlate(self.img.astype(cupy.float64), self.filt.astype(cupy.float64), mode="constant",
                                 cval=0.0)

    def output(self):
        return self.out


def workspace(p: ConvProblem, seed: int) -> Workspace:
    return Workspace(p, seed)


def make_runner(inst, problem: ConvProblem, ws: Workspace, device, vec, prepare):
    """Rungs 2-7 read the filter from their module's __constant__ c_filter: fill it, then launch
    without the filter argument (rung 7 takes a tensor map of the image instead of its pointer);
    rung 8 takes it after the image. Rung 1 is the default single launch (None)."""
    import cupy

    p = problem
    if inst.rung.can(FILTER_ARGUMENT):
        launch = inst.geometry(p, device)
        func = prepare(inst, launch, vec, device)
        args = (ws.img, ws.filt, ws.out, np.int32(p.H), np.int32(p.W))
        return lambda: func(launch.grid, launch.block, args, shared_mem=launch.shared)
    if not inst.rung.can(CONSTANT_FILTER):
        return None
    launch = inst.geometry(p, device)
    func = prepare(inst, launch, vec, device)
    symbol = inst.module().get_global("c_filter")
    cupy.ndarray(((2 * MAX_RADIUS + 1) ** 2,), cupy.float32, memptr=symbol)[: p.taps] = ws.filt.ravel()
    args = (ws.img, ws.out, np.int32(p.H), np.int32(p.W))
    if inst.rung.can(RADIUS_ARGUMENT):
        args += (np.int32(p.R),)
    padded = None
    if inst.rung.can(TMA):  # a tensor map over the image (rows padded to 16 bytes on a copy)
        width = -(-p.W // 4) * 4
        img = ws.img
        if width != p.W:
            padded = img = cupy.zeros((p.H, width), dtype=cupy.float32)
        tmap = cupy.asarray(encode_tensor_map(tma_box(inst.params, p, width), img.data.ptr, DTYPE, TMA_SWIZZLE_NONE))
        args = (tmap, ws.out, np.int32(p.H), np.int32(p.W))

    def run():
        if padded is not None:
            padded[:, : p.W] = ws.img
        func(launch.grid, launch.block, args, shared_mem=launch.shared)

    return run


def _device_copy(ws: Workspace):
    return device_copy(4 * ws.p.H * ws.p.W)


def _cupyx(ws: Workspace):
    from cupyx.scipy import ndimage

    def run():
        ndimage.correlate(ws.img, ws.filt, output=ws.out, mode="constant", cval=0.0)

    return run


def _torch(ws: Workspace):
    import torch
    import torch.nn.functional as F

    torch.backends.cudnn.allow_tf32 = False  # fp32 like the rungs (PyTorch's default lets cuDNN use TF32)
    x = torch.as_tensor(ws.img, device="cuda")[None, None]
    w = torch.as_tensor(ws.filt, device="cuda")[None, None]

    def run():  # timed as a user calls it (its own output); its values are checked in tests/test_gpu.py
        F.conv2d(x, w, padding=ws.p.R)

    return run


def references() -> list[Reference]:
    return [Reference("device copy", _device_copy, verifiable=False),
            Reference("cupyx ndimage.correlate", _cupyx)] + torch_reference("PyTorch conv2d (cuDNN)", _torch)


# --- the public operator (simtlab.conv2d) ---------------------------------------------------------

def check_shapes(xs: tuple, ws: tuple) -> None:
    """One line for images and a filter simtlab.conv2d cannot take (its declaration's and its fake's)."""
    if len(xs) < 2:
        raise ValueError(f"simtlab.conv2d takes images (..., H, W), got shape {xs}")
    if len(ws) != 2 or ws[0] != ws[1] or ws[0] % 2 == 0 or not 3 <= ws[0] <= 2 * MAX_RADIUS + 1:
        raise ValueError(f"simtlab.conv2d takes a square filter of odd size 3..{2 * MAX_RADIUS + 1}, got shape {ws}")


def _declare(shapes, dtype, options, device, vec, build) -> Declared:
    """Images (..., H, W) and a (D, D) filter, D odd up to 15: rung 8 at its block shape for the radius
    (filter_arg_params), the leading dimensions as a batch through the grid's z."""
    xs, ws = shapes
    check_shapes(xs, ws)
    if tuple(device.compute_capability) < (8, 0):
        raise ValueError(f"simtlab.conv2d runs conv2d rung 8 (cp.async): sm_80 or newer, not {device.arch}")
    batch = int(np.prod(xs[:-2], dtype=np.int64))
    if batch > MAX_GRID_YZ:
        raise ValueError(f"simtlab.conv2d: {batch} images; the grid holds {MAX_GRID_YZ} in z")
    h, w = xs[-2:]
    p = ConvProblem(max(h, 1), max(w, 1), ws[0] // 2)
    rung = FAMILY.rung(8)
    params = rung.params(device.arch, filter_arg_params(p))
    one = rung.geometry(params, p, device)
    launch = replace(one, grid=(one.grid[0], one.grid[1], max(batch, 1)))
    if launch.grid[1] > MAX_GRID_YZ:
        raise ValueError(f"simtlab.conv2d: {h} rows are {launch.grid[1]} block rows; the grid holds {MAX_GRID_YZ} in y")
    step = Step(rung, params, launch, ((IN, 0), (IN, 1), (OUT, 0), np.int32(p.H), np.int32(p.W)))
    return Declared(((xs, dtype),), (step,), f"{batch}x{p.label}: {rung.id} {dict(params)}", vec=False, align=4)


OPERATORS = (Operator("conv2d", ("x", "weight"), (DTYPE,), _declare),)


# --- the family: its rungs, one per kernel file -------------------------------------------------

FAMILY = Family(
    name="conv2d",
    title="single-channel 2D filter, fp32, same size, zeros outside, radius 1-7",
    ops=sys.modules[__name__],
    reference="device copy of the image (read + write), cupyx.scipy.ndimage.correlate, PyTorch conv2d",
    default_sizes=("8192:r3",),
    rungs=(
        Rung("conv2d", 1, "naive", "conv2d/01_naive.cu", "conv2d_naive", ("BX", "BY"), frozen({"BX": 32, "BY": 8}),
             "one thread per pixel; every tap's input and filter value loaded from global memory", geometry_pixel,
             traffic=functools.partial(per_pixel_bytes, filter_loads=True)),
        Rung("conv2d", 2, "constant", "conv2d/02_constant.cu", "conv2d_constant", ("BX", "BY"),
             frozen({"BX": 32, "BY": 8}),
             "filter in __constant__ memory: one broadcast per tap for the whole warp, half the loads",
             geometry_pixel, capabilities=frozenset({CONSTANT_FILTER, RADIUS_ARGUMENT}), traffic=per_pixel_bytes),
        Rung("conv2d", 3, "smem_tile", "conv2d/03_smem_tile.cu", "conv2d_smem_tile", ("BX", "BY", "R"),
             frozen({"BX": 32, "BY": 8, "R": 3}),
             "haloed input tile loaded once per block into shared memory; taps unrolled for the radius",
             geometry_pixel, size_defaults=radius_params, sass_expect=("LDS", "BAR"),
             capabilities=frozenset({CONSTANT_FILTER}), space=block_space),
        Rung("conv2d", 4, "register_x", "conv2d/04_register_x.cu", "conv2d_register_x", ("BX", "BY", "R"),
             frozen({"BX": 32, "BY": 8, "R": 3}),
             "four outputs per thread: each window row read once (LDS.128) feeds 4(2R+1) FMAs",
             geometry_register_x, size_defaults=radius_params, sass_expect=("LDS.128", "STG.128"),
             capabilities=frozenset({CONSTANT_FILTER}), space=block_space, traffic=register_bytes),
        Rung("conv2d", 5, "register_xy", "conv2d/05_register_xy.cu", "conv2d_register_xy", ("BX", "BY", "TY", "R"),
             frozen({"BX": 32, "BY": 8, "TY": 4, "R": 3}),
             "a TYx4 patch per thread: each input row read once feeds every output row it touches; FMA-bound",
             geometry_register_xy, size_defaults=radius_rows_params, sass_expect=("LDS.128", "STG.128"),
             capabilities=frozenset({CONSTANT_FILTER}), space=patch_space, traffic=register_bytes),
        Rung("conv2d", 6, "pipelined", "conv2d/06_pipelined.cu", "conv2d_pipelined", ("BX", "BY", "TX", "TY", "R", "NT"),
             frozen({"BX": 32, "BY": 8, "TX": 4, "TY": 4, "R": 3, "NT": 2}),
             "a block walks NT tiles down a strip; cp.async fills the next tile (16-byte copies) while "
             "this one computes",
             geometry_pipelined, min_cc=(8, 0), size_defaults=pipelined_params, from_store=True,
             sass_expect=("LDGSTS", "LDS.128"), capabilities=frozenset({CONSTANT_FILTER}), space=pipeline_space,
             traffic=pipelined_bytes, features=pipeline_features),
        Rung("conv2d", 7, "tma", "conv2d/07_tma.cu", "conv2d_tma", ("BX", "BY", "TX", "TY", "R", "NT"),
             frozen({"BX": 32, "BY": 8, "TX": 4, "TY": 8, "R": 3, "NT": 8}),
             "one thread asks the copy engine (TMA) for each haloed tile, zeros outside the image included: "
             "no fill instructions left",
             geometry_tma, min_cc=(9, 0), size_defaults=tma_params, sass_expect=("UTMALDG", "SYNCS"),
             capabilities=frozenset({CONSTANT_FILTER, TMA}), space=functools.partial(pipeline_space, tma=True),
             traffic=pipelined_bytes, features=pipeline_features),
        Rung("conv2d", 8, "filter_arg", "conv2d/08_filter_arg.cu", "conv2d_filter_arg",
             ("BX", "BY", "TX", "TY", "R", "NT"), frozen({"BX": 32, "BY": 8, "TX": 4, "TY": 4, "R": 3, "NT": 2}),
             "rung 6 with the filter as an argument, staged in shared memory a block: no module state, so "
             "calls on two streams cannot race (what simtlab.conv2d runs; a batch through the grid's z)",
             geometry_pipelined, min_cc=(8, 0), size_defaults=filter_arg_params, sass_expect=("LDGSTS", "LDS.128"),
             capabilities=frozenset({FILTER_ARGUMENT}), space=pipeline_space, traffic=pipelined_bytes,
             features=pipeline_features, builds_on=6),
    ),
    operators=OPERATORS,
    metric="gbs",
    check_size="333x517:r7",
)
