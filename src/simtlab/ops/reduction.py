"""fp32 reduction (sum or max) of n elements to one, with a float64 reference.

Rungs 1-8 produce one partial per block and are launched again on the partials
until a single value is left (the runner below); rung 9 finishes in one launch.
Rung 10 reduces many segments at once (the rows of a matrix, or chunks of one
long row): the public `simtlab.sum` and `simtlab.amax` over a dimension or all
of an array (fp32, bf16, fp16 storage) are declared on it below.
"""

from __future__ import annotations

import functools
import math
import sys
from dataclasses import dataclass

import numpy as np

from ..family import IN, OUT, SCRATCH, Declared, Family, Operator, Rung, Step, frozen
from ..launch import Launch, LaunchError
from ..space import Space
from ..verify import UNIT_ROUNDOFF
from .base import Reference, device_copy, parse_int
from .base import unsupported  # noqa: F401 (FamilyOps' default hook)

DTYPE = "float32"
OPS = {"sum": 0, "max": 1}


@dataclass(frozen=True)
class ReduceProblem:
    n: int
    op: str = "sum"
    dtype: str = DTYPE

    def __post_init__(self):
        if int(self.n) < 1:
            raise ValueError(f"reduction length must be >= 1, got {self.n}")
        if self.op not in OPS:
            raise ValueError(f"reduction op must be one of {', '.join(OPS)}, got {self.op!r}")

    @property
    def label(self) -> str:
        return f"{self.n}" + ("" if self.op == "sum" else f":{self.op}")

    @property
    def flops(self) -> int:
        return self.n

    @property
    def bytes(self) -> int:
        return 4 * self.n + 4


def parse_size(text: str, **_) -> ReduceProblem:
    """'n' (a sum) or 'n:max'."""
    size, _, op = str(text).partition(":")
    return ReduceProblem(parse_int(size, "reduction length"), op or "sum")


def tolerance(p: ReduceProblem, ws=None) -> float:
    """max is exact. A float32 sum's rounding errors behave like a random walk over the longest
    chain of dependent additions - a thread's sequential run (at most n/65536 elements with a
    grid of 65536 threads) plus the log2(n)-deep tree - scaled by sqrt(sum x^2) / |sum x|, the
    sum's conditioning; 8x margin. Without data (static use), a well-conditioned sum is assumed."""
    if p.op == "max":
        return 0.0
    chain = max(1.0, p.n / 65536) + math.log2(p.n) + 1
    cond = 1.0
    if ws is not None:
        x = ws.x.astype(np.float64)
        total = abs(float(x.sum()))
        cond = float(np.sqrt(float((x * x).sum()))) / total if total > 0 else float("inf")
    return 8 * UNIT_ROUNDOFF[p.dtype] * math.sqrt(chain) * cond


def operator_params(p: ReduceProblem, device=None, vec=None) -> dict:
    """The problem picks the operator template argument."""
    return {"OP": OPS[p.op]}


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _resident_blocks(block: int, device) -> int | None:
    return device.sms * (device.max_threads_per_sm // block) if device is not None else None


def _grid(kind: str, block: int, n: int, device) -> int:
    if kind == "one":  # one element per thread
        return _ceil(n, block)
    if kind == "two":  # two elements per thread
        return _ceil(n, 2 * block)
    per_thread = 4 if kind == "vec" else 1  # grid-stride: fill the GPU once
    needed = _ceil(_ceil(n, per_thread), block)
    cap = _resident_blocks(block, device)
    return max(1, min(needed, cap) if cap else needed)


# How a rung's first step takes its elements: one or two a thread (a block a tile), or a
# grid-stride loop over a grid that fills the GPU once ("stride"; "vec": four at a time).
ONE, TWO, STRIDE, VEC = "one", "two", "stride", "vec"
SINGLE_LAUNCH = "single_launch"  # rung capability: one launch, the last block to finish reduces the partials


def geometry(params, p: ReduceProblem, device=None, kind: str = ONE) -> Launch:
    """A launch over n elements, its blocks by the rung's kind of first step (the rung binds `kind`)."""
    return Launch((_grid(kind, params["BLOCK"], p.n, device), 1, 1), (params["BLOCK"], 1, 1))


def requested_bytes(params, p: ReduceProblem) -> int:
    return p.bytes


class Workspace:
    def __init__(self, p: ReduceProblem, seed: int):
        import cupy

        self.p = p
        self.x = cupy.random.default_rng(seed).random(p.n, dtype=cupy.float32) * 2 - 1
        partial = max(_ceil(p.n, 64), 1)  # room for the partials of any rung (blocks of >= 64 threads)
        self.partials = [cupy.empty(partial, dtype=cupy.float32) for _ in range(2)]
        self.ticket = cupy.zeros(1, dtype=cupy.uint32)
        self.out = cupy.empty(1, dtype=cupy.float32)

    def poison(self) -> None:
        self.out.fill(np.nan)
        for buf in self.partials:
            buf.fill(np.nan)

    def vec_ok(self) -> bool:
        return self.x.data.ptr % 16 == 0

    def expected(self):
        import cupy

        x = self.x.astype(cupy.float64)
        # max is IEEE maxNum, as fmaxf computes it: a NaN loses to any number (cupy.nanmax), while a
        # sum propagates NaN and Inf like any float sum.
        return (x.sum() if self.p.op == "sum" else cupy.nanmax(x)).reshape(1)

    def output(self):
        return self.out


def workspace(p: ReduceProblem, seed: int) -> Workspace:
    return Workspace(p, seed)


def plan_passes(rung: Rung, params, n: int, device=None) -> list[tuple[int, int]]:
    """(blocks, elements in) of each launch of a rung until one block is left (a single-launch
    rung: its one launch)."""
    def blocks(count: int) -> int:
        return rung.geometry(params, ReduceProblem(count), device).blocks

    if rung.can(SINGLE_LAUNCH):
        return [(blocks(n), n)]
    passes, count = [], n
    while True:
        grid = blocks(count)
        passes.append((grid, count))
        if grid == 1:
            return passes
        count = grid


def make_runner(inst, problem: ReduceProblem, ws: Workspace, device, vec, prepare):
    """Launch the rung until one value is left (rung 9: once; rung 10: chunks, then their partials)."""
    block = inst.params["BLOCK"]
    if inst.rung.can(SEGMENTS):
        seg = cut(1, problem.n, inst.params, device)
        func = prepare(inst, seg.launch, vec, device)
        steps = [(seg, ws.x, ws.out)]
        if seg.per_row > 1:
            if seg.count > ws.partials[0].size:
                raise LaunchError(f"{seg.count} partials do not fit the workspace")
            steps = [(seg, ws.x, ws.partials[0]), (seg.second, ws.partials[0], ws.out)]
        calls = [(s.launch.grid, s.launch.block, (src, dst, *s.args)) for s, src, dst in steps]

        def run_segments():
            for grid, blk, args in calls:
                func(grid, blk, args)

        return run_segments
    if inst.rung.can(SINGLE_LAUNCH):
        launch = inst.geometry(problem, device)
        if launch.blocks > ws.partials[0].size:
            raise LaunchError(f"{launch.blocks} partials do not fit the workspace")
        func = prepare(inst, launch, vec, device)
        args = (ws.x, ws.partials[0], ws.ticket, ws.out, np.int64(problem.n))

        def run_once():
            func(launch.grid, launch.block, args)

        return run_once
    first = inst.geometry(problem, device)
    func = prepare(inst, first, vec, device)
    passes, src = [], ws.x
    for k, (grid, count) in enumerate(plan_passes(inst.rung, inst.params, problem.n, device)):
        dst = ws.out if grid == 1 else ws.partials[k % 2]
        passes.append(((grid, 1, 1), (src, dst, np.int64(count))))
        src = dst

    def run():
        for grid, args in passes:
            func(grid, (block, 1, 1), args)

    return run


def _cupy(ws: Workspace):
    import cupy

    reduce = cupy.sum if ws.p.op == "sum" else cupy.max

    def run():
        reduce(ws.x, out=ws.out.reshape(()))

    return run


def _device_copy(ws: Workspace):
    return device_copy(2 * ws.p.n)  # moves 4n bytes: as many as the reduction reads


def references() -> list[Reference]:
    # CUB's reduction (through CuPy) is the bar: "% of reference" is against it; the copy shows the bandwidth.
    return [Reference("CuPy (CUB)", _cupy), Reference("device copy", _device_copy, verifiable=False)]


# --- rung 10: segments (rows, or chunks of a row) reduced in one launch ------------------------------

SEGMENTS = "segments"  # rung capability: many reductions in one launch (rung 10)
WARP_COLS = 4096  # rows up to this long: a warp each (up to 8 loads of 16 bytes a lane); longer: a block each
MIN_CHUNK = 8192  # where a row is cut across blocks, each takes at least this many elements
BLOCKS_PER_SM = 16  # blocks of 256 threads to aim for when few rows are cut into chunks: two waves


@dataclass(frozen=True)
class Segments:
    """How rung 10 walks `rows` rows of `cols`: each row cut into `per_row` chunks of `chunk`
    elements (the last one shorter), a segment a warp (warp_rows 1) or a block."""
    rows: int
    cols: int
    block: int
    warp_rows: int
    per_row: int
    chunk: int

    @property
    def count(self) -> int:
        return self.rows * self.per_row

    @property
    def launch(self) -> Launch:
        per_block = self.block // 32 if self.warp_rows else 1
        return Launch((max(1, min(_ceil(self.count, per_block), 2**31 - 1)), 1, 1), (self.block, 1, 1))

    @property
    def args(self) -> tuple:
        return (np.int64(self.count), np.int32(self.per_row), np.int64(self.chunk), np.int64(self.cols))

    @property
    def second(self) -> "Segments":
        """The launch that reduces the chunks' partials (fp32, `per_row` a row) to one value a row."""
        return Segments(self.rows, self.per_row, self.block, self.warp_rows, 1, self.per_row)


def segment_params(rows: int, cols: int) -> dict:
    """Rung 10's launch shape for rows of `cols`: a warp a row up to WARP_COLS, else a block."""
    return {"BLOCK": 256, "WARP_ROWS": int(cols <= WARP_COLS)}


def cut(rows: int, cols: int, params, device=None) -> Segments:
    """Rows of `cols` as rung 10 takes them: whole rows where there are enough of them to fill the
    GPU (or they are short), else each cut into chunks of at least MIN_CHUNK (16-element multiples,
    so every chunk starts aligned) until about BLOCKS_PER_SM blocks a multiprocessor have work."""
    block, warp_rows = params["BLOCK"], params["WARP_ROWS"]
    per_row = 1
    sms = device.sms if device is not None else 132
    want = sms * BLOCKS_PER_SM
    if not warp_rows and rows < want:
        per_row = max(1, min(_ceil(want, max(rows, 1)), cols // MIN_CHUNK))
    chunk = max(_ceil(_ceil(max(cols, 1), per_row), 16) * 16, 1) if per_row > 1 else max(cols, 1)
    return Segments(rows, cols, block, warp_rows, _ceil(max(cols, 1), chunk), chunk)


def geometry_segments(params, p: ReduceProblem, device=None) -> Launch:
    """The first launch over one row of n (the ladder's problem): chunks of it, a block each."""
    return cut(1, p.n, params, device).launch


def segment_defaults(p: ReduceProblem, device=None, vec=None) -> dict:
    return {**operator_params(p), **segment_params(1, p.n)}


# --- the public operators (simtlab.sum, simtlab.amax) ------------------------------------------------

ROW_TYPES = ("float32", "bfloat16", "float16")
DT = {"float32": 0, "bfloat16": 1, "float16": 2}
TORCH_OPS = {"sum": 0, "amax": 2}  # amax: OP 2, a NaN wins (torch.amax), where the ladder's max (fmaxf) drops it
ITEM = {"float32": 4, "bfloat16": 2, "float16": 2}


def _declare(op: str):
    """Each row of a (rows, cols) operand reduced to one value in its type by rung 10: one launch
    where the rows fill the GPU, else chunks to fp32 partials and a second launch over them."""
    def declare(shapes, dtype, options, device, vec, build) -> Declared:
        shape = shapes[0]
        if len(shape) != 2:
            raise ValueError(f"simtlab.{op}: the plan takes a (rows, cols) matrix, got shape {shape}")
        rows, cols = shape
        if op == "amax" and cols == 0:
            raise ValueError(f"simtlab.amax: a reduction over an empty dimension (x of shape {shape}) has no "
                             "identity; torch.amax refuses it too")
        rung = FAMILY.rung(10)
        base = {"OP": TORCH_OPS[op], **segment_params(rows, cols)}
        seg = cut(rows, cols, base, device)
        dt = DT[dtype]
        args = seg.args
        if seg.per_row == 1:
            params = rung.params(device.arch, {**base, "DT": dt, "ODT": dt})
            steps = (Step(rung, params, seg.launch, ((IN, 0), (OUT, 0), *args)),)
            scratch = ()
        else:
            first = rung.params(device.arch, {**base, "DT": dt, "ODT": 0})
            second = rung.params(device.arch, {**base, "DT": 0, "ODT": dt})
            two = seg.second
            steps = (Step(rung, first, seg.launch, ((IN, 0), (SCRATCH, 0), *args)),
                     Step(rung, second, two.launch, ((SCRATCH, 0), (OUT, 0), *two.args)))
            scratch = (((seg.count,), "float32"),)
        what = (f"{rows}x{cols} {dtype}: {rung.id} {'a warp' if seg.warp_rows else 'a block'} a "
                + ("row" if seg.per_row == 1 else f"chunk of {seg.chunk} ({seg.per_row} a row), then the partials"))
        return Declared((((rows,), dtype),), steps, what, scratch=scratch, vec=vec, align=4 * ITEM[dtype])

    return declare


OPERATORS = tuple(Operator(op, ("x",), ROW_TYPES, _declare(op)) for op in TORCH_OPS)


# --- the family: its rungs, one per kernel file -------------------------------------------------

def _reduction_rung(stage: int, name: str, kernel: str, lesson: str, kind: str, **kw) -> Rung:
    return Rung("reduction", stage, name, f"reduction/{stage:02d}_{name}.cu", kernel, ("BLOCK", "OP"),
                frozen({"BLOCK": 256, "OP": 0}), lesson, functools.partial(geometry, kind=kind),
                size_defaults=operator_params, tunable=("BLOCK",), space=block_space, **kw)


def block_space(max_smem: int) -> Space:
    """Every reduction rung's one knob: a power-of-two block (the tree halves it), 64 or more (the
    unrolled last warp reads 32 beyond the first 32)."""
    return Space({"BLOCK": (64, 128, 256, 512, 1024)})


FAMILY = Family(
    name="reduction",
    title="fp32 reduction to one value (sum, or max with n:max)",
    ops=sys.modules[__name__],
    reference="CuPy sum/max (CUB), and a device copy of the bytes read",
    default_sizes=("1073741824",),
    rungs=(
        _reduction_rung(1, "interleaved_divergent", "reduce_interleaved_divergent",
                        "tid % (2s) == 0: half the lanes of every warp idle through each step (divergence)",
                        ONE, sass_expect=("BAR",)),
        _reduction_rung(2, "interleaved_strided", "reduce_interleaved_strided",
                        "contiguous active threads (no divergence), but a 2s word stride: bank conflicts", ONE),
        _reduction_rung(3, "sequential", "reduce_sequential",
                        "s[tid] += s[tid + s]: no divergence, conflict-free; half the threads idle from step 1", ONE),
        _reduction_rung(4, "first_add_during_load", "reduce_first_add",
                        "two elements per thread added on the way in: no idle first step, half the blocks", TWO),
        _reduction_rung(5, "unrolled_last_warp", "reduce_unrolled_last_warp",
                        "the last six steps inside one warp with __syncwarp: six block barriers fewer", TWO),
        _reduction_rung(6, "completely_unrolled", "reduce_completely_unrolled",
                        "BLOCK as a template constant: every step unrolled, no loop control", TWO),
        _reduction_rung(7, "multiple_per_thread", "reduce_multiple_per_thread",
                        "grid-stride loop, many elements per thread in a register: few blocks, one tree each", STRIDE),
        _reduction_rung(8, "warp_shuffle", "reduce_warp_shuffle",
                        "__shfl_down_sync inside warps: one shared write per warp, one barrier per block",
                        STRIDE, sass_expect=("SHFL",)),
        _reduction_rung(9, "vectorized_single_pass", "reduce_vectorized_single_pass",
                        "LDG.128 loads and a last-block finish: one launch, deterministic order",
                        VEC, vec_variant=True, sass_expect=("SHFL", "LDG.128", "ATOMG"),
                        capabilities=frozenset({SINGLE_LAUNCH})),
        Rung("reduction", 10, "rows", "reduction/10_rows.cu", "reduce_rows",
             ("DT", "ODT", "BLOCK", "WARP_ROWS", "OP"), frozen({"DT": 0, "ODT": 0, "BLOCK": 256, "WARP_ROWS": 0, "OP": 0}),
             "many reductions in one launch (rows, or chunks of a row), four loads in flight a thread; the whole "
             "array as chunks then partials: no ticket, no atomics",
             geometry_segments, vec_variant=True, size_defaults=segment_defaults, sass_expect=("SHFL", "LDG.128"),
             capabilities=frozenset({SEGMENTS})),
    ),
    metric="gbs",
    operators=OPERATORS,
)
