"""Sparse matrix times vector in CSR, fp32: y = alpha * A @ x + beta * y, A square (n x n).

The matrix's shape is part of the problem - its class and n fix its row lengths (a seeded draw,
the same on every machine), so its nonzero count, FLOPs and bytes are known before any GPU work;
the values, x and y are drawn afresh for each workspace. Classes: `uniform` (16 nonzeros a row,
distinct columns from a random start in steps of a large prime), `powerlaw` (Pareto row lengths, a few rows of tens of thousands), `banded` (27
diagonals), `dense` (one dense row among empty ones) and `sparse` (0-3 nonzeros a row, a quarter
of the rows empty). Rung 1 gives each row a thread, rung 2 a group of lanes, rung 3 a lane of a
sorted, padded slice (SELL-C-sigma, built outside the timed call), rung 4 an equal share of the
merged rows and nonzeros (merge path), rung 5 rung 3's slices for the short rows and a warp to
each CHUNK-nonzero piece of the long ones, rung 6 blocks of rows summed in shared memory with each
block's nonzeros gathered in column order (built outside the timed call). Checked against a
float64 product; cuSPARSE (through cupyx) is the bar, a device copy of the bytes that must move the
ceiling.
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
from .base import Reference, device_copy, parse_int
from .base import unsupported  # noqa: F401 (FamilyOps' default hook)

DTYPE = "float32"
KINDS = ("uniform", "powerlaw", "banded", "dense", "sparse")
UNIFORM_ROW, BANDS = 16, 27
POWERLAW_SCALE, POWERLAW_ALPHA, POWERLAW_MAX = 6, 1.5, 65536  # rows of floor(6 U^(-1/1.5)) nonzeros, at most 65536
COLUMN_STEP, COLUMN_STEP_ALT = 1_000_003, 998_244_353  # primes: j * step mod n is distinct for j < n
MAX_BLOCK_ROWS = 57344  # rung 6: y of a row block in shared memory (224 KiB of the 227 an H200 block may have)
# Rung 6's row blocks leave the L1 cache room for the entries in flight and x's sectors: on the
# H200 (256 KiB of L1 and shared memory an SM) 32768 rows (128 KiB) ran uniform rows at 2139 GB/s,
# 57344 (224 KiB, 28 KiB of L1 left) at 1198 (run 2026-12-04_h200_6ed139_spmv_windows); elsewhere the
# same share.
ROW_BLOCK_ARCH_ROWS = frozen({a: frozen({"ROWS": r}) for a, r in (("sm_75", 8192), ("sm_80", 24576),
                                                                  ("sm_86", 12288), ("sm_89", 12288))})
SELL_C, SELL_SIGMA = 32, 4096  # rung 3: slices of a warp's 32 rows, sorted by length within windows of 4096 rows
# What a rung needs beyond one launch on the CSR arrays (Rung.capabilities):
SELL = "sell"  # its own copy of the matrix, sliced and padded (made outside the timed call)
MERGE_PATH = "merge_path"  # a first launch for the tiles' corners (and beta * y), then the tiles
SELL_SPLIT = "sell_split"  # SELL of the short rows, pieces of the long ones (made outside the timed call)
ROW_BLOCKS = "row_blocks"  # blocks of rows, nonzeros in column order (made outside the timed call); long rows after
CHUNK_BITS = 16  # rung 6 keeps a column's low 16 bits beside the row; the chunk (column >> 16) comes from a table
PAD_ENTRY = 0xFFFFFFFF  # rung 6's padding (row 65535 of a block: none has it)
WINDOW = 128  # rung 6: a warp's 32 groups of 4 entries, the unit its chunks are padded to
ROW_BLOCK_PIECE = 256  # rung 6 cuts rows of more than LONG into pieces of this many (its kernel's PIECE)


@functools.lru_cache(maxsize=32)
def row_lengths(kind: str, n: int) -> np.ndarray:
    """Nonzeros of each row of the class's n x n matrix (int64; drawn from a fixed seed)."""
    rng = np.random.default_rng(20261204 + n)
    if kind == "uniform":
        return np.full(n, min(UNIFORM_ROW, n), dtype=np.int64)
    if kind == "powerlaw":
        u = rng.random(n)
        return np.minimum(np.floor(POWERLAW_SCALE * (1.0 - u) ** (-1.0 / POWERLAW_ALPHA)),
                          min(n, POWERLAW_MAX)).astype(np.int64)
    if kind == "banded":
        r = np.arange(n)
        half = BANDS // 2
        return (np.minimum(r + half, n - 1) - np.maximum(r - half, 0) + 1).astype(np.int64)
    if kind == "dense":
        lengths = np.zeros(n, dtype=np.int64)
        lengths[n // 2] = n
        return lengths
    if kind == "sparse":
        return rng.integers(0, 4, n).astype(np.int64)
    raise ValueError(f"matrix class {kind!r}: one of {', '.join(KINDS)}")


@dataclass(frozen=True)
class SpmvProblem:
    n: int
    kind: str = "uniform"
    alpha: float = 1.0
    beta: float = 0.0
    dtype: str = DTYPE

    def __post_init__(self):
        if int(self.n) < 1:
            raise ValueError(f"SpMV rows must be >= 1, got {self.n}")
        if self.kind not in KINDS:
            raise ValueError(f"matrix class {self.kind!r}: one of {', '.join(KINDS)}")
        if self.n + self.nnz >= 2**31:
            raise ValueError(f"{self.label}: rows + nonzeros = {self.n + self.nnz} must stay below 2^31 (32-bit "
                             "offsets)")

    @property
    def nnz(self) -> int:
        if self.kind in ("uniform", "dense"):  # (counted, not drawn: sizes past 2^31 are refused at once)
            return self.n * min(UNIFORM_ROW, self.n) if self.kind == "uniform" else self.n
        return int(row_lengths(self.kind, self.n).sum())

    @property
    def max_row(self) -> int:
        if self.kind in ("uniform", "dense"):
            return min(UNIFORM_ROW, self.n) if self.kind == "uniform" else self.n
        return int(row_lengths(self.kind, self.n).max())

    @property
    def label(self) -> str:
        s = f"{self.n}:{self.kind}"
        if (self.alpha, self.beta) != (1.0, 0.0):
            s += f" a={self.alpha:g} b={self.beta:g}"
        return s

    @property
    def flops(self) -> int:
        return 2 * self.nnz

    @property
    def bytes(self) -> int:
        """What must move: values and columns, row offsets, x once, y written (and read where beta != 0)."""
        return 8 * self.nnz + 4 * (self.n + 1) + 4 * self.n + 4 * self.n * (2 if self.beta != 0 else 1)


def parse_size(text: str, alpha: float = 1.0, beta: float = 0.0, **_) -> SpmvProblem:
    """'n' (uniform rows) or 'n:class' (uniform, powerlaw, banded, dense, sparse), e.g. 2^22:powerlaw."""
    size, _, kind = str(text).partition(":")
    return SpmvProblem(parse_int(size, "SpMV rows"), kind or "uniform", alpha, beta)


def tolerance(p: SpmvProblem, ws=None) -> float:
    """Each y[i] is a dot product of its row's length: the bound of the longest row's sum, relative
    to what the sums add up in magnitude - || |alpha| |A| |x| + |beta y0| || - over what they add up
    to, || y || (a product whose terms cancel loses digits as a sum does; a single dense row among
    empty ones shows it). The merge path's atomics add a row's pieces in any order: the same terms,
    the same bound. Without data (static use) no cancellation is assumed."""
    bound = dot_tolerance("float32", max(p.max_row, 1))
    if ws is None:
        return bound
    import cupy

    xp = cupy.get_array_module(ws.vals)
    n = p.n
    rows = xp.repeat(xp.arange(n), xp.diff(ws.row_ptr))
    terms = xp.abs(ws.vals.astype(xp.float64)) * xp.abs(ws.x.astype(xp.float64)[ws.cols])
    magnitude = abs(p.alpha) * xp.bincount(rows, weights=terms, minlength=n)
    value = p.alpha * xp.bincount(rows, weights=ws.vals.astype(xp.float64) * ws.x.astype(xp.float64)[ws.cols],
                                  minlength=n)
    if ws.y0 is not None:
        y0 = ws.y0.astype(xp.float64)
        magnitude = magnitude + abs(p.beta) * xp.abs(y0)
        value = value + p.beta * y0
    norm = float(xp.linalg.norm(value))
    return bound * (float(xp.linalg.norm(magnitude)) / norm if norm > 0 else float("inf"))


def requested_bytes(params, p: SpmvProblem) -> int:
    """Values, columns and one x gather a nonzero, the row offsets, y (SELL's padding aside)."""
    return 12 * p.nnz + 4 * (p.n + 1) + 4 * p.n * (2 if p.beta != 0 else 1)


# --- launch geometry --------------------------------------------------------------------------

def geometry_scalar(params, p: SpmvProblem, device=None) -> Launch:
    return Launch((-(-p.n // params["BLOCK"]), 1, 1), (params["BLOCK"], 1, 1))


def geometry_vector(params, p: SpmvProblem, device=None) -> Launch:
    return Launch((-(-p.n * params["VW"] // params["BLOCK"]), 1, 1), (params["BLOCK"], 1, 1))


def geometry_sell(params, p: SpmvProblem, device=None) -> Launch:
    slice_rows = -(-p.n // SELL_C) * SELL_C
    return Launch((-(-slice_rows // params["BLOCK"]), 1, 1), (params["BLOCK"], 1, 1))


def split_counts(p: SpmvProblem, chunk: int) -> tuple[int, int]:
    """Rung 5's pieces of long rows (more than `chunk` nonzeros) and its short rows, known from the
    problem alone (the class fixes the row lengths)."""
    lengths = row_lengths(p.kind, p.n)
    long = lengths > chunk
    return int((-(-lengths[long] // chunk)).sum()), p.n - int(long.sum())


def geometry_sell_split(params, p: SpmvProblem, device=None) -> Launch:
    """The pieces' blocks (a warp a piece), then the slices' (a thread a row)."""
    block = params["BLOCK"]
    pieces, short = split_counts(p, params["CHUNK"])
    slice_rows = -(-short // SELL_C) * SELL_C
    return Launch((-(-pieces // (block // 32)) + -(-slice_rows // block), 1, 1), (block, 1, 1))


def merge_tiles(params, p: SpmvProblem) -> int:
    return -(-(p.n + p.nnz) // (params["BLOCK"] * params["IPT"]))


def geometry_merge(params, p: SpmvProblem, device=None) -> Launch:
    """A block a tile of BLOCK * IPT merge-path items (the first launch's geometry is the runner's)."""
    return Launch((merge_tiles(params, p), 1, 1), (params["BLOCK"], 1, 1))


def row_block_slots(params, p: SpmvProblem, device=None) -> int:
    """Rung 6's blocks of threads: as many as fit on the GPU at once with a row block's y in shared
    memory (each owns row blocks of an equal share of the work), fewer for a matrix of few nonzeros."""
    from ..hw.occupancy import occupancy
    from .base import sm_count

    arch = str(device.arch) if device is not None else "sm_90"
    fit = occupancy(arch, params["BLOCK"], 32, 0, row_block_shared(params, p)).blocks_per_sm
    return slot_count(fit, sm_count(device), p.nnz, params["BLOCK"])


def slot_count(fit: int, sms: int, nnz: int, block: int) -> int:
    """Rung 6's blocks of threads: one round of them on the GPU (`fit` an SM), fewer for a matrix of
    few nonzeros (a group of 4 a thread at least)."""
    return max(1, min(sms * max(fit, 1), -(-nnz // (4 * block))))


def block_y_bytes(rows_bound: int, n: int) -> int:
    """Bytes of y a block of threads sums in shared memory: a row block, or the whole of a small y."""
    return 4 * min(rows_bound, -(-n // 4) * 4)


def row_block_shared(params, p: SpmvProblem) -> int:
    return block_y_bytes(params["ROWS"], p.n)


def geometry_row_blocks(params, p: SpmvProblem, device=None) -> Launch:
    return Launch((row_block_slots(params, p, device), 1, 1), (params["BLOCK"], 1, 1), row_block_shared(params, p))


def vector_params(p: SpmvProblem, device=None, vec=None) -> dict:
    """Rung 2: lanes a row from the mean row length, a power of two from 2 to 32."""
    mean = p.nnz / p.n
    vw = 2
    while vw < 32 and vw < mean:
        vw *= 2
    return {"VW": vw}


# --- inputs, outputs, references ---------------------------------------------------------------

def distinct_columns(rows, within, start, n: int):
    """Column of each nonzero (its row, its place in the row, each row's random start): the start,
    then steps of a prime that n does not divide - distinct within a row (a row has at most n) -
    sorted within each row: canonical CSR, as cuSPARSE's SpMV wants. NumPy or CuPy arrays."""
    import cupy

    xp = cupy.get_array_module(rows)
    step = COLUMN_STEP if n % COLUMN_STEP else COLUMN_STEP_ALT
    keys = rows * n + (start[rows] + within * step) % n
    return xp.sort(keys) % n

class Workspace:
    """The class's matrix (columns sorted within rows; values, x and y in [-1, 1)) on the GPU."""

    def __init__(self, p: SpmvProblem, seed: int):
        import cupy

        self.p = p
        n = p.n
        rng = cupy.random.default_rng(seed)
        lengths = cupy.asarray(row_lengths(p.kind, n))
        self.row_ptr = cupy.zeros(n + 1, dtype=cupy.int32)
        cupy.cumsum(lengths, out=self.row_ptr[1:])
        rows = cupy.repeat(cupy.arange(n, dtype=cupy.int64), lengths)
        if p.kind == "banded":
            first = cupy.maximum(cupy.arange(n, dtype=cupy.int64) - BANDS // 2, 0)
            cols = first[rows] + cupy.arange(p.nnz, dtype=cupy.int64) - self.row_ptr[rows].astype(cupy.int64)
        elif p.kind == "dense":
            cols = cupy.arange(p.nnz, dtype=cupy.int64) % n
        else:
            within = cupy.arange(p.nnz, dtype=cupy.int64) - self.row_ptr[rows].astype(cupy.int64)
            cols = distinct_columns(rows, within, rng.integers(0, n, n, dtype=cupy.int64), n)
        self.cols = cols.astype(cupy.int32)
        self.vals = rng.random(p.nnz, dtype=cupy.float32) * 2 - 1
        self.x = rng.random(n, dtype=cupy.float32) * 2 - 1
        self.y0 = rng.random(n, dtype=cupy.float32) * 2 - 1 if p.beta != 0 else None
        self.y = cupy.empty(n, dtype=cupy.float32)

    def poison(self) -> None:
        """NaN where beta == 0 (y must not be read); y0 otherwise (an unwritten y keeps a wrong value)."""
        if self.y0 is None:
            self.y.fill(np.nan)
        else:
            self.y[...] = self.y0

    def args(self) -> tuple:
        p = self.p
        return (np.int32(p.n), self.row_ptr, self.cols, self.vals, self.x, np.float32(p.alpha), np.float32(p.beta),
                self.y)

    def matrix(self, dtype=None):
        """A as a cupyx CSR matrix (sharing the arrays; values converted to `dtype` if given)."""
        from cupyx.scipy import sparse

        vals = self.vals if dtype is None else self.vals.astype(dtype)
        return sparse.csr_matrix((vals, self.cols, self.row_ptr), shape=(self.p.n, self.p.n))

    def expected(self):
        """float64 product of the fp32 matrix and vectors (cuSPARSE in double, exactly widened inputs)."""
        import cupy

        ref = self.matrix(cupy.float64) @ self.x.astype(cupy.float64)
        ref *= self.p.alpha
        if self.y0 is not None:
            ref += self.p.beta * self.y0.astype(cupy.float64)
        return ref

    def output(self):
        return self.y


def workspace(p: SpmvProblem, seed: int) -> Workspace:
    return Workspace(p, seed)


def sell_arrays(ws: Workspace, sigma: int = SELL_SIGMA, limit: int | None = None):
    """Rung 3's copy of A: rows sorted by length (longest first) within windows of `sigma` rows,
    slices of SELL_C rows each padded to its longest row and stored column by column; padding has
    column -1. Returns (slice_ptr, cols, vals, perm): perm[i] is the row of sorted row i (-1: none).
    With `limit` (rung 5), rows longer than `limit` nonzeros are left out (long_row_pieces takes
    them). NumPy or CuPy arrays, as the workspace's."""
    import cupy

    xp = cupy.get_array_module(ws.row_ptr)
    n = ws.p.n
    lengths = xp.diff(ws.row_ptr).astype(xp.int64)
    short = lengths <= limit if limit is not None else xp.ones(n, dtype=bool)
    kept = int(short.sum())
    longest = int(lengths[short].max()) if kept else 0
    keys = (xp.arange(n, dtype=xp.int64) // sigma) * (longest + 1) + (longest - lengths)
    keys[~short] = xp.iinfo(xp.int64).max  # (the long rows sort last, and are cut off)
    order = xp.argsort(keys, kind="stable")[:kept]
    slices = -(-kept // SELL_C)
    perm = xp.full(slices * SELL_C, -1, dtype=xp.int32)
    perm[:kept] = order.astype(xp.int32)
    sorted_lengths = xp.zeros(slices * SELL_C, dtype=xp.int64)
    sorted_lengths[:kept] = lengths[order]
    widths = sorted_lengths.reshape(slices, SELL_C).max(axis=1)
    slice_ptr = xp.zeros(slices + 1, dtype=xp.int64)
    xp.cumsum(widths * SELL_C, out=slice_ptr[1:])
    total = int(slice_ptr[-1])
    if total >= 2**31:
        raise LaunchError(f"SELL-{SELL_C}-{sigma} of {ws.p.label} holds {total} entries with padding: more than "
                          "32-bit offsets reach")
    position = xp.full(n, -1, dtype=xp.int64)
    position[order] = xp.arange(kept, dtype=xp.int64)  # row -> its sorted row
    rows = xp.repeat(xp.arange(n, dtype=xp.int64), lengths)
    within = xp.arange(ws.p.nnz, dtype=xp.int64) - ws.row_ptr[rows].astype(xp.int64)
    mine = short[rows]  # (the nonzeros of the rows kept)
    i = position[rows[mine]]
    dest = slice_ptr[i // SELL_C] + within[mine] * SELL_C + i % SELL_C
    cols = xp.full(max(total, 1), -1, dtype=xp.int32)
    vals = xp.zeros(max(total, 1), dtype=xp.float32)
    cols[dest] = ws.cols[mine]
    vals[dest] = ws.vals[mine]
    return slice_ptr.astype(xp.int32), cols, vals, perm


def row_blocks(work, rows: int, slots: int):
    """Rung 6's row blocks and their owners: `work` is each row's cost (its nonzeros in the blocks,
    plus one for writing its y). Rows are cut at equal shares of the total (a multiple of `slots`
    blocks, enough that none passes `rows` rows), a block longer than `rows` rows is cut again,
    and block of threads t owns the blocks whose first row's share starts in its t-th of the
    total. Returns (blk_row: blocks + 1 row bounds, cta_blk: slots + 1 block bounds), int32, NumPy
    or CuPy as `work`."""
    import cupy

    xp = cupy.get_array_module(work)
    n = int(work.size)
    before = xp.zeros(n + 1, dtype=xp.int64)
    xp.cumsum(work, out=before[1:])
    total = int(before[-1])
    wanted = slots * -(-n // (slots * rows))
    cuts = xp.searchsorted(before[:-1], xp.arange(1, wanted, dtype=xp.int64) * total // wanted, side="left")
    bounds = xp.unique(xp.concatenate([xp.zeros(1, dtype=xp.int64), cuts.astype(xp.int64),
                                       xp.full(1, n, dtype=xp.int64)]))
    sizes = xp.diff(bounds)
    parts = -(-sizes // rows)  # a block over `rows` rows: cut into that many equal ones
    first = xp.repeat(bounds[:-1], parts)
    nth = xp.arange(int(parts.sum()), dtype=xp.int64) - xp.repeat(xp.cumsum(parts) - parts, parts)
    blk_row = xp.concatenate([first + nth * xp.repeat(sizes, parts) // xp.repeat(parts, parts),
                              xp.full(1, n, dtype=xp.int64)])
    shares = xp.arange(slots + 1, dtype=xp.int64) * total // slots
    cta_blk = xp.searchsorted(before[blk_row[:-1]], shares, side="left")
    cta_blk[-1] = blk_row.size - 1
    return blk_row.astype(xp.int32), cta_blk.astype(xp.int32)


def row_block_layout(row_ptr, cols, values, ncols: int, rows: int, longer_than: int | None = None, slots: int = 1):
    """Rung 6's copy of a CSR matrix (offsets `row_ptr`, column indices `cols`, `values`; `ncols`
    columns): rows in blocks of at most `rows` and about equal work (row_blocks, for
    `slots` blocks of threads); each block's nonzeros sorted by column, grouped by 65536-column
    chunk, each chunk padded to whole windows of WINDOW entries (PAD_ENTRY); within a window entry
    e is stored as lane e % 32's (e // 32)-th, so that a warp's j-th gather reads 32 consecutive
    entries of the column order. An entry is its value and one word, (row within the block) << 16
    | (column & 0xFFFF). Rows of more than `longer_than` nonzeros are left out (long_row_pieces
    takes them). Returns (blk_row, cta_blk, seg_ptr, idx, vals, chunks): seg_ptr[b * chunks + c] is
    the first group of block b's chunk c, seg_ptr[-1] the number of groups. NumPy or CuPy arrays,
    as the workspace's."""
    import cupy

    xp = cupy.get_array_module(row_ptr)
    n = int(row_ptr.size) - 1
    if not 1 <= rows <= MAX_BLOCK_ROWS:
        raise LaunchError(f"row blocks of {rows} rows: 1..{MAX_BLOCK_ROWS} (a block's y in shared memory)")
    if longer_than is not None and longer_than < ROW_BLOCK_PIECE:
        raise LaunchError(f"LONG {longer_than}: at least a piece ({ROW_BLOCK_PIECE} nonzeros), the rows it takes out "
                          "are cut into pieces of that many")
    chunks = max(1, -(-ncols // (1 << CHUNK_BITS)))
    lengths = xp.diff(row_ptr).astype(xp.int64)
    kept_lengths = lengths if longer_than is None else xp.where(lengths > longer_than, 0, lengths)
    blk_row, cta_blk = row_blocks(kept_lengths + 1, rows, slots)
    blocks = int(blk_row.size) - 1
    row = xp.repeat(xp.arange(n, dtype=xp.int64), lengths)
    col = cols.astype(xp.int64)
    vals_in = values
    if longer_than is not None:
        kept = lengths[row] <= longer_than
        row, col, vals_in = row[kept], col[kept], vals_in[kept]
    nnz = int(row.size)
    block = xp.searchsorted(blk_row[1:], row, side="right")  # (the block whose rows hold each)
    seg = block * chunks + (col >> CHUNK_BITS)
    order = xp.argsort(seg * (1 << CHUNK_BITS) + (col & 0xFFFF), kind="stable")  # by block, then column
    counts = xp.bincount(seg, minlength=blocks * chunks)
    padded = -(-counts // WINDOW) * WINDOW
    seg_ptr = xp.zeros(blocks * chunks + 1, dtype=xp.int64)
    xp.cumsum(padded, out=seg_ptr[1:])
    total = int(seg_ptr[-1])
    if total // 4 >= 2**31 - 2**16:
        raise LaunchError(f"a {n}x{ncols} matrix in row blocks holds {total} entries: more than 32-bit group offsets "
                          "reach")
    seg_sorted = seg[order]
    first_unpadded = xp.cumsum(counts) - counts  # where each segment starts in `order`
    place = seg_ptr[seg_sorted] + xp.arange(nnz, dtype=xp.int64) - first_unpadded[seg_sorted]  # in column order
    e = place % WINDOW  # a window's e-th entry goes to lane e % 32's group, as its (e // 32)-th
    dest = place - e + 4 * (e % 32) + e // 32
    idx = xp.full(max(total, WINDOW), PAD_ENTRY, dtype=xp.uint32)
    vals = xp.zeros(max(total, WINDOW), dtype=xp.float32)
    within = row[order] - blk_row[block[order]].astype(xp.int64)
    idx[dest] = ((within << CHUNK_BITS) | (col[order] & 0xFFFF)).astype(xp.uint32)
    vals[dest] = vals_in[order]
    return blk_row, cta_blk, (seg_ptr // 4).astype(xp.int32), idx, vals, chunks


def long_row_pieces(row_ptr, chunk: int, longer_than: int | None = None):
    """The long rows - those of more than `longer_than` nonzeros (default `chunk`) - and their pieces
    of `chunk` nonzeros (the last one shorter): (long_rows, piece_row, piece_begin), int32, NumPy or
    CuPy. Rung 5 cuts at its CHUNK, rung 6 takes rows of more than LONG in pieces of PIECE."""
    import cupy

    xp = cupy.get_array_module(row_ptr)
    starts = row_ptr[:-1].astype(xp.int64)
    lengths = row_ptr[1:].astype(xp.int64) - starts
    long_rows = xp.nonzero(lengths > (chunk if longer_than is None else longer_than))[0]
    counts = -(-lengths[long_rows] // chunk)
    total = int(counts.sum())
    first = xp.cumsum(counts) - counts  # each long row's first piece
    piece_row = xp.repeat(long_rows, counts)
    nth = xp.arange(total, dtype=xp.int64) - xp.repeat(first, counts)
    piece_begin = starts[piece_row] + nth * chunk
    return long_rows.astype(xp.int32), piece_row.astype(xp.int32), piece_begin.astype(xp.int32)


def make_runner(inst, problem: SpmvProblem, ws: Workspace, device, vec, prepare):
    """Rung 3: its SELL copy of A made here (outside the timed call), one launch. Rung 5: the SELL
    copy of the short rows and the long rows' pieces made here; beta * y on the long rows, then
    the pieces and slices. Rung 4: the corners' launch, then the tiles. Rung 6: its row blocks made
    here for the blocks of threads that fit at once, the row blocks' launch, then the long rows'
    pieces. Rungs 1-2: None (one launch on the CSR arrays)."""
    import cupy

    p = problem
    launch = inst.geometry(p, device)
    if inst.rung.can(SELL):
        slice_ptr, cols, vals, perm = sell_arrays(ws)
        func = prepare(inst, launch, vec, device)
        args = (np.int32(perm.size), slice_ptr, cols, vals, perm, ws.x, np.float32(p.alpha), np.float32(p.beta), ws.y)

        def run_sell():
            func(launch.grid, launch.block, args)

        run_sell.keep = (slice_ptr, cols, vals, perm)
        return run_sell
    if inst.rung.can(SELL_SPLIT):
        chunk = inst.params["CHUNK"]
        slice_ptr, cols, vals, perm = sell_arrays(ws, limit=chunk)
        long_rows, piece_row, piece_begin = long_row_pieces(ws.row_ptr, chunk)
        func = prepare(inst, launch, vec, device)
        first = inst.module().get_function("spmv_long_rows_beta")
        first_grid = (max(-(-long_rows.size // 256), 1), 1, 1)
        first_args = (np.int32(long_rows.size), long_rows, np.float32(p.beta), ws.y)
        args = (np.int32(piece_row.size), piece_row, piece_begin, ws.row_ptr, ws.cols, ws.vals, np.int32(perm.size),
                slice_ptr, cols, vals, perm, ws.x, np.float32(p.alpha), np.float32(p.beta), ws.y)

        def run_split():
            if long_rows.size:
                first(first_grid, (256, 1, 1), first_args)
            func(launch.grid, launch.block, args)

        run_split.keep = (slice_ptr, cols, vals, perm, long_rows, piece_row, piece_begin)
        return run_split
    if inst.rung.can(MERGE_PATH):
        func = prepare(inst, launch, vec, device)
        first = inst.module().get_function("spmv_merge_prepare")
        tiles = launch.blocks
        corners = cupy.empty(tiles + 1, dtype=cupy.int32)
        span = max(p.n, tiles + 1)
        first_grid = (min(-(-span // 256), 65535), 1, 1)
        first_args = (np.int32(p.n), ws.row_ptr, np.int32(inst.params["BLOCK"] * inst.params["IPT"]), np.int32(tiles),
                      np.float32(p.beta), ws.y, corners)
        args = (np.int32(p.n), ws.row_ptr, ws.cols, ws.vals, ws.x, np.float32(p.alpha), corners, ws.y)

        def run_merge():
            first(first_grid, (256, 1, 1), first_args)
            func(launch.grid, launch.block, args)

        run_merge.keep = corners
        return run_merge
    if inst.rung.can(ROW_BLOCKS):
        longer_than = inst.params["LONG"]
        fit = inst.occupancy(launch, vec).blocks_per_sm  # (with the registers ptxas gave, which the geometry
        if device is not None and 0 < fit:              # cannot know): one round of blocks, none waiting
            launch = Launch((min(launch.blocks, device.sms * fit), 1, 1), launch.block, launch.shared)
        a, chunks = prepared_layout(ws.row_ptr, ws.cols, ws.vals, p.n, inst.params["ROWS"], longer_than,
                                    launch.blocks)
        func = prepare(inst, launch, vec, device)
        second = inst.module().get_function("spmv_long_pieces")
        pieces = 0 if a["piece_row"] is None else a["piece_row"].size
        second_grid = (max(-(-pieces // 8), 1), 1, 1)  # a warp a piece, 8 a block
        second_args = (np.int32(pieces), a["piece_row"], a["piece_begin"], ws.row_ptr, ws.cols, ws.vals, ws.x,
                       np.float32(p.alpha), ws.y)
        args = (np.int32(chunks), a["blk_row"], a["cta_blk"], a["seg_ptr"], a["idx"], a["vals"], ws.x,
                np.float32(p.alpha), np.float32(p.beta), ws.y, ws.y)  # (y read and written in place)

        def run_blocks():
            func(launch.grid, launch.block, args, shared_mem=launch.shared)
            if pieces:
                second(second_grid, (256, 1, 1), second_args)

        run_blocks.keep = a
        return run_blocks
    return None


def _cusparse(ws: Workspace):
    from cupyx import cusparse

    A, p = ws.matrix(), ws.p

    def run():
        cusparse.spmv(A, ws.x, y=ws.y, alpha=p.alpha, beta=p.beta)

    return run


def _device_copy(ws: Workspace):
    return device_copy(ws.p.bytes // 2)  # moves the bytes an SpMV must: read and written once


def references() -> list[Reference]:
    return [Reference("cuSPARSE (cupyx)", _cusparse), Reference("device copy", _device_copy, verifiable=False)]


def block_space(max_smem: int) -> Space:
    return Space({"BLOCK": (128, 256, 512, 1024)})


def split_space(max_smem: int) -> Space:
    return Space({"BLOCK": (128, 256, 512), "CHUNK": (32, 64, 128, 256, 512, 1024)})


def row_block_space(max_smem: int) -> Space:
    rows = tuple(r for r in (4096, 8192, 16384, 24576, 32768, 40960, 49152, 57344) if 4 * r <= max_smem)
    return Space({"BLOCK": (256, 512, 1024), "ROWS": rows, "LONG": (256, 512, 1024, 2048, 4096)})


def merge_space(max_smem: int) -> Space:
    return Space({"BLOCK": (128, 256, 512), "IPT": (4, 7, 8, 12, 16)},
                 [("tile in static shared memory", lambda c: 8 * c["BLOCK"] * c["IPT"] + 8 <= 48 * 1024)])


# --- the family: its rungs, one per kernel file -------------------------------------------------

# --- the public operator (simtlab.spmv) -------------------------------------------------------------

PREPARE_BLOCK = 256


def _vectors(name: str, x, y, n: int, ncols: int, options) -> tuple[float, float]:
    """x's and y's shapes against an n x ncols matrix's, and (alpha, beta) from the call's options: a
    ValueError naming what does not fit."""
    if x != (ncols,):
        raise ValueError(f"simtlab.{name}: x has shape {x} but A has {ncols} columns")
    if y is not None and y != (n,):
        raise ValueError(f"simtlab.{name}: y has shape {y} but A has {n} rows")
    alpha, beta = float(options.get("alpha", 1.0)), float(options.get("beta", 0.0))
    if beta != 0.0 and y is None:
        raise ValueError(f"simtlab.{name}: beta is not 0 but no y was given")
    return alpha, beta


def _declare_spmv(shapes, dtype, options, device, vec, build) -> Declared:
    """y = alpha A x + beta y for a CSR matrix as it is, no setup: rung 4 (merge path), which splits
    rows and nonzeros evenly whatever the rows' lengths. The measured rule (run 4c548e, 2^22 rows):
    merge path 1017 / 865 / 2261 GB/s on uniform / power-law / banded rows, lanes-a-row 1144 / 593 /
    1295 - within 12% where rows are alike and 1.5-1.7x ahead where they are not, so every profile
    takes it. (Rungs 5-6 are faster still but need the matrix restructured first: simtlab.spmv_plan
    keeps rung 6's layout for a matrix multiplied often, _declare_prepared.)"""
    row_ptr, cols, vals, x, y = shapes
    ncols = int(options["cols"])
    if len(row_ptr) != 1 or row_ptr[0] < 1 or len(cols) != 1 or vals != cols:
        raise ValueError(f"simtlab.spmv: a CSR matrix is offsets (rows + 1), columns and values (nonzeros each); got "
                         f"{row_ptr}, {cols}, {vals}")
    n, nnz = row_ptr[0] - 1, cols[0]
    alpha, beta = _vectors("spmv", x, y, n, ncols, options)
    if n + nnz >= 2**31:
        raise ValueError(f"simtlab.spmv: rows + nonzeros = {n + nnz}; the merge path counts them in 32 bits")
    rung = FAMILY.rung(4)
    params = rung.params(device.arch)
    tile = params["BLOCK"] * params["IPT"]
    tiles = max(-(-(n + nnz) // tile), 1)
    y_in = (IN, 4) if y is not None else np.int64(0)
    prepare_grid = (min(-(-max(n, tiles + 1) // PREPARE_BLOCK), 65535), 1, 1)
    first = Step(rung, params, Launch(prepare_grid, (PREPARE_BLOCK, 1, 1)),
                 (np.int32(n), (IN, 0), np.int32(tile), np.int32(tiles), np.float32(beta), y_in, (OUT, 0),
                  (SCRATCH, 0)), function="spmv_merge_prepare_into")
    main = Step(rung, params, Launch((tiles, 1, 1), (params["BLOCK"], 1, 1)),
                (np.int32(n), (IN, 0), (IN, 1), (IN, 2), (IN, 3), np.float32(alpha), (SCRATCH, 0), (OUT, 0)))
    return Declared((((n,), dtype),), (first, main), f"{n}x{ncols}, {nnz} nonzeros: {rung.id} ({tiles} tiles)",
                    scratch=(((tiles + 1,), "int32"),), align=4)


# --- a matrix prepared once (simtlab.spmv_plan): rung 6 -----------------------------------------

# The prepared matrix's arrays, in the order the operator takes them (the long rows' two absent
# where there are none), then x and y.
PREPARED = ("blk_row", "cta_blk", "seg_ptr", "idx", "vals", "piece_row", "piece_begin", "row_ptr", "cols", "values")


def prepared_params(arch: str) -> dict:
    """Rung 6's parameters for a prepared matrix on `arch`: its shipped BLOCK, ROWS and LONG."""
    return FAMILY.rung(6).params(arch)


def prepared_layout(row_ptr, cols, values, ncols: int, rows_bound: int, longer_than: int, slots: int):
    """Rung 6's arrays for a CSR matrix, by PREPARED name (row_block_layout's, its indices as int32,
    the long rows' pieces - None where there are none - and the CSR arrays themselves), and the
    column chunks: what the ladder's runner and simtlab.spmv_plan launch."""
    blk_row, cta_blk, seg_ptr, idx, vals, chunks = row_block_layout(row_ptr, cols, values, ncols, rows_bound,
                                                                    longer_than, slots)
    _, piece_row, piece_begin = long_row_pieces(row_ptr, ROW_BLOCK_PIECE, longer_than)
    long_rows = piece_row.size > 0
    arrays = dict(blk_row=blk_row, cta_blk=cta_blk, seg_ptr=seg_ptr, idx=idx.view(np.int32), vals=vals,
                  piece_row=piece_row if long_rows else None, piece_begin=piece_begin if long_rows else None,
                  row_ptr=row_ptr, cols=cols, values=values)
    return {name: arrays[name] for name in PREPARED}, chunks


def _declare_prepared(shapes, dtype, options, device, vec, build) -> Declared:
    """y = alpha A x + beta y for a matrix simtlab.spmv_plan prepared: rung 6's row blocks (each
    block's nonzeros in column order, summed in shared memory; y written once), then the long rows'
    pieces added into it. The measured rule: rung 6 ran at 207 / 174 / 110% of cuSPARSE on uniform /
    power-law / banded rows at 2^22 (run 268049, H200), ahead on every profile, so every prepared
    matrix takes it."""
    *layout, x, y = shapes
    row_ptr, piece_row = layout[PREPARED.index("row_ptr")], layout[PREPARED.index("piece_row")]
    n, ncols, chunks = row_ptr[0] - 1, int(options["cols"]), int(options["chunks"])
    alpha, beta = _vectors("spmv_plan", x, y, n, ncols, options)
    rung = FAMILY.rung(6)
    params = rung.params(device.arch, {"ROWS": int(options["rows"])})
    slots = layout[PREPARED.index("cta_blk")][0] - 1
    at = {name: (IN, i) for i, name in enumerate(PREPARED)}
    xs, y_in = (IN, len(PREPARED)), ((IN, len(PREPARED) + 1) if y is not None else np.int64(0))
    blocks = Step(rung, params, Launch((slots, 1, 1), (params["BLOCK"], 1, 1), block_y_bytes(params["ROWS"], n)),
                  (np.int32(chunks), at["blk_row"], at["cta_blk"], at["seg_ptr"], at["idx"], at["vals"], xs,
                   np.float32(alpha), np.float32(beta), y_in, (OUT, 0)))
    steps, pieces = (blocks,), 0
    if piece_row is not None:  # (a warp a piece, 8 a block)
        pieces = piece_row[0]
        steps += (Step(rung, params, Launch((max(-(-pieces // 8), 1), 1, 1), (256, 1, 1)),
                       (np.int32(pieces), at["piece_row"], at["piece_begin"], at["row_ptr"], at["cols"], at["values"], xs,
                        np.float32(alpha), (OUT, 0)), function="spmv_long_pieces"),)
    return Declared((((n,), dtype),), steps, f"{n}x{ncols} prepared: {rung.id} ({slots} blocks of threads, "
                    f"{layout[PREPARED.index('blk_row')][0] - 1} row blocks of at most {params['ROWS']} rows, {pieces} "
                    "long-row pieces)", align=4)


OPERATORS = (Operator("spmv", ("row_ptr", "cols", "values", "x", "y"), ("float32",), _declare_spmv, frozenset({"y"}),
                      frozen({"row_ptr": "int32", "cols": "int32"})),
             Operator("spmv_prepared", (*PREPARED, "x", "y"), ("float32",), _declare_prepared,
                      frozenset({"piece_row", "piece_begin", "y"}),
                      frozen({name: "int32" for name in PREPARED if name not in ("vals", "values")})))


FAMILY = Family(
    name="spmv",
    title="sparse matrix-vector product, CSR fp32: y = alpha*A@x + beta*y",
    ops=sys.modules[__name__],
    reference="cuSPARSE SpMV (cupyx), and a device copy of the bytes that must move",
    default_sizes=("4194304:uniform", "4194304:powerlaw", "4194304:banded"),
    rungs=(
        Rung("spmv", 1, "scalar", "spmv/01_scalar.cu", "spmv_scalar", ("BLOCK",), frozen({"BLOCK": 256}),
             "one thread a row: a warp's loads 32 rows apart, and it waits for its longest row",
             geometry_scalar),
        Rung("spmv", 2, "vector", "spmv/02_vector.cu", "spmv_vector", ("BLOCK", "VW"), frozen({"BLOCK": 256, "VW": 32}),
             "VW lanes a row (from the mean row length): coalesced reads of a row, a shuffle sum",
             geometry_vector, size_defaults=vector_params, sass_expect=("SHFL",)),
        Rung("spmv", 3, "sell", "spmv/03_sell.cu", "spmv_sell", ("BLOCK",), frozen({"BLOCK": 256}),
             "SELL-32-4096: rows sorted by length, sliced by warp, padded and stored column by column: every "
             "load coalesced, no row pointers, no divergence",
             geometry_sell, capabilities=frozenset({SELL}), space=block_space),
        Rung("spmv", 4, "merge_path", "spmv/04_merge_path.cu", "spmv_merge_path", ("BLOCK", "IPT"),
             frozen({"BLOCK": 256, "IPT": 8}),
             "merge path: equal shares of rows and nonzeros a thread, whatever the row lengths; products staged "
             "in shared memory, cut rows by atomicAdd",
             geometry_merge, capabilities=frozenset({MERGE_PATH}), space=merge_space, sass_expect=("LDS", "BAR")),
        Rung("spmv", 5, "sell_split", "spmv/05_sell_split.cu", "spmv_sell_split", ("BLOCK", "CHUNK"),
             frozen({"BLOCK": 256, "CHUNK": 128}),
             "SELL for rows up to CHUNK nonzeros; longer rows cut into CHUNK-nonzero pieces, a warp a piece, "
             "added by atomicAdd: no warp walks a long row alone",
             geometry_sell_split, capabilities=frozenset({SELL_SPLIT}), space=split_space,
             sass_expect=("SHFL", "RED|REDG"), builds_on=3),
        Rung("spmv", 6, "row_blocks", "spmv/06_row_blocks.cu", "spmv_row_blocks", ("BLOCK",),  # ROWS, LONG: host's
             frozen({"BLOCK": 1024, "ROWS": 32768, "LONG": 1024}),
             "blocks of rows summed in shared memory, each block's nonzeros in column order: neighbouring lanes "
             "gather neighbouring columns of x, so a sector serves every nonzero of the block in it; equal work a "
             "block of threads whatever the row lengths",
             geometry_row_blocks, capabilities=frozenset({ROW_BLOCKS}), space=row_block_space,
             arch_defaults=ROW_BLOCK_ARCH_ROWS,
             sass_expect=("ATOMS", "LDG.128")),
    ),
    metric="gbs",
    check_size="1001:powerlaw",
    operators=OPERATORS,
)
