"""Inclusive prefix sum (scan) of n fp32 or int32 elements: out[i] = x[0] + ... + x[i].

Rungs 1-3 scan tiles in one launch (each writing its tile's total), scan the totals with the
same kernel (again, until one tile is left), then add each tile's carry in a second launch:
the data is read twice and written twice. Rung 4 reduces the tiles first (read once, nothing
written), scans the totals, then scans each tile with its carry (read again, written once): a
quarter less traffic. Rung 5 is one launch: each tile finds the total of the tiles before it by
looking back at what they published (decoupled look-back), so the data is read and written once.
Rung 6 is rung 5 with each warp's 16-byte accesses on consecutive bytes (whole sectors).
Rung 7 scans rows (one scan a row, a sum type of its own: int32 in, int64 out): a block a row
where rows fill the GPU, else chunk totals, their scan, and the chunks from their carries. The
public `simtlab.cumsum` is declared on rungs 6 and 7 below.
int32 is checked exactly (wrapping as the GPU's adds do), fp32 against a
float64 scan.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass

import numpy as np

from ..family import IN, OUT, SCRATCH, Declared, Family, Operator, Rung, Step, frozen
from ..launch import Launch, LaunchError
from ..space import Space
from ..verify import dot_tolerance
from .base import Reference, device_copy, parse_int, torch_reference
from .base import unsupported  # noqa: F401 (FamilyOps' default hook)

DTYPE = "float32"
DTYPES = {"fp32": "float32", "int32": "int32"}  # a size suffix picks the element type ("2^24:int32")
DT = {"float32": 0, "int32": 1}  # the kernels' DT template argument
PHASE_SCAN, PHASE_CARRY, PHASE_REDUCE = 0, 1, 2  # the kernels' phase argument
# What a rung does beyond scanning tiles and adding carries (Rung.capabilities):
REDUCE_FIRST = "reduce_first"  # reduces the tiles before it scans them
SINGLE_PASS = "single_pass"  # one launch: tiles in order by an atomic counter, carries by decoupled look-back
ROWS = "rows"  # one scan a row of a matrix, whole rows a block or chunks in three launches (rung 7)


@dataclass(frozen=True)
class ScanProblem:
    n: int
    dtype: str = DTYPE

    def __post_init__(self):
        if int(self.n) < 1:
            raise ValueError(f"scan length must be >= 1, got {self.n}")
        if self.dtype not in DT:
            raise ValueError(f"scan element type must be float32 or int32, got {self.dtype!r}")

    @property
    def label(self) -> str:
        return f"{self.n}" + ("" if self.dtype == DTYPE else ":int32")

    @property
    def flops(self) -> int:
        return self.n  # one add an element (what a sequential scan does)

    @property
    def bytes(self) -> int:
        return 8 * self.n  # x read once, out written once: what any scan must move


def parse_size(text: str, **_) -> ScanProblem:
    """'n' (fp32) or 'n:int32' / 'n:fp32'."""
    size, _, kind = str(text).partition(":")
    if kind and kind not in DTYPES:
        raise ValueError(f"scan element type {kind!r}: use fp32 or int32 (e.g. 2^24:int32)")
    return ScanProblem(parse_int(size, "scan length"), DTYPES.get(kind, DTYPE))


def tolerance(p: ScanProblem, ws=None) -> float:
    """int32: exact. fp32: out[i] is a sum of i+1 terms, added along a path of at most a tile's
    tree or run (a few dozen adds) and the carries' tree across tiles; rounding errors of such a
    sum of up to n terms random-walk, so the bound of a length-n sum (verify.dot_tolerance, u (8
    sqrt n + 16)) holds norm-wise, the same bound the reductions and GEMMs use."""
    return 0.0 if p.dtype == "int32" else dot_tolerance("float32", p.n)


def tile(params) -> int:
    return params["BLOCK"] * params["ITEMS"]


def tiles(params, n: int) -> int:
    return -(-n // tile(params))


def geometry(params, p: ScanProblem, device=None) -> Launch:
    """The first launch: a block per tile of BLOCK x ITEMS elements."""
    return Launch((tiles(params, p.n), 1, 1), (params["BLOCK"], 1, 1))


def requested_bytes(params, p: ScanProblem, passes: int = 4) -> int:
    """Rungs 1-3 (the default): read and write in the tile scan, read and write again adding the
    carry; rung 4 (3 passes): read to reduce, read and write in the scan with its carry; rung 5 (2):
    read and write once (the tile totals are small)."""
    return 4 * passes * p.n


class Workspace:
    def __init__(self, p: ScanProblem, seed: int):
        import cupy

        self.p = p
        rng = cupy.random.default_rng(seed)
        if p.dtype == "float32":
            self.x = rng.random(p.n, dtype=cupy.float32) * 2 - 1
        else:  # small signed steps: partial sums stay far from wrapping (checked exactly either way)
            self.x = rng.integers(-4, 5, p.n, dtype=cupy.int32)
        self.out = cupy.empty(p.n, dtype=self.x.dtype)

    def poison(self) -> None:
        self.out.fill(np.nan if self.p.dtype == "float32" else np.int32(0x7F7F7F7F))

    def args(self) -> tuple:  # (the runner launches with its own: tiles' totals and carries)
        return (self.x, self.out)

    def vec_ok(self) -> bool:
        return self.x.data.ptr % 16 == 0 and self.out.data.ptr % 16 == 0

    def expected(self):
        import cupy

        if self.p.dtype == "int32":  # int64 sums wrapped to int32, as the GPU's int adds wrap
            return cupy.cumsum(self.x.astype(cupy.int64)).astype(cupy.int32)
        return cupy.cumsum(self.x.astype(cupy.float64))

    def output(self):
        return self.out


def workspace(p: ScanProblem, seed: int) -> Workspace:
    return Workspace(p, seed)


def plan_levels(params, n: int) -> list[int]:
    """Element counts scanned at each level: n, then its tiles' totals, ... until one tile."""
    levels = [n]
    while tiles(params, levels[-1]) > 1:
        levels.append(tiles(params, levels[-1]))
    return levels


def make_runner(inst, problem: ScanProblem, ws: Workspace, device, vec, prepare):
    """Scan any length with the rung's one kernel (its `phase` argument picks the step): at each
    level the tiles' totals go to a buffer of the next level, scanned the same way; the carries
    come back down. Buffers are made here, outside the timed call."""
    import cupy

    params = inst.params
    block = params["BLOCK"]
    launch = inst.geometry(problem, device)
    func = prepare(inst, launch, vec, device)
    if inst.rung.can(ROWS):
        cut = cut_rows(1, problem.n, params, device)
        totals = cupy.empty(max(cut.count, 1), dtype=ws.x.dtype)
        calls = [(g, (block, 1, 1), (ws.x, ws.out, totals, *cut.args(phase))) for phase, g in cut.launches]

        def run_rows():
            for grid, blk, args in calls:
                func(grid, blk, args)

        return run_rows
    if inst.rung.can(SINGLE_PASS):
        # each tile's published word, then the tile counter: cleared on the caller's stream before each run
        state = cupy.empty(launch.blocks + 1, dtype=cupy.uint64)
        args = (ws.x, ws.out, state, state[launch.blocks:], np.int64(problem.n))

        def run_single():
            cupy.cuda.runtime.memsetAsync(state.data.ptr, 0, state.nbytes, cupy.cuda.get_current_stream().ptr)
            func(launch.grid, launch.block, args)

        return run_single
    levels = plan_levels(params, problem.n)
    dtype = ws.x.dtype
    sums = [cupy.empty(tiles(params, m), dtype=dtype) for m in levels[:-1]]  # level k's tile totals
    scanned = [cupy.empty(tiles(params, m), dtype=dtype) for m in levels[:-1]]  # ... scanned
    null = np.uint64(0)  # (a null pointer: no totals to write, no carry to add)
    reduce_first = inst.rung.can(REDUCE_FIRST)
    steps = []

    def scan(level: int, src, dst) -> None:
        """Append the launches that write the inclusive scan of `src` (levels[level] elements) to `dst`."""
        m = levels[level]
        grid = (tiles(params, m), 1, 1)
        last = level == len(levels) - 1  # one tile: no totals, no carry
        if reduce_first:
            if not last:
                steps.append((grid, (src, dst, sums[level], null, np.int64(m), np.int32(PHASE_REDUCE))))
                scan(level + 1, sums[level], scanned[level])
            steps.append((grid, (src, dst, null, null if last else scanned[level], np.int64(m), np.int32(PHASE_SCAN))))
            return
        steps.append((grid, (src, dst, null if last else sums[level], null, np.int64(m), np.int32(PHASE_SCAN))))
        if not last:
            scan(level + 1, sums[level], scanned[level])
            steps.append((grid, (src, dst, null, scanned[level], np.int64(m), np.int32(PHASE_CARRY))))

    scan(0, ws.x, ws.out)
    if any(g[0] > 2**31 - 1 for g, _ in steps):
        raise LaunchError(f"{problem.n} elements need more than 2^31 - 1 tiles")

    def run():
        for grid, args in steps:
            func(grid, (block, 1, 1), args)

    return run


def _cupy(ws: Workspace):
    import cupy

    def run():
        cupy.cumsum(ws.x, out=ws.out)

    return run


def _torch(ws: Workspace):
    import torch

    x = torch.as_tensor(ws.x, device="cuda")
    out = torch.as_tensor(ws.out, device="cuda")  # (the workspace's output, so its values are checked too)

    def run():
        torch.cumsum(x, 0, dtype=x.dtype, out=out)

    return run


def _device_copy(ws: Workspace):
    return device_copy(4 * ws.p.n)  # moves 8n bytes: x read, out written, as a scan must


def references() -> list[Reference]:
    return ([Reference("CuPy cumsum (CUB)", _cupy), Reference("device copy", _device_copy, verifiable=False)]
            + torch_reference("PyTorch cumsum", _torch, verifiable=True))


def dtype_params(p: ScanProblem, device=None, vec=None) -> dict:
    """The problem picks the element-type template argument."""
    return {"DT": DT[p.dtype]}


def block_space(max_smem: int) -> Space:
    """The block and, for the rungs that take several elements a thread, how many."""
    return Space({"BLOCK": (128, 256, 512, 1024), "ITEMS": (4, 8, 16)})


def striped_space(max_smem: int) -> Space:
    """Rung 6: the block, 16-byte groups a lane (ITEMS / 4), and how a block finds its tile."""
    return Space({"BLOCK": (128, 256, 512, 1024), "ITEMS": (4, 8, 12, 16), "ORDER": (0, 1)})


# --- rung 7: rows, a block a row or chunks in three launches --------------------------------------

ROWS_SCAN, ROWS_TOTALS, ROWS_REDUCE, ROWS_WHOLE = 0, 1, 2, 3  # rung 7's phase argument
ROW_ITEMS = 8
CHUNKS_PER_SM = 16  # chunks to aim for a multiprocessor when few long rows are cut


@dataclass(frozen=True)
class RowCut:
    """How rung 7 takes `rows` rows of `cols`: whole (a block a row) or cut into `per_row` chunks
    of `chunk` elements (multiples of the tile) scanned from their carries."""
    rows: int
    cols: int
    chunk: int
    per_row: int
    whole: bool
    grid_whole: int

    @property
    def count(self) -> int:
        return self.rows * self.per_row

    def args(self, phase: int) -> tuple:
        return (np.int64(self.rows), np.int64(self.cols), np.int64(self.chunk), np.int32(self.per_row),
                np.int32(phase))

    @property
    def launches(self) -> list[tuple[int, tuple]]:
        """(phase, grid) of each launch, in order."""
        if self.whole:
            return [(ROWS_WHOLE, (self.grid_whole, 1, 1))]
        chunks = (self.count, 1, 1)
        return [(ROWS_REDUCE, chunks), (ROWS_TOTALS, (min(self.rows, 2**31 - 1), 1, 1)), (ROWS_SCAN, chunks)]


def row_block(cols: int) -> int:
    """Rung 7's block for rows of `cols`: enough threads for a tile of about the row, 32 to 256."""
    block = 32
    while block < 256 and block * ROW_ITEMS < cols:
        block *= 2
    return block


def cut_rows(rows: int, cols: int, params, device=None) -> RowCut:
    """Whole rows where there are enough of them to fill the GPU (or they are one or two tiles
    long); else chunks of whole tiles, about CHUNKS_PER_SM a multiprocessor."""
    tile_ = tile(params)
    sms = device.sms if device is not None else 132
    resident = sms * min(2048 // params["BLOCK"], 32)
    tiles_ = -(-max(cols, 1) // tile_)
    if rows >= resident or tiles_ <= 2:
        return RowCut(rows, cols, max(cols, 1), 1, True, max(1, min(rows, 4 * resident)))
    per_row = min(tiles_, max(1, -(-sms * CHUNKS_PER_SM // rows)))
    chunk = -(-tiles_ // per_row) * tile_
    return RowCut(rows, cols, chunk, -(-cols // chunk), False, 0)


def geometry_rows(params, p: ScanProblem, device=None) -> Launch:
    """The first launch over one row of n (the ladder's problem)."""
    phase, grid = cut_rows(1, p.n, params, device).launches[0]
    return Launch(grid, (params["BLOCK"], 1, 1))


def rows_params(p: ScanProblem, device=None, vec=None) -> dict:
    code = {"float32": 0, "int32": 1}[p.dtype]
    return {"IT": code, "OT": code, "BLOCK": row_block(p.n)}


# --- the public operator (simtlab.cumsum) -----------------------------------------------------------

CUMSUM_TYPES = ("float32", "int32", "int64")
SUM_TYPE = {"float32": "float32", "int32": "int64", "int64": "int64"}  # as torch.cumsum promotes
NUM = {"float32": 0, "int32": 1, "int64": 2}  # rung 7's IT / OT


def _declare_cumsum(shapes, dtype, options, device, vec, build) -> Declared:
    """One row of float32: rung 6 (one pass, decoupled look-back, its flags cleared on the caller's
    stream). Otherwise rung 7: a block a row where rows fill the GPU, else three launches over chunks."""
    shape = shapes[0]
    if len(shape) < 1:
        raise ValueError("simtlab.cumsum: x is 0-d; the scan runs along a dimension")
    rows, cols = int(np.prod(shape[:-1], dtype=np.int64)), shape[-1]
    out_type = SUM_TYPE[dtype]
    outputs = ((shape, out_type),)
    if rows == 1 and dtype == "float32":
        rung = FAMILY.rung(6)
        params = rung.params(device.arch, {"DT": 0})
        p = ScanProblem(max(cols, 1))
        launch = rung.geometry(params, p, device)
        state = launch.blocks + 1  # each tile's word, then the tile counter
        step = Step(rung, params, launch, ((IN, 0), (OUT, 0), (SCRATCH, 0), (SCRATCH, 1), np.int64(p.n)))
        return Declared(outputs, (step,), f"1x{cols} float32: {rung.id} (one pass, {launch.blocks} tiles)",
                        scratch=(((state,), "int64"), ((1,), "int32")), cleared=(0, 1), vec=vec)
    rung = FAMILY.rung(7)
    params = rung.params(device.arch, {"IT": NUM[dtype], "OT": NUM[out_type], "BLOCK": row_block(cols)})
    cut = cut_rows(rows, cols, params, device)
    vec = vec and cols % 4 == 0
    steps = tuple(Step(rung, params, Launch(grid, (params["BLOCK"], 1, 1)),
                       ((IN, 0), (OUT, 0), (SCRATCH, 0), *cut.args(phase))) for phase, grid in cut.launches)
    how = "a block a row" if cut.whole else f"chunks of {cut.chunk} ({cut.per_row} a row) in three launches"
    return Declared(outputs, steps, f"{rows}x{cols} {dtype} -> {out_type}: {rung.id} {how}",
                    scratch=(((max(cut.count, 1),), out_type),), vec=vec, align=16)


OPERATORS = (Operator("cumsum", ("x",), CUMSUM_TYPES, _declare_cumsum),)


# --- the family: its rungs, one per kernel file -------------------------------------------------

FAMILY = Family(
    name="scan",
    title="inclusive prefix sum, fp32 or int32, any length",
    ops=sys.modules[__name__],
    reference="CuPy cumsum (CUB), and a device copy of the bytes a scan moves",
    default_sizes=("268435456", "268435456:int32"),
    rungs=(
        Rung("scan", 1, "hillis_steele", "scan/01_hillis_steele.cu", "scan_hillis_steele", ("DT", "BLOCK", "ITEMS"),
             frozen({"DT": 0, "BLOCK": 512, "ITEMS": 1}),
             "log2(BLOCK) steps, each adding the element `offset` back: simple, but n log n adds and a barrier a step",
             geometry, size_defaults=dtype_params, sass_expect=("LDS", "BAR")),
        Rung("scan", 2, "blelloch", "scan/02_blelloch.cu", "scan_blelloch", ("DT", "BLOCK", "ITEMS"),
             frozen({"DT": 0, "BLOCK": 512, "ITEMS": 2}),
             "up-sweep then down-sweep over a padded shared tree: 2n adds (work-efficient), no bank conflicts",
             geometry, size_defaults=dtype_params, sass_expect=("LDS", "BAR")),
        Rung("scan", 3, "warp_shuffle", "scan/03_warp_shuffle.cu", "scan_warp_shuffle", ("DT", "BLOCK", "ITEMS"),
             frozen({"DT": 0, "BLOCK": 256, "ITEMS": 8}),
             "ITEMS in registers a thread, a warp scan by __shfl_up_sync, one shared value a warp: two barriers a tile",
             geometry, size_defaults=dtype_params, sass_expect=("SHFL",), space=block_space),
        Rung("scan", 4, "reduce_then_scan", "scan/04_reduce_then_scan.cu", "scan_reduce_then_scan",
             ("DT", "BLOCK", "ITEMS"), frozen({"DT": 0, "BLOCK": 256, "ITEMS": 16}),
             "reduce the tiles first (nothing written), then scan each with its carry: 12 bytes an element, not 16",
             geometry, size_defaults=dtype_params, sass_expect=("SHFL",), space=block_space,
             capabilities=frozenset({REDUCE_FIRST}), traffic=functools.partial(requested_bytes, passes=3)),
        Rung("scan", 5, "decoupled_lookback", "scan/05_decoupled_lookback.cu", "scan_decoupled_lookback",
             ("DT", "BLOCK", "ITEMS"), frozen({"DT": 0, "BLOCK": 256, "ITEMS": 8}),  # (the H200 sweep's best at 2^28)
             "one pass: tiles taken in order, each publishing its total and looking back for its prefix: 8 bytes an element",
             geometry, size_defaults=dtype_params, sass_expect=("SHFL", "ATOMG"), space=block_space,
             capabilities=frozenset({SINGLE_PASS}), traffic=functools.partial(requested_bytes, passes=2)),
        Rung("scan", 6, "striped_lookback", "scan/06_striped_lookback.cu", "scan_striped_lookback",
             ("DT", "BLOCK", "ITEMS", "ORDER"), frozen({"DT": 0, "BLOCK": 512, "ITEMS": 12, "ORDER": 1}),  # (the H200 sweep's best at 2^28)
             "rung 5 with a warp's 16-byte accesses on 512 consecutive bytes (whole sectors): half the L2 traffic",
             geometry, size_defaults=dtype_params, sass_expect=("SHFL", "LDG.128", "STG.128"), space=striped_space,
             capabilities=frozenset({SINGLE_PASS}), traffic=functools.partial(requested_bytes, passes=2)),
        Rung("scan", 7, "rows", "scan/07_rows.cu", "scan_rows", ("IT", "OT", "BLOCK", "ITEMS"),
             frozen({"IT": 0, "OT": 0, "BLOCK": 256, "ITEMS": ROW_ITEMS}),
             "one scan a row (torch.cumsum): a block walks its row with the carry in a register where rows fill the "
             "GPU; chunk totals, their scan and the chunks otherwise; int32 summed into int64",
             geometry_rows, vec_variant=True, size_defaults=rows_params, sass_expect=("SHFL",),
             capabilities=frozenset({ROWS}), traffic=functools.partial(requested_bytes, passes=3)),
    ),
    metric="gbs",
    check_size="1000003",
    operators=OPERATORS,
)
