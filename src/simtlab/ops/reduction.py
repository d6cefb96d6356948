"""fp32 reduction (sum or max) of n elements to one, with a float64 reference.

Rungs 1-8 produce one partial per block and are launched again on the partials
until a single value is left (the runner below); rung 9 finishes in one launch.
"""

from __future__ import annotations

import functools
import math
import sys
from dataclasses import dataclass

import numpy as np

from ..family import Family, Rung, frozen
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
    """Launch the rung until one value is left (rung 9: once)."""
    block = inst.params["BLOCK"]
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
    ),
    metric="gbs",
)
