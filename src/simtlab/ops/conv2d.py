"""Single-channel 2D image filter (correlation, as cuDNN and scipy.ndimage.correlate compute it),
fp32, "same" output size with zeros outside the image, filter radius 1-7:
out[y, x] = sum over dy, dx in [-R, R] of in[y + dy, x + dx] * filt[dy + R, dx + R]."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..launch import Launch, grid2
from ..verify import dot_tolerance
from .base import Reference, device_copy, parse_int, torch_reference
from .tma import TMA_SWIZZLE_NONE, TmaBox, encode_tensor_map

DTYPE = "float32"
MAX_RADIUS = 7  # the kernels' __constant__ filter holds 15 x 15 taps
CONSTANT_FILTER = ("constant", "smem_tile", "register_x", "register_xy", "pipelined", "tma")  # rungs that read c_filter
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


def requested_bytes(rung_name: str, params, p: ConvProblem) -> int:
    """Global bytes the threads ask for (caches aside): per-pixel rungs read every tap's input (and,
    in rung 1, every tap's filter value); tiled rungs read each block's haloed tile once."""
    out = 4 * p.H * p.W
    if rung_name == "naive":
        return 8 * p.taps * p.H * p.W + out
    if rung_name == "constant":
        return 4 * p.taps * p.H * p.W + out
    bx, by, r = params["BX"], params["BY"], p.R
    rows = by * params.get("TY", 1)
    if rung_name in ("pipelined", "tma"):
        th, tw = pipelined_tile(params, r)
        return 4 * -(-p.W // (bx * params["TX"])) * -(-p.H // rows) * th * tw + out
    if rung_name in ("register_x", "register_xy"):
        nc = (TX + 2 * r + 3) // 4
        tw, cols = bx * TX + 4 * nc, bx * TX
    else:
        tw, cols = bx + 2 * r, bx
    tiles = -(-p.W // cols) * -(-p.H // rows)
    return 4 * tiles * tw * (rows + 2 * r) + out


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
    without the filter argument (rung 7 takes a tensor map of the image instead of its pointer).
    Rung 1 is the default single launch (None)."""
    import cupy

    if inst.rung.name not in CONSTANT_FILTER:
        return None
    p = problem
    launch = inst.geometry(p, device)
    func = prepare(inst, launch, vec, device)
    symbol = inst.module().get_global("c_filter")
    cupy.ndarray(((2 * MAX_RADIUS + 1) ** 2,), cupy.float32, memptr=symbol)[: p.taps] = ws.filt.ravel()
    args = (ws.img, ws.out, np.int32(p.H), np.int32(p.W))
    if inst.rung.name == "constant":
        args += (np.int32(p.R),)
    padded = None
    if inst.rung.name == "tma":  # a tensor map over the image (rows padded to 16 bytes on a copy)
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
