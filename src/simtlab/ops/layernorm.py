"""LayerNorm over the last dimension of a contiguous fp32, bf16 or fp16 matrix, with weight and
bias of the row's length in the same storage type (fp32 arithmetic):
y[r, c] = (x[r, c] - mean_r) / sqrt(var_r + eps) * w[c] + b[c], var the biased (population) variance;
and the operators built on its rows: RMSNorm, y = x w / sqrt(mean_r(x^2) + eps) (rung 4), and
both backwards, dx with dw (and db) (rung 5)."""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass

import numpy as np

from ..family import CONST, IN, OUT, SCRATCH, Declared, Family, Operator, Rung, Step, frozen
from ..verify import UNIT_ROUNDOFF, dot_tolerance
from ..launch import Launch
from . import cluster_rows
from .base import Reference, sm_count
from .cluster_rows import (CLUSTER_MAX, NoClusterFits, blocks_an_sm, check_split, cluster_vec, clusters_launch,
                           element_bytes, LONGEST_ROW, row_split, stage_count)
from .rows import (DT, DTYPE, MAX_REGISTER_ROW, STREAMED, RowProblem, dtype_params, geometry_row, geometry_rows,
                   geometry_vectorized, load, matrix_of, poison_value, register_row_space, row_references, store,
                   torch_view, vec_ok, vector_of)
from .rows import row_params as _row_params

__all__ = ["LayerNormProblem", "parse_size", "tolerance", "dtype_params", "row_params", "geometry_row",
           "geometry_vectorized", "requested_bytes", "workspace", "references", "EPS", "DT", "DTYPE"]

EPS = 1e-5  # PyTorch's default


OPS = ("layer_norm", "rms_norm", "layer_norm_backward", "rms_norm_backward")
VECTORS = {"layer_norm": 2, "rms_norm": 1, "layer_norm_backward": 3, "rms_norm_backward": 2}  # w, b, dw, db


@dataclass(frozen=True)
class LayerNormProblem(RowProblem):
    what = "layernorm"
    OPS = OPS
    STREAMS = {"layer_norm_backward": 3, "rms_norm_backward": 3}  # x and dy read, dx written

    @property
    def rms(self) -> bool:
        return self.op.startswith("rms")

    @property
    def flops(self) -> int:
        return 8 * self.rows * self.cols  # nominal: sum, deviation, square-add, normalise, scale, shift

    @property
    def bytes(self) -> int:
        """The row streams once each, and the row-length vectors (weight, bias; their gradients) once."""
        return self.itemsize * (self.streams * self.rows * self.cols + VECTORS[self.op] * self.cols)


RUNG_OPS = {1: "layer_norm", 2: "layer_norm", 3: "layer_norm", 4: "rms_norm"}  # (rungs 5-6: the backwards)


def unsupported(rung, p: LayerNormProblem) -> str | None:
    """Rungs 1-3 compute LayerNorm, rung 4 RMSNorm, rungs 5 and 6 the two backwards (rung 6: rows
    of up to CLUSTER_MAX blocks of 8192 values)."""
    if rung.stage == 6 and p.cols > LONGEST_ROW:
        return f"rung 6 splits a row over at most {CLUSTER_MAX} blocks of 8192 values ({LONGEST_ROW}), not {p.cols}"
    takes = RUNG_OPS.get(rung.stage)
    if takes is not None and p.op != takes:
        return f"rung {rung.stage} computes {takes} (size suffix :{takes}); {p.op} runs on rung {_rung_for(p.op)}"
    if takes is None and not p.backward:
        return (f"rung {rung.stage} computes the backwards (size suffix :layer_norm_backward or :rms_norm_backward); "
                f"{p.op} runs on rung {_rung_for(p.op)}")
    return None


def _rung_for(op: str) -> str:
    return "6 (on Hopper; 5 before)" if op.endswith("_backward") else "4" if op == "rms_norm" else "3"


def row_params(p: LayerNormProblem, device=None, vec=None) -> dict:
    """The register-row launch shape, plus EARLY (weight and bias loaded before the reduction) for
    fp32 rows of at most 4 groups per thread (beyond, their registers would cap a 1024-thread block).
    bf16 rows longer than a warp's take 8 groups per thread in a smaller block, weight and bias
    late: at 32768x4096 that measured 68.7% of the copy against 53.5% for fp32's shape and 50.0%
    with EARLY (benchmarks/results/2026-12-02_h200_43e8ab/layernorm_sweep.json)."""
    q = _row_params(p, device, vec)
    if p.itemsize == 2 and not q["WARP_ROWS"]:  # (fp16 as bf16: at fp32's shape ptxas spills fp16 builds)
        block = min(1024, max(128, -(-p.cols // (8 * 4 * 32)) * 32))
        return {**q, "BLOCK": block, "VPT": -(-p.cols // (4 * block)), "EARLY": 0}
    return {**q, "EARLY": int(q["VPT"] <= 4 and p.dtype == "float32")}


def rms_params(p: LayerNormProblem, device=None, vec=None) -> dict:
    """Rung 4: the register-row launch shape (rung 4 has no EARLY) up to 32768 values a row (8192
    for rows not in groups of four, whose longer rows spill), then a block of 512 streaming it."""
    if p.cols > (MAX_REGISTER_ROW if vec is not False else 8192):
        return {"DT": DT[p.dtype], "BLOCK": 512, "VPT": STREAMED, "WARP_ROWS": 0}
    return _row_params(p, device, vec)


def parse_size(text: str, **_) -> LayerNormProblem:
    """'ROWSxCOLS' (normalise each row of COLS values), ':bf16' for bf16 storage."""
    return LayerNormProblem.parse(text)


def tolerance(p: LayerNormProblem, ws=None) -> float:
    """Mean and variance are length-cols fp32 sums (a backward's dw and db length-rows ones too);
    16-bit storage rounds each output once more. A backward's dx = r (g - mean(g) - xhat mean(g
    xhat)) cancels: its fp32 error scales with ||r |g| || / ||dx|| (the workspace's data: about 1 for
    wide rows, large where a row of one value leaves dx near zero)."""
    length = max(p.cols, p.rows) if p.backward else p.cols
    fp32 = 2 * dot_tolerance("float32", length) + 32 * UNIT_ROUNDOFF["float32"]
    if p.backward and ws is not None:
        fp32 *= max(1.0, ws.dx_condition())
    return fp32 if p.dtype == "float32" else fp32 + 2 * UNIT_ROUNDOFF[p.dtype]


def requested_bytes(params, p: LayerNormProblem, reads: int = 1) -> int:
    """x read `reads` times (once: the family's default; the rung that reads more says so), y
    written, the weight and bias read."""
    return p.itemsize * (p.rows * p.cols * (reads + 1) + 2 * p.cols)


def rms_bytes(params, p: LayerNormProblem) -> int:
    """Rung 4: x read (twice when streamed), y written, the weight read."""
    return p.bytes + (p.itemsize * p.rows * p.cols if params.get("VPT") == STREAMED else 0)




def backward_bytes(params, p: LayerNormProblem) -> int:
    """Rung 5: x and dy read, dx written, w read a row (from L1); long rows (streamed) read x and dy
    twice (the statistics, then dx) and pass 16 bytes of statistics a row; the partial rows written
    and read back in fp32."""
    params = {**backward_params(p), **params}  # (counted at the problem's own shape where none is given)
    streamed = params["VPT"] == STREAMED
    rows_bytes = p.itemsize * p.rows * p.cols * (5 if streamed else 3) + (2 * 16 * p.rows if streamed else 0)
    parts = backward_parts(params, p)
    return rows_bytes + p.itemsize * p.cols * (1 + VECTORS[p.op]) + 2 * 4 * parts * p.cols * (1 if p.rms else 2)


def backward_params(p: LayerNormProblem, device=None, vec=None) -> dict:
    """Rung 5's launch shape: a warp a row up to 1024 values, a block of 256 up to 8192 (fp32
    LayerNorm rows not in groups of four: up to 6144, past which they spill), with x, dy and the
    column sums in registers; longer rows streamed (blocks of 512: a row's statistics, then 2048
    columns a block down a slice of the rows). Measured spill-free on sm_80 and sm_90 for every
    choice (tests/test_compile.py)."""
    dt, rms = DT[p.dtype], int(p.rms)
    if p.cols <= 1024:
        return {"DT": dt, "BLOCK": 128, "VPT": -(-p.cols // 128), "WARP_ROWS": 1, "RMS": rms}
    vpt = -(-p.cols // 1024)
    limit = 6 if vec is False and p.dtype == "float32" and not p.rms else 8
    if vpt <= limit:
        return {"DT": dt, "BLOCK": 256, "VPT": vpt, "WARP_ROWS": 0, "RMS": rms}
    return {"DT": dt, "BLOCK": 512, "VPT": STREAMED, "WARP_ROWS": 0, "RMS": rms}


def _slots(params) -> int:
    return params["BLOCK"] // 32 if params["WARP_ROWS"] else 1


def _column_blocks(params, p: LayerNormProblem) -> int:
    return -(-p.cols // (4 * params["BLOCK"]))


def backward_blocks(params, p: LayerNormProblem, sms: int, per_sm: int = 1) -> int:
    """Rung 5's persistent grid: as many blocks as run at once (`per_sm` a SM, from the build's
    occupancy), no more than the rows need - each block one partial row of the column sums.
    Streamed rows: the row slices of a grid of column blocks x slices that fills the device once."""
    if params["VPT"] == STREAMED:
        return max(1, min(p.rows, -(-sms * max(1, per_sm) // _column_blocks(params, p))))
    return max(1, min(-(-p.rows // _slots(params)), sms * max(1, per_sm)))


def backward_parts(params, p: LayerNormProblem, sms: int | None = None) -> int:
    """Partial rows rung 5 writes (its grid at one block a SM where the occupancy is not known)."""
    return backward_blocks(params, p, sms or sm_count(None))


def geometry_backward(params, p: LayerNormProblem, device=None) -> Launch:
    """Rung 5's rows launch at one block a SM (the runner and the operator widen it to the build's
    occupancy): the persistent grid, or (streamed) column blocks x row slices; a streamed row's
    statistics come before it (statistics_launch), the column sums after (column_sums_launch)."""
    if params["VPT"] == STREAMED and params["WARP_ROWS"]:
        raise ValueError("streamed rows (VPT 0) take a block each: WARP_ROWS 0")
    parts = backward_blocks(params, p, sm_count(device))
    if params["VPT"] == STREAMED:
        return Launch((_column_blocks(params, p), parts, 1), (params["BLOCK"], 1, 1))
    lanes = 32 if params["WARP_ROWS"] else params["BLOCK"]
    if lanes * 4 * params["VPT"] < p.cols:
        raise ValueError(f"{lanes} lanes a row x {params['VPT']} groups of 4 hold {lanes * 4 * params['VPT']} "
                         f"values, not a {p.cols}-value row: more VPT, or VPT 0 (streamed)")
    return Launch((parts, 1, 1), (params["BLOCK"], 1, 1))


def statistics_launch(params, p: LayerNormProblem) -> Launch:
    return Launch((p.rows, 1, 1), (params["BLOCK"], 1, 1))


def column_sums_launch(params, p: LayerNormProblem) -> Launch:
    return Launch((-(-p.cols // 32), 1, 1), (params["BLOCK"], 1, 1))


class Workspace:
    """x: rows with an offset larger than their spread (E[x^2] - E[x]^2 would cancel badly here),
    w in [0.5, 1.5), b in [-0.5, 0.5); a backward's dy in [-1, 1). The forwards write y; the
    backwards dx, dw and db, compared as one vector of the three, each scaled by its reference's
    norm (a wrong dw is not hidden behind a large dx)."""

    def __init__(self, p: LayerNormProblem, seed: int):
        import cupy

        self.p = p
        rng = cupy.random.default_rng(seed)
        x = rng.random((p.rows, p.cols), dtype=cupy.float32) * 4 - 2 + rng.random((p.rows, 1), dtype=cupy.float32) * 8
        self.x = store(x, p.dtype)
        self.w = store(rng.random(p.cols, dtype=cupy.float32) + 0.5, p.dtype)
        self.b = store(rng.random(p.cols, dtype=cupy.float32) - 0.5, p.dtype)
        self.y = cupy.empty_like(self.x)  # (a backward's dx)
        if p.backward:
            self.dy = store(rng.random((p.rows, p.cols), dtype=cupy.float32) * 2 - 1, p.dtype)
            self.dw, self.db = cupy.empty_like(self.w), cupy.empty_like(self.b)
        self._norms = None

    def poison(self) -> None:
        for a in (self.y, self.dw, self.db) if self.p.backward else (self.y,):
            a.fill(poison_value(self.p.dtype))

    def args(self) -> tuple:
        p = self.p
        return (self.x, self.w, self.b, self.y, np.int32(p.rows), np.int32(p.cols), np.float32(EPS))

    def vec_ok(self) -> bool:
        return vec_ok(self.p, self.x, self.w, self.b, self.y, *((self.dy,) if self.p.backward else ()))

    def _reference(self):
        """float64: y, or (dx, dw, db)."""
        import cupy

        p, dt = self.p, self.p.dtype
        x = load(self.x, dt).astype(cupy.float64)
        w, b = (load(a, dt).astype(cupy.float64) for a in (self.w, self.b))
        if p.rms:
            mean = 0.0
            rstd = 1 / cupy.sqrt((x * x).mean(axis=1, keepdims=True) + EPS)
        else:
            mean = x.mean(axis=1, keepdims=True)
            rstd = 1 / cupy.sqrt(((x - mean) ** 2).mean(axis=1, keepdims=True) + EPS)
        xhat = (x - mean) * rstd
        if not p.backward:
            return xhat * w if p.rms else xhat * w + b
        dy = load(self.dy, dt).astype(cupy.float64)
        g = dy * w
        dx = rstd * (g - (0.0 if p.rms else g.mean(axis=1, keepdims=True)) - xhat * (g * xhat).mean(axis=1, keepdims=True))
        self._dx_terms = float(cupy.linalg.norm(rstd * abs(g)))
        return dx, (dy * xhat).sum(axis=0), dy.sum(axis=0)

    def dx_condition(self) -> float:
        """||r |g| || / ||dx||: how much dx's terms cancel (a backward's data)."""
        import cupy

        dx = self._reference()[0]
        return self._dx_terms / max(float(cupy.linalg.norm(dx)), 1e-300)

    def _joined(self, parts):
        """A backward's outputs as one vector, each part scaled by its reference's norm."""
        import cupy

        return cupy.concatenate([part.ravel() / n for part, n in zip(parts, self._norms)])

    def expected(self):
        import cupy

        ref = self._reference()
        if not self.p.backward:
            return ref
        parts = ref[:2] if self.p.rms else ref
        self._norms = [max(float(cupy.linalg.norm(part)), 1e-30) for part in parts]
        return self._joined(parts)

    def output(self):
        dt = self.p.dtype
        if not self.p.backward:
            return load(self.y, dt)
        if self._norms is None:
            self.expected()
        parts = (self.y, self.dw) if self.p.rms else (self.y, self.dw, self.db)
        return self._joined([load(a, dt).astype("float64") for a in parts])


def workspace(p: LayerNormProblem, seed: int) -> Workspace:
    return Workspace(p, seed)


def make_runner(inst, problem: LayerNormProblem, ws: Workspace, device, vec, prepare):
    """Rung 4 reads no bias; rungs 5 and 6 are two or three launches of their kernel
    (backward_launches, cluster_launches), their partial rows (and rung 5's statistics) made here,
    outside the timed call; rungs 1-3 the default single launch (None)."""
    import cupy

    p = problem
    rows, cols, eps = np.int32(p.rows), np.int32(p.cols), np.float32(EPS)
    if inst.rung.stage == 4:
        launch = inst.geometry(p, device)
        func = prepare(inst, launch, vec, device)
        args = (ws.x, ws.w, ws.y, rows, cols, eps)
        return lambda: func(launch.grid, launch.block, args, shared_mem=launch.shared)
    if inst.rung.stage == 6:  # (rung 6 takes no statistics: its rows are read once)
        vec = bool(vec) and cluster_vec(p.cols, p.itemsize)
        launches, parts = cluster_launches(inst, p, device, vec)
        stats = ()
    elif inst.rung.stage == 5:
        launches, parts = backward_launches(inst, p, device, vec)
        stats = (cupy.empty((p.rows, 4), dtype=cupy.float32),)
    else:
        return None
    func = prepare(inst, launches[0][1], vec, device)
    partial_w, partial_b = (cupy.empty((parts, p.cols), dtype=cupy.float32) for _ in range(2))
    common = (ws.x, ws.w, ws.dy, ws.y, partial_w, partial_b, *stats, rows, cols, eps, np.int32(parts), ws.dw, ws.db)

    def run():
        for phase, launch in launches:
            func(launch.grid, launch.block, (*common, np.int32(phase)), shared_mem=launch.shared)

    return run


def backward_launches(inst, p: LayerNormProblem, device, vec) -> tuple[tuple, int]:
    """Rung 5's launches as (phase, launch) in order, and the partial rows they write: the rows at
    as many blocks as the build runs at once on the device (its occupancy) - streamed rows after
    their statistics (phase 2) - then the column sums of the partial rows (phase 1)."""
    one = inst.geometry(p, device)
    per_sm = inst.occupancy(one, vec).blocks_per_sm
    parts = backward_blocks(inst.params, p, sm_count(device), per_sm)
    sums = (1, column_sums_launch(inst.params, p))
    if inst.params["VPT"] == STREAMED:
        walk = Launch((one.grid[0], parts, 1), one.block)
        return ((2, statistics_launch(inst.params, p)), (0, walk), sums), parts
    return ((0, Launch((parts, 1, 1), one.block)), sums), parts


def cluster_params(p: LayerNormProblem, device=None, vec=None) -> dict:
    """Rung 6's shape: the shared row split (cluster_rows.row_split). Rows one block takes go in
    clusters of teams spanning at most two SMs (one partial row a cluster; a GPC whose SMs a cluster
    does not divide then leaves at most one idle). STAGES: as many row slices (2-4) as fit an SM
    beside the w slice (fp32 rows get 2 at 1024 threads)."""
    block, vpt, cluster = row_split(p.cols, p.itemsize)
    per_sm = blocks_an_sm(vpt, block)
    stage = 2 * 4 * vpt * block * p.itemsize  # (and one more half stage: the block's slice of w)
    group = min(CLUSTER_MAX, 2 * per_sm) if cluster == 1 else 1
    return {"DT": DT[p.dtype], "BLOCK": block, "VPT": vpt, "CLUSTER": cluster, "GROUP": group,
            "STAGES": stage_count(stage, per_sm, stage // 2), "RMS": int(p.rms)}


def geometry_cluster(params, p: LayerNormProblem, device=None) -> Launch:
    """Rung 6's rows launch: whole clusters of CLUSTER x GROUP blocks, as many as 1024 threads an SM
    make (512 at VPT 4; the runner and the operator ask the driver how many run at once), no more than the rows
    need; the dynamic shared memory holds STAGES slices of x and dy, and the block's slice of w."""
    block, cluster, group, vpt = params["BLOCK"], params["CLUSTER"], params["GROUP"], params["VPT"]
    if cluster > 1 and group > 1:
        raise ValueError("a cluster splits rows (CLUSTER > 1) or holds teams of whole rows (GROUP > 1), not both")
    check_split(block, vpt, cluster, p.cols, group)
    shared = (params["STAGES"] * 2 + 1) * 4 * vpt * block * element_bytes(params["DT"])
    return clusters_launch(block, vpt, cluster * group, -(-p.rows // group), shared, device)


def cluster_launches(inst, p: LayerNormProblem, device, vec: bool) -> tuple[tuple, int]:
    """Rung 6's launches as (phase, launch) - the rows at as many clusters as the device runs at once,
    then the column sums of their partial rows, a grid of whole clusters - and the partial rows (one
    a cluster)."""
    one = inst.geometry(p, device)
    size = inst.params["CLUSTER"] * inst.params["GROUP"]
    active = cluster_rows.clusters_that_fit(inst, one, vec, device, size)
    clusters = max(1, min(-(-p.rows // inst.params["GROUP"]), active))
    sums = Launch((-(-p.cols // (32 * size)) * size, 1, 1), (min(one.block[0], 256), 1, 1))
    return ((0, Launch((clusters * size, 1, 1), one.block, one.shared)), (1, sums)), clusters


def cluster_bytes(params, p: LayerNormProblem) -> int:
    """Rung 6: x and dy read once, dx written, w read; the partial rows (one a cluster) written and
    read back in fp32."""
    params = {**cluster_params(p), **params}
    launch = geometry_cluster(params, p)
    parts = launch.grid[0] // (params["CLUSTER"] * params["GROUP"])
    rows_bytes = p.itemsize * p.rows * p.cols * 3
    return rows_bytes + p.itemsize * p.cols * (1 + VECTORS[p.op]) + 2 * 4 * parts * p.cols * (1 if p.rms else 2)


def _torch(ws: Workspace):
    """The PyTorch call a user makes, or the backward autograd runs (aten's layer-norm backward
    from the forward's saved statistics; RMSNorm's backward through autograd), timed as called."""
    import torch
    import torch.nn.functional as F

    p, dt = ws.p, ws.p.dtype
    x, w, b = (torch_view(a, dt) for a in (ws.x, ws.w, ws.b))
    shape = (p.cols,)
    if p.op == "layer_norm":
        return lambda: F.layer_norm(x, shape, w, b, EPS)
    if p.op == "rms_norm":
        return lambda: F.rms_norm(x, shape, w, EPS)
    dy = torch_view(ws.dy, dt)
    if p.op == "layer_norm_backward":
        _, mean, rstd = torch.ops.aten.native_layer_norm(x, shape, w, b, EPS)
        return lambda: torch.ops.aten.native_layer_norm_backward(dy, x, shape, mean, rstd, w, b, [True, True, True])
    xg, wg = x.detach().requires_grad_(), w.detach().requires_grad_()
    y = F.rms_norm(xg, shape, wg, EPS)
    return lambda: torch.autograd.grad(y, (xg, wg), dy, retain_graph=True)


def references() -> list[Reference]:
    return row_references("PyTorch (the same operator)", _torch)


# --- the public operators (simtlab.layer_norm, simtlab.rms_norm and their backward) ---------------

ROW_TYPES = ("float32", "bfloat16", "float16")
ONES, ZEROS = 1.0, 0.0


def _vectors(op: str, names: tuple[str, ...], shapes, cols: int, dtype: str):
    """The slot of each per-column operand: the caller's, or a constant (ones for an absent weight,
    zeros for an absent bias) made once per plan; and those constants."""
    slots, constants = [], []
    for i, name in enumerate(names, start=1):
        vector_of(op, name, shapes[i], cols)
        if shapes[i] is not None:
            slots.append((IN, i))
        else:
            slots.append((CONST, len(constants)))
            constants.append(((cols,), dtype, ONES if name == "weight" else ZEROS))
    return slots, tuple(constants)


def _declare_forward(op: str):
    """layer_norm: rung 3 at its launch shape for the row length (rung 1, a block a row reading it
    three times, past the 32768 values rung 3 holds in registers); rms_norm: rung 4."""
    def declare(shapes, dtype, options, device, vec, build) -> Declared:
        rows, cols = matrix_of("x", shapes[0])
        p = LayerNormProblem(max(rows, 1), max(cols, 1), dtype, op)
        vec = vec and cols % 4 == 0
        names = ("weight",) if p.rms else ("weight", "bias")
        slots, constants = _vectors(op, names, shapes, p.cols, dtype)
        eps = np.float32(options.get("eps", EPS))
        if p.rms:
            rung = FAMILY.rung(4)
            params = rung.params(device.arch, rms_params(p, device, vec))
        elif p.cols <= MAX_REGISTER_ROW:
            rung = FAMILY.rung(3)
            params = rung.params(device.arch, row_params(p, device, vec))
        else:
            rung = FAMILY.rung(1)
            params = rung.params(device.arch, dtype_params(p))
        step = Step(rung, params, rung.geometry(params, p, device),
                    ((IN, 0), *slots, (OUT, 0), np.int32(p.rows), np.int32(p.cols), eps))
        shown = {k: v for k, v in params.items() if k != "DT"}
        return Declared(((shapes[0], dtype),), (step,), f"{p.label}: {rung.id} {shown}", constants=constants,
                        vec=vec, align=4 * p.itemsize)

    return declare


def _declare_backward(op: str):
    """Rung 6 where the GPU has clusters and rows come in 16-byte pieces (up to CLUSTER_MAX x 8192
    values): dx and a partial row of the column sums a cluster, then the column sums. Elsewhere rung
    5: dx and the partial rows at as many blocks as the build runs at once (rows too long for
    registers: after their statistics), then the column sums (dw; db for LayerNorm)."""
    def declare(shapes, dtype, options, device, vec, build) -> Declared:
        rows, cols = matrix_of("x", shapes[0])
        if shapes[2] != shapes[0]:
            raise ValueError(f"simtlab.{op}: dy has shape {shapes[2]} but x has {shapes[0]}")
        p = LayerNormProblem(max(rows, 1), max(cols, 1), dtype, op)
        vec = vec and cols % 4 == 0
        vector_of(op, "weight", shapes[1], p.cols)
        w = (IN, 1) if shapes[1] is not None else (CONST, 0)
        constants = () if shapes[1] is not None else (((p.cols,), dtype, ONES),)
        clustered, launches = FAMILY.rung(6), None
        if vec and cluster_vec(p.cols, p.itemsize) and clustered.supports(device.compute_capability) and \
                unsupported(clustered, p) is None:
            rung, align = clustered, 16
            params = rung.params(device.arch, cluster_params(p, device, vec))
            try:
                launches, parts = cluster_launches(build(rung, params), p, device, vec)
            except NoClusterFits:  # (a GPU partition too small for the cluster: rung 5)
                launches = None
            stats_scratch, shown = (), ("BLOCK", "VPT", "CLUSTER", "GROUP", "STAGES")
        if launches is None:
            rung, align = FAMILY.rung(5), 4 * p.itemsize
            params = rung.params(device.arch, backward_params(p, device, vec))
            launches, parts = backward_launches(build(rung, params), p, device, vec)
            streamed = params["VPT"] == STREAMED
            stats_scratch = (((p.rows, 4), "float32"),) if streamed else ()  # (a streamed row's statistics)
            shown = ("BLOCK", "VPT", "WARP_ROWS")
        scratch = (((parts, p.cols), "float32"),) * (1 if p.rms else 2) + stats_scratch
        outputs = ((shapes[0], dtype), ((p.cols,), dtype)) + (() if p.rms else (((p.cols,), dtype),))
        partial_b, db = ((SCRATCH, 0), (OUT, 1)) if p.rms else ((SCRATCH, 1), (OUT, 2))  # (RMSNorm: unread)
        head = ((IN, 0), w, (IN, 2), (OUT, 0), (SCRATCH, 0), partial_b)
        tail = (np.int32(p.rows), np.int32(p.cols), np.float32(options.get("eps", EPS)), np.int32(parts), (OUT, 1), db)
        if rung.stage == 5:  # (its statistics' slot; rows in registers: unread)
            head += ((SCRATCH, len(scratch) - 1),)
        steps = tuple(Step(rung, params, launch, (*head, *tail, np.int32(phase))) for phase, launch in launches)
        described = {k: params[k] for k in shown}
        return Declared(outputs, steps, f"{p.label}: {rung.id} {described}, {parts} partial rows", scratch=scratch,
                        constants=constants, vec=vec, align=align)

    return declare


OPERATORS = (
    Operator("layer_norm", ("x", "weight", "bias"), ROW_TYPES, _declare_forward("layer_norm"),
             frozenset({"weight", "bias"})),
    Operator("rms_norm", ("x", "weight"), ROW_TYPES, _declare_forward("rms_norm"), frozenset({"weight"})),
    Operator("layer_norm_backward", ("x", "weight", "dy"), ROW_TYPES, _declare_backward("layer_norm_backward"),
             frozenset({"weight"})),
    Operator("rms_norm_backward", ("x", "weight", "dy"), ROW_TYPES, _declare_backward("rms_norm_backward"),
             frozenset({"weight"})),
)


# --- the family: its rungs, one per kernel file -------------------------------------------------

FAMILY = Family(
    name="layernorm",
    title="LayerNorm forward over the last dimension with weight and bias, fp32 or bf16 storage, fp32 math",
    ops=sys.modules[__name__],
    reference="device copy of the bytes the operator moves, PyTorch's same operator",
    default_sizes=("32768x4096",),
    rungs=(
        Rung("layernorm", 1, "two_pass", "layernorm/01_two_pass.cu", "layernorm_two_pass", ("DT", "BLOCK"),
             frozen({"DT": 0, "BLOCK": 256}),
             "mean, then variance around it (no cancellation), then normalise: three reads of each row",
             geometry_row, size_defaults=dtype_params, sass_expect=("SHFL", "MUFU"),
             traffic=functools.partial(requested_bytes, reads=3)),
        Rung("layernorm", 2, "welford", "layernorm/02_welford.cu", "layernorm_welford",
             ("DT", "BLOCK", "VPT", "WARP_ROWS", "EARLY"),
             frozen({"DT": 0, "BLOCK": 1024, "VPT": 1, "WARP_ROWS": 0, "EARLY": 1}),
             "the row in registers, per-thread moments merged by Chan/Welford in one shuffle reduction: one read",
             geometry_vectorized, vec_variant=True, size_defaults=row_params,
             sass_expect=("LDG.128", "STG.128", "SHFL"), space=functools.partial(register_row_space, early=True)),
        Rung("layernorm", 3, "two_sums", "layernorm/03_two_sums.cu", "layernorm_two_sums",
             ("DT", "BLOCK", "VPT", "WARP_ROWS", "EARLY"),
             frozen({"DT": 0, "BLOCK": 1024, "VPT": 1, "WARP_ROWS": 0, "EARLY": 1}),
             "issue-bound, not memory-bound: two one-value sums (mean, then squared deviations) over the "
             "row in registers replace the three-value Chan merge; each value unpacked once",
             geometry_vectorized, vec_variant=True, size_defaults=row_params,
             sass_expect=("LDG.128", "STG.128", "SHFL"), space=functools.partial(register_row_space, early=True)),
        Rung("layernorm", 4, "rms", "layernorm/04_rms.cu", "layernorm_rms", ("DT", "BLOCK", "VPT", "WARP_ROWS"),
             frozen({"DT": 0, "BLOCK": 1024, "VPT": 1, "WARP_ROWS": 0}),
             "RMSNorm: rung 3's register row with one reduction (no mean, no bias) - the norm LLMs use",
             geometry_rows, vec_variant=True, size_defaults=rms_params, sass_expect=("LDG.128", "STG.128", "SHFL"),
             traffic=rms_bytes, space=register_row_space),
        Rung("layernorm", 5, "backward", "layernorm/05_backward.cu", "layernorm_backward",
             ("DT", "BLOCK", "VPT", "WARP_ROWS", "RMS"), frozen({"DT": 0, "BLOCK": 256, "VPT": 4, "WARP_ROWS": 0, "RMS": 0}),
             "both backwards: two more row reductions after the statistics, and dw, db as column sums each thread "
             "keeps in registers across the rows of a persistent grid",
             geometry_backward, vec_variant=True, size_defaults=backward_params, sass_expect=("LDG.128", "SHFL"),
             traffic=backward_bytes, builds_on=3),
        Rung("layernorm", 6, "cluster_rows", "layernorm/06_cluster_rows.cu", "layernorm_backward_cluster",
             ("DT", "BLOCK", "VPT", "CLUSTER", "GROUP", "STAGES", "RMS"),
             frozen({"DT": 0, "BLOCK": 512, "VPT": 2, "CLUSTER": 1, "GROUP": 8, "STAGES": 3, "RMS": 0}),
             "both backwards with each row's slices copied in by the copy engine STAGES rows ahead and long "
             "rows split over a cluster's blocks: one merge of the statistics a row, every row read once",
             geometry_cluster, vec_variant=True, min_cc=(9, 0), size_defaults=cluster_params,
             sass_expect=("SHFL",), traffic=cluster_bytes, builds_on=5),
    ),
    metric="gbs",
    check_size="333x517",
    operators=OPERATORS,
)
