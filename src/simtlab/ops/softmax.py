"""Row-wise softmax over the last dimension of a contiguous fp32, bf16 or fp16 matrix (fp32
arithmetic): y[r, c] = exp(x[r, c] - max_r) / sum_c' exp(x[r, c'] - max_r); and, on rung 5, the
operators built on the same row: log-softmax, y = x - max_r - log sum exp(x - max_r), and the two
backwards, dx = y (dy - <dy, y>) and dx = dy - exp(y) sum(dy) (y the forward's output)."""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass

import numpy as np

from ..family import IN, OUT, Declared, Family, Operator, Rung, Step, frozen
from ..launch import Launch
from ..verify import UNIT_ROUNDOFF, dot_tolerance
from . import cluster_rows
from .base import Reference
from .cluster_rows import (LONGEST_ROW, NoClusterFits, blocks_an_sm, check_split, cluster_vec, clusters_launch,
                           element_bytes, row_split, stage_count)
from .rows import (DT, DTYPE, MAX_REGISTER_ROW, STREAMED, RowProblem, dtype_params, forward_only, geometry_row,
                   geometry_rows, geometry_vectorized, load, matrix_of, poison_value, register_row_space, row_params,
                   row_references, store, torch_view, vec_ok)

__all__ = ["SoftmaxProblem", "parse_size", "tolerance", "dtype_params", "row_params", "geometry_row",
           "geometry_vectorized", "requested_bytes", "workspace", "make_runner", "references", "store", "load",
           "torch_view", "DT", "DTYPE", "MAX_REGISTER_ROW", "OPS", "ops_params", "geometry_rows", "unsupported",
           "cluster_params", "geometry_cluster", "cluster_launch", "CLUSTER_FROM"]


OPS = ("softmax", "log_softmax", "softmax_backward", "log_softmax_backward")
OP_CODE = {op: i for i, op in enumerate(OPS)}  # rung 5's OP template argument


@dataclass(frozen=True)
class SoftmaxProblem(RowProblem):
    what = "softmax"
    OPS = OPS
    STREAMS = {"softmax_backward": 3, "log_softmax_backward": 3}  # y and dy read, dx written

    @property
    def flops(self) -> int:
        return 5 * self.rows * self.cols  # nominal: compare, subtract, exponential, add, multiply


def unsupported(rung, p: SoftmaxProblem) -> str | None:
    """Rungs 1-4 compute softmax; rungs 5 and 6 every operator (rung 6: rows up to LONGEST_ROW)."""
    if rung.stage == 6 and p.cols > LONGEST_ROW:
        return f"rung 6 splits a row over at most a cluster of 8 blocks ({LONGEST_ROW} values), not {p.cols}"
    return None if rung.stage >= 5 else forward_only(rung, p)


# The longest rows rung 5 holds in registers without spilling (both VEC builds, sm_80 and sm_90; the
# compile tests hold every choice of ops_params to it): one stream (the forwards) at 1024 threads
# of 8 groups, two (the backwards) at 512; rows not in groups of four (VEC false) take more
# registers a value and stop at 256 threads of 8 groups.
REGISTER_ROW = {(1, True): 32768, (2, True): 16384, (1, False): 8192, (2, False): 8192}


def ops_params(p: SoftmaxProblem, device=None, vec=None) -> dict:
    """Rung 5's launch shape: rung 4's (a warp a row up to 1024 values, a block of 256 up to 8192,
    then of 1024 - of 512 for the two-stream backwards) while the row fits in registers, else a
    block of 512 streaming it (40-48 registers: three blocks a SM where 1024 threads fit one)."""
    dt, op = DT[p.dtype], OP_CODE[p.op]
    streams = 2 if p.backward else 1
    if p.cols > REGISTER_ROW[streams, vec is not False]:
        return {"DT": dt, "BLOCK": 512, "VPT": STREAMED, "WARP_ROWS": 0, "OP": op}
    if p.cols <= 1024:
        return {"DT": dt, "BLOCK": 128, "VPT": -(-p.cols // 128), "WARP_ROWS": 1, "OP": op}
    block = 256 if p.cols <= 8192 else 1024 // streams
    return {"DT": dt, "BLOCK": block, "VPT": -(-p.cols // (4 * block)), "WARP_ROWS": 0, "OP": op}




# The row length from which the operators take rung 6 (Hopper; rows in 16-byte pieces, up to
# LONGEST_ROW), set from the ladder's rungs 5 and 6 measured on one GPU at the operators' lengths
# (gpu_run phase softmax-cluster). None until that run: rung 6 is in the ladder, and the operators
# stay on rung 5, which is verified and timed on the device at every length.
CLUSTER_FROM: int | None = None


def _inputs(op: int) -> int:
    """Streams a row of OP reads: the forwards x, the backwards y and dy."""
    return 2 if op >= 2 else 1


def cluster_params(p: SoftmaxProblem, device=None, vec=None) -> dict:
    """Rung 6's shape: the shared row split (cluster_rows.row_split) and as many stages of the row's
    slices (2-4) as fit an SM."""
    block, vpt, cluster = row_split(p.cols, p.itemsize)
    op = OP_CODE[p.op]
    stage = _inputs(op) * 4 * vpt * block * p.itemsize
    return {"DT": DT[p.dtype], "BLOCK": block, "VPT": vpt, "CLUSTER": cluster,
            "STAGES": stage_count(stage, blocks_an_sm(vpt, block)), "OP": op}


def geometry_cluster(params, p: SoftmaxProblem, device=None) -> Launch:
    """Rung 6's launch: whole clusters of CLUSTER blocks, as many as the SMs hold (the runner and the
    operator ask the driver: cluster_launch), no more than the rows; the dynamic shared memory
    holds STAGES slices of the row (and of dy)."""
    block, vpt, cluster = params["BLOCK"], params["VPT"], params["CLUSTER"]
    check_split(block, vpt, cluster, p.cols)
    shared = params["STAGES"] * _inputs(params["OP"]) * 4 * vpt * block * element_bytes(params["DT"])
    return clusters_launch(block, vpt, cluster, p.rows, shared, device)


def cluster_launch(inst, p: SoftmaxProblem, device, vec: bool) -> Launch:
    """Rung 6's launch at as many clusters as the device runs at once (the driver's count)."""
    one = inst.geometry(p, device)
    size = inst.params["CLUSTER"]
    active = cluster_rows.clusters_that_fit(inst, one, vec, device, size)
    return Launch((min(p.rows, active) * size, 1, 1), one.block, one.shared)


def cluster_bytes(params, p: SoftmaxProblem) -> int:
    """Rung 6: every input stream read once, the output written."""
    return p.itemsize * p.rows * p.cols * (_inputs(OP_CODE[p.op]) + 1)


def parse_size(text: str, **_) -> SoftmaxProblem:
    """'ROWSxCOLS' (softmax along each row of COLS values), ':bf16' for bf16 storage."""
    return SoftmaxProblem.parse(text)


def tolerance(p: SoftmaxProblem, ws=None) -> float:
    """The row sum is a length-cols fp32 sum; __expf adds a few ulps per element on top; bf16
    storage rounds each output once more (relative 2^-9), which dominates."""
    fp32 = dot_tolerance("float32", p.cols) + 32 * UNIT_ROUNDOFF["float32"]
    return fp32 if p.dtype == "float32" else fp32 + 2 * UNIT_ROUNDOFF[p.dtype]


def requested_bytes(params, p: SoftmaxProblem, reads: int = 1) -> int:
    """x read `reads` times (once: the family's default; the rungs that read more say so), y written."""
    return p.itemsize * p.rows * p.cols * (reads + 1)


def ops_bytes(params, p: SoftmaxProblem) -> int:
    """Rung 5: each input stream read once from registers' rows, twice when streamed (the second
    pass mostly from L2), the output written."""
    inputs = p.streams - 1
    return p.itemsize * p.rows * p.cols * (inputs * (2 if params.get("VPT") == STREAMED else 1) + 1)


def _forward64(x, op: str):
    """softmax or log-softmax of float64 rows."""
    import cupy

    shifted = x - x.max(axis=1, keepdims=True)
    if op.startswith("log_softmax"):
        return shifted - cupy.log(cupy.exp(shifted).sum(axis=1, keepdims=True))
    e = cupy.exp(shifted)
    return e / e.sum(axis=1, keepdims=True)


class Workspace:
    """Forwards: x in [-8, 8), y. Backwards: y the stored forward of such an x, dy in [-1, 1), dx
    (in `y` - the output - with `x` holding the forward's y and `dy` the gradient)."""

    def __init__(self, p: SoftmaxProblem, seed: int):
        import cupy

        self.p = p
        rng = cupy.random.default_rng(seed)
        x = (rng.random((p.rows, p.cols), dtype=cupy.float32) * 2 - 1) * 8
        if p.backward:  # the forward's output (rounded to storage), the input the backward reads
            x = _forward64(load(store(x, p.dtype), p.dtype).astype(cupy.float64), p.op).astype(cupy.float32)
            self.dy = store(rng.random((p.rows, p.cols), dtype=cupy.float32) * 2 - 1, p.dtype)
        self.x = store(x, p.dtype)
        if not p.backward:
            self.dy = self.x  # (rung 5's second operand, unread by the forwards)
        self.y = cupy.empty_like(self.x)
        self.stats = cupy.empty(2 * p.rows, dtype=cupy.float32)  # rung 1: row maxima, then row sums

    def poison(self) -> None:
        self.y.fill(poison_value(self.p.dtype))

    def args(self) -> tuple:
        return (self.x, self.y, np.int32(self.p.rows), np.int32(self.p.cols))

    def vec_ok(self) -> bool:
        return vec_ok(self.p, self.x, self.dy, self.y)

    def expected(self):
        import cupy

        a = load(self.x, self.p.dtype).astype(cupy.float64)
        if not self.p.backward:
            return _forward64(a, self.p.op)
        g = load(self.dy, self.p.dtype).astype(cupy.float64)
        if self.p.op == "softmax_backward":
            return a * (g - (g * a).sum(axis=1, keepdims=True))
        return g - cupy.exp(a) * g.sum(axis=1, keepdims=True)

    def output(self):
        return load(self.y, self.p.dtype)


def workspace(p: SoftmaxProblem, seed: int) -> Workspace:
    return Workspace(p, seed)


def make_runner(inst, problem: SoftmaxProblem, ws: Workspace, device, vec, prepare):
    """Rung 1 is three launches of one kernel (phase 0, 1, 2); rungs 5 and 6 read two operands (the
    forwards' second unread; rung 6 at the driver's count of clusters); the others the default single
    launch (None)."""
    if inst.rung.stage >= 5:
        if inst.rung.stage == 6:
            vec = bool(vec) and cluster_vec(problem.cols, problem.itemsize)
            launch = cluster_launch(inst, problem, device, vec)
        else:
            launch = inst.geometry(problem, device)
        func = prepare(inst, launch, vec, device)
        args = (ws.x, ws.dy, ws.y, np.int32(problem.rows), np.int32(problem.cols))
        return lambda: func(launch.grid, launch.block, args, shared_mem=launch.shared)
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


def _torch(ws: Workspace):
    """The PyTorch call a user makes, or the one autograd makes for a backward (timed as called:
    16-bit in, 16-bit out; its values are checked in tests/test_gpu.py and tests/test_rows_api_gpu.py)."""
    import torch

    a, g = torch_view(ws.x, ws.p.dtype), torch_view(ws.dy, ws.p.dtype)
    op = {"softmax": lambda: torch.softmax(a, dim=-1), "log_softmax": lambda: torch.log_softmax(a, dim=-1),
          "softmax_backward": lambda: torch._softmax_backward_data(g, a, -1, a.dtype),
          "log_softmax_backward": lambda: torch._log_softmax_backward_data(g, a, -1, a.dtype)}
    return op[ws.p.op]


def references() -> list[Reference]:
    return row_references("PyTorch (the same operator)", _torch)


# --- the public operators (simtlab.softmax, simtlab.log_softmax and their backward) ---------------

def _declare(op: str):
    """What a call of `op` on rows of a shape runs: rung 6 on a GPU with clusters for rows of
    CLUSTER_FROM to LONGEST_ROW values in 16-byte pieces (once CLUSTER_FROM is measured); elsewhere
    rung 5 at ops_params' shape."""
    def declare(shapes, dtype, options, device, vec, build) -> Declared:
        names = ("y", "dy") if op.endswith("backward") else ("x",)
        rows, cols = matrix_of(names[0], shapes[0])
        if len(shapes) > 1 and shapes[1] != shapes[0]:
            raise ValueError(f"simtlab.{op}: dy has shape {shapes[1]} but y has {shapes[0]}")
        p = SoftmaxProblem(max(rows, 1), max(cols, 1), dtype, op)
        vec = vec and cols % 4 == 0
        launch, clustered = None, FAMILY.rung(6)
        if CLUSTER_FROM is not None and vec and cluster_vec(p.cols, p.itemsize) and \
                CLUSTER_FROM <= p.cols <= LONGEST_ROW and \
                clustered.supports(device.compute_capability):
            rung, align = clustered, 16
            params = rung.params(device.arch, cluster_params(p, device, vec))
            try:
                launch = cluster_launch(build(rung, params), p, device, vec)
            except NoClusterFits:  # (a GPU partition too small for the cluster: rung 5)
                launch = None
            shown = ("BLOCK", "VPT", "CLUSTER", "STAGES")
        if launch is None:
            rung, align = FAMILY.rung(5), 4 * p.itemsize
            params = rung.params(device.arch, ops_params(p, device, vec))
            launch, shown = geometry_rows(params, p, device), ("BLOCK", "VPT", "WARP_ROWS")
        second = (IN, 1) if len(shapes) > 1 else (IN, 0)  # (the forwards' second operand is unread)
        step = Step(rung, params, launch, ((IN, 0), second, (OUT, 0), np.int32(p.rows), np.int32(p.cols)))
        described = {k: params[k] for k in shown}
        return Declared(((shapes[0], dtype),), (step,), f"{p.label}: {rung.id} {described}", vec=vec, align=align)

    return declare


ROW_TYPES = ("float32", "bfloat16", "float16")
OPERATORS = tuple(Operator(op, ("y", "dy") if op.endswith("backward") else ("x",), ROW_TYPES, _declare(op))
                  for op in OPS)


# --- the family: its rungs, one per kernel file -------------------------------------------------

FAMILY = Family(
    name="softmax",
    title="row-wise softmax over the last dimension, fp32 or bf16 storage, fp32 math",
    ops=sys.modules[__name__],
    reference="device copy of the bytes the operator moves, PyTorch's same operator",
    default_sizes=("32768x4096",),
    rungs=(
        Rung("softmax", 1, "three_pass", "softmax/01_three_pass.cu", "softmax_three_pass", ("DT", "BLOCK"),
             frozen({"DT": 0, "BLOCK": 256}), "max, sum of exponentials, normalise: three launches, three reads of x",
             geometry_row, size_defaults=dtype_params, traffic=functools.partial(requested_bytes, reads=3)),
        Rung("softmax", 2, "fused", "softmax/02_fused.cu", "softmax_fused", ("DT", "BLOCK"),
             frozen({"DT": 0, "BLOCK": 256}), "one launch per matrix, shuffle reductions; rereads of a row hit L2",
             geometry_row, size_defaults=dtype_params, sass_expect=("SHFL",),
             traffic=functools.partial(requested_bytes, reads=3)),
        Rung("softmax", 3, "online", "softmax/03_online.cu", "softmax_online", ("DT", "BLOCK"),
             frozen({"DT": 0, "BLOCK": 256}), "running max and rescaled running sum: the statistics in one read",
             geometry_row, size_defaults=dtype_params, sass_expect=("SHFL",),
             traffic=functools.partial(requested_bytes, reads=2)),
        Rung("softmax", 4, "vectorized", "softmax/04_vectorized.cu", "softmax_vectorized",
             ("DT", "BLOCK", "VPT", "WARP_ROWS"), frozen({"DT": 0, "BLOCK": 1024, "VPT": 1, "WARP_ROWS": 0}),
             "the row held in registers (LDG.128), __expf, a warp or a block per row by length: one read, one write",
             geometry_vectorized, vec_variant=True, size_defaults=row_params,
             sass_expect=("LDG.128", "STG.128", "MUFU"), space=register_row_space),
        Rung("softmax", 5, "ops", "softmax/05_ops.cu", "softmax_ops", ("DT", "BLOCK", "VPT", "WARP_ROWS", "OP"),
             frozen({"DT": 0, "BLOCK": 1024, "VPT": 1, "WARP_ROWS": 0, "OP": 0}),
             "rung 4's row for every operator a model calls: log-softmax (no division, no log of a rounded "
             "probability) and both backwards (one reduction of two streams); rows past the registers streamed",
             geometry_rows, vec_variant=True, size_defaults=ops_params, sass_expect=("LDG.128", "STG.128", "MUFU"),
             traffic=ops_bytes),
        Rung("softmax", 6, "cluster_rows", "softmax/06_cluster_rows.cu", "softmax_cluster",
             ("DT", "BLOCK", "VPT", "CLUSTER", "STAGES", "OP"),
             frozen({"DT": 0, "BLOCK": 512, "VPT": 2, "CLUSTER": 1, "STAGES": 4, "OP": 0}),
             "every operator with each row's slices copied in by the copy engine STAGES rows ahead and long rows "
             "split over a cluster's blocks: one merge of (max, sum) pairs a row, every row read once",
             geometry_cluster, vec_variant=True, min_cc=(9, 0), size_defaults=cluster_params,
             sass_expect=("SHFL", "MUFU"), traffic=cluster_bytes),
    ),
    metric="gbs",
    check_size="333x517",
    operators=OPERATORS,
)
