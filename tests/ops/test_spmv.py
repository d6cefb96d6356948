"""The SpMV family on the CPU: matrix classes, sizes, bytes, geometry, and every rung's build."""

import numpy as np
import pytest

from simtlab.catalog import family
from simtlab.launch import build
from simtlab.ops import spmv


def test_classes_fix_the_row_lengths():
    assert spmv.parse_size("1000") == spmv.SpmvProblem(1000, "uniform")
    assert spmv.parse_size("2^10:banded").n == 1024
    u, b = spmv.SpmvProblem(1000, "uniform"), spmv.SpmvProblem(1000, "banded")
    assert u.nnz == 16000 and u.max_row == 16 and u.label == "1000:uniform"
    assert b.max_row == 27 and b.nnz == 27 * 1000 - 2 * sum(range(1, 14))  # the corners' missing bands
    d = spmv.SpmvProblem(777, "dense")
    lengths = spmv.row_lengths("dense", 777)
    assert d.nnz == 777 and lengths[388] == 777 and np.count_nonzero(lengths) == 1
    s = spmv.row_lengths("sparse", 10000)
    assert s.min() == 0 and s.max() == 3 and 0.2 < np.mean(s == 0) < 0.3
    p = spmv.row_lengths("powerlaw", 1 << 20)
    assert p.min() >= spmv.POWERLAW_SCALE and p.max() > 100 * p.mean()  # a heavy tail
    assert np.array_equal(p, spmv.row_lengths("powerlaw", 1 << 20))  # the same matrix every time
    assert spmv.SpmvProblem(1, "uniform").nnz == 1  # 1 x 1


def test_bad_sizes_are_named():
    with pytest.raises(ValueError, match="matrix class 'diagonal'"):
        spmv.parse_size("100:diagonal")
    with pytest.raises(ValueError, match="must be >= 1"):
        spmv.parse_size("0")
    with pytest.raises(ValueError, match="below 2\\^31"):
        spmv.SpmvProblem(200_000_000, "uniform")


def test_bytes_flops_and_tolerance():
    p = spmv.SpmvProblem(1000, "uniform")
    assert p.flops == 2 * 16000 and p.bytes == 8 * 16000 + 4 * 1001 + 4 * 1000 + 4 * 1000
    assert spmv.SpmvProblem(1000, "uniform", beta=0.5).bytes == p.bytes + 4 * 1000
    assert spmv.tolerance(spmv.SpmvProblem(1000, "dense")) > spmv.tolerance(p) > 0
    for r in family("spmv").rungs:
        assert r.requested_bytes(r.params("sm_90"), p) >= p.bytes


def test_geometry_covers_rows_and_the_merge_path():
    fam = family("spmv")
    p = spmv.SpmvProblem(1001, "powerlaw")
    scalar, vector, sell, merge, split, blocks = fam.rungs
    assert scalar.geometry(scalar.params(), p).blocks * 256 >= p.n
    vw = spmv.vector_params(p)["VW"]
    assert vw in (2, 4, 8, 16, 32) and vw >= min(32, p.nnz / p.n)
    assert spmv.vector_params(spmv.SpmvProblem(1000, "sparse"))["VW"] == 2
    assert vector.geometry({"BLOCK": 256, "VW": vw}, p).blocks * 256 >= p.n * vw
    assert sell.geometry(sell.params(), p).blocks * 256 >= 1024  # 32 slices of 32 rows
    L = merge.geometry(merge.params(), p)
    assert L.blocks == -(-(p.n + p.nnz) // 2048) and (L.blocks - 1) * 2048 < p.n + p.nnz
    lengths = spmv.row_lengths("powerlaw", 1001)
    pieces, short = spmv.split_counts(p, 64)
    assert short == np.sum(lengths <= 64) and pieces == np.sum(-(-lengths[lengths > 64] // 64)) and pieces > 0
    assert split.geometry({"BLOCK": 256, "CHUNK": 64}, p).blocks == -(-pieces // 8) + -(-(-(-short // 32) * 32) // 256)
    big = spmv.SpmvProblem(1 << 22, "powerlaw")
    L = blocks.geometry(blocks.params("sm_90"), big)  # 128 KiB of y a block: one a SM, 132 on an H200
    assert L.shared == 4 * 32768 and L.blocks == 132 and L.threads == 1024
    L = blocks.geometry({"BLOCK": 256, "ROWS": 16384}, big)  # 64 KiB: three a SM
    assert L.shared == 65536 and L.blocks == 3 * 132
    L = blocks.geometry(blocks.params("sm_90"), p)  # a small y: only its rows, and no idle blocks
    assert L.shared == 4 * 1004 and L.blocks == -(-p.nnz // 4096)


class _Ws:
    """A workspace's arrays as NumPy (the SELL and piece builders run on either library)."""

    def __init__(self, size: str):
        self.p = spmv.parse_size(size)
        lengths = spmv.row_lengths(self.p.kind, self.p.n)
        self.row_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        rng = np.random.default_rng(3)
        self.cols = rng.integers(0, self.p.n, self.p.nnz).astype(np.int32)
        self.vals = rng.random(self.p.nnz).astype(np.float32) + 0.5
        self.x = rng.random(self.p.n).astype(np.float32)

    def product(self, rows=None):
        y = np.zeros(self.p.n)
        r = np.repeat(np.arange(self.p.n), np.diff(self.row_ptr))
        np.add.at(y, r, self.vals.astype(np.float64) * self.x[self.cols])
        return y


@pytest.mark.parametrize("size,limit", [("3001:powerlaw", 64), ("3001:powerlaw", None), ("777:dense", 512),
                                        ("1001:sparse", 2), ("1:uniform", 512)])
def test_sell_of_the_short_rows_and_pieces_of_the_long_ones_cover_every_nonzero_once(size, limit):
    """Walk the structures as rungs 3 and 5 do (in NumPy) and get the CSR product back."""
    ws = _Ws(size)
    slice_ptr, cols, vals, perm = spmv.sell_arrays(ws, limit=limit)
    y = np.zeros(ws.p.n)
    for i, r in enumerate(perm):
        s, lane = divmod(i, 32)
        width = (slice_ptr[s + 1] - slice_ptr[s]) // 32
        k = slice_ptr[s] + lane + 32 * np.arange(width)
        if r >= 0:
            y[r] = np.sum(np.where(cols[k] >= 0, vals[k].astype(np.float64) * ws.x[np.maximum(cols[k], 0)], 0.0))
        else:
            assert np.all(cols[k] < 0)  # (a padding row reads nothing)
    lengths = np.diff(ws.row_ptr)
    short = lengths <= (limit if limit is not None else lengths.max())
    assert sorted(perm[perm >= 0]) == list(np.nonzero(short)[0])  # every short row once, no long one
    if limit is not None:
        assert (slice_ptr[1:] - slice_ptr[:-1]).max() <= 32 * limit
        long_rows, piece_row, piece_begin = spmv.long_row_pieces(ws.row_ptr, limit)
        assert list(long_rows) == list(np.nonzero(~short)[0])
        for r, b in zip(piece_row, piece_begin):
            e = min(b + limit, ws.row_ptr[r + 1])
            assert ws.row_ptr[r] <= b < e
            y[r] += np.sum(ws.vals[b:e].astype(np.float64) * ws.x[ws.cols[b:e]])
        sizes = np.minimum(piece_begin + limit, ws.row_ptr[piece_row + 1]) - piece_begin
        assert sizes.sum() == lengths[~short].sum()  # the pieces tile the long rows exactly
    assert np.allclose(y, ws.product(), rtol=1e-6)


@pytest.mark.parametrize("rung", family("spmv").rungs, ids=lambda r: r.name)
def test_every_rung_builds_spill_free(rung):
    inst = build(rung, rung.params("sm_90"), "sm_90")
    res = inst.resources(None)
    assert res.spill_bytes == 0 and res.stack_frame == 0
    if rung.name == "merge_path":
        assert res.shared_static == 8 * 2048 + 8  # the staged products and row ends of a 2048-item tile


def test_tolerance_scales_with_the_cancellation_of_the_data():
    """With a workspace, the bound grows by || |A| |x| || / || A x ||: a dense row whose terms cancel
    gets room, a well-conditioned product none to speak of (arrays as NumPy: the formula, no GPU)."""

    class Ws:  # one row [1, 1, 1] against x = [1, -1, 1e-3]: terms of 1 summing to 1e-3
        vals = np.array([1.0, 1.0, 1.0], dtype=np.float32)
        cols = np.array([0, 1, 2], dtype=np.int32)
        row_ptr = np.array([0, 3, 3, 3], dtype=np.int32)
        x = np.array([1.0, -1.0, 1e-3], dtype=np.float32)
        y0 = None

    p = spmv.SpmvProblem(3, "dense")
    cancelled = spmv.tolerance(p, Ws())
    assert cancelled == pytest.approx(spmv.tolerance(p) * 2.001 / 1e-3, rel=1e-3)
    Ws.x = np.array([1.0, 1.0, 1.0], dtype=np.float32)  # no cancellation: the static bound
    assert spmv.tolerance(p, Ws()) == pytest.approx(spmv.tolerance(p))
    Ws.y0 = np.array([0.0, 2.0, 0.0], dtype=np.float32)  # beta * y0 counts in both norms
    q = spmv.SpmvProblem(3, "dense", beta=0.5)
    assert spmv.tolerance(q, Ws()) == pytest.approx(spmv.tolerance(q))


@pytest.mark.parametrize("kind,n", [("powerlaw", 3001), ("uniform", 17), ("sparse", 1001), ("uniform", 1000003)])
def test_columns_are_distinct_and_sorted_in_every_row(kind, n):
    lengths = spmv.row_lengths(kind, n)
    rows = np.repeat(np.arange(n, dtype=np.int64), lengths)
    row_ptr = np.concatenate([[0], np.cumsum(lengths)])
    within = np.arange(rows.size, dtype=np.int64) - row_ptr[rows]
    cols = spmv.distinct_columns(rows, within, np.random.default_rng(1).integers(0, n, n), n)
    assert cols.min() >= 0 and cols.max() < n
    steps = np.diff(cols)
    inside = np.diff(rows) == 0  # neighbours in the same row
    assert np.all(steps[inside] > 0)  # strictly increasing: sorted, no duplicates


def _layout(ws, *args):
    """Rung 6's copy of a workspace's (square) A."""
    return spmv.row_block_layout(ws.row_ptr, ws.cols, ws.vals, ws.p.n, *args)


def _walk_row_blocks(blk_row, cta_blk, seg_ptr, idx, vals, chunks, x, n):
    """Rung 6 as its kernel walks it, in NumPy: each block of threads its row blocks, each group's
    chunk by search; a row block's sums written once into y (alpha 1, beta 0)."""
    y = np.full(n, np.nan)
    for cta in range(cta_blk.size - 1):
        for b in range(cta_blk[cta], cta_blk[cta + 1]):
            r0, r1 = blk_row[b], blk_row[b + 1]
            seg = seg_ptr[b * chunks:(b + 1) * chunks + 1]
            acc = np.zeros(r1 - r0)
            for g in range(seg[0], seg[-1]):
                c = int(np.searchsorted(seg[:-1], g, side="right")) - 1
                for k, v in zip(idx[4 * g:4 * g + 4], vals[4 * g:4 * g + 4]):
                    if k != spmv.PAD_ENTRY:
                        acc[k >> 16] += float(v) * x[(c << 16) + (k & 0xFFFF)]
            assert np.all(np.isnan(y[r0:r1]))  # each row written by one block of threads, once
            y[r0:r1] = acc
    return y


@pytest.mark.parametrize("size,rows,slots,long", [("3001:powerlaw", 512, 7, None), ("3001:powerlaw", 4096, 1, 256),
                                                  ("777:dense", 100, 5, None), ("777:dense", 100, 5, 256),
                                                  ("1001:sparse", 64, 13, 256), ("1:uniform", 57344, 3, 256),
                                                  ("1000:banded", 333, 4, 256),
                                                  ("70001:sparse", 8192, 9, 256)])  # two column chunks
def test_row_blocks_cover_every_nonzero_once_in_column_order(size, rows, slots, long):
    """Rung 6's copy of A, walked as its kernel does, and the long rows' pieces give the CSR product
    back; blocks tile the rows, none over `rows`, each owned by one block of threads; within a row
    block the columns ascend; chunks are padded to whole windows; no long row is left in the blocks."""
    ws = _Ws(size)
    blk_row, cta_blk, seg_ptr, idx, vals, chunks = _layout(ws, rows, long, slots)
    blocks = blk_row.size - 1
    assert blk_row[0] == 0 and blk_row[-1] == ws.p.n and np.all(np.diff(blk_row) > 0)
    assert np.all(np.diff(blk_row) <= rows) and chunks == -(-ws.p.n // 65536)
    assert cta_blk.size == slots + 1 and cta_blk[0] == 0 and cta_blk[-1] == blocks and np.all(np.diff(cta_blk) >= 0)
    assert seg_ptr.dtype == np.int32 and seg_ptr[0] == 0 and np.all(np.diff(seg_ptr) >= 0)
    lengths = np.diff(ws.row_ptr)
    short = lengths <= (long if long is not None else lengths.max())
    real = idx != spmv.PAD_ENTRY
    assert real.sum() == lengths[short].sum() and np.all(vals[~real] == 0)
    assert np.all(seg_ptr % 32 == 0)  # whole windows: a warp's 32 groups
    order = idx.reshape(-1, 32, 4).transpose(0, 2, 1).reshape(-1)  # each window as its gathers read it
    for b in range(blocks):  # columns ascend within a block (chunk by chunk, low bits within one)
        lo, hi = 4 * seg_ptr[b * chunks], 4 * seg_ptr[(b + 1) * chunks]
        cols = [(c << 16) + (k & 0xFFFF) for c in range(chunks)
                for k in order[4 * seg_ptr[b * chunks + c]:4 * seg_ptr[b * chunks + c + 1]] if k != spmv.PAD_ENTRY]
        assert len(cols) == real[lo:hi].sum() and cols == sorted(cols)
        in_block = idx[lo:hi][real[lo:hi]] >> 16
        assert np.all(in_block < blk_row[b + 1] - blk_row[b]) and np.all(short[blk_row[b] + in_block])
    y = _walk_row_blocks(blk_row, cta_blk, seg_ptr, idx, vals, chunks, ws.x, ws.p.n)
    if long is not None:
        _, piece_row, piece_begin = spmv.long_row_pieces(ws.row_ptr, spmv.ROW_BLOCK_PIECE, long)
        assert sorted(set(piece_row)) == list(np.nonzero(~short)[0])
        for r, b in zip(piece_row, piece_begin):
            e = min(b + spmv.ROW_BLOCK_PIECE, ws.row_ptr[r + 1])
            y[r] += np.sum(ws.vals[b:e].astype(np.float64) * ws.x[ws.cols[b:e]])
    assert np.allclose(y, ws.product(), rtol=1e-6)


@pytest.mark.parametrize("n,rows,slots", [(4194304, 32768, 132), (1000, 64, 7), (5, 1, 3), (100003, 8192, 396)])
def test_row_blocks_share_the_work_and_keep_under_the_row_bound(n, rows, slots):
    """Equal shares of the work (a block of threads' blocks within a few rows' work of its share),
    whatever the work's shape; no block over `rows` rows."""
    rng = np.random.default_rng(n)
    for work in (np.ones(n, dtype=np.int64), rng.integers(1, 40, n), 1 + (rng.random(n) < 0.01) * 1000):
        blk_row, cta_blk = spmv.row_blocks(work, rows, slots)
        assert blk_row[0] == 0 and blk_row[-1] == n and np.all(np.diff(blk_row) > 0) and np.all(np.diff(blk_row) <= rows)
        before = np.concatenate([[0], np.cumsum(work)])
        owned = before[blk_row[cta_blk[1:]]] - before[blk_row[cta_blk[:-1]]]
        share = before[-1] / slots
        biggest_block = np.max(before[blk_row[1:]] - before[blk_row[:-1]])
        assert owned.sum() == before[-1] and np.all(np.abs(owned - share) <= biggest_block + 1)


def test_row_blocks_refuse_blocks_a_16_bit_row_cannot_name():
    with pytest.raises(spmv.LaunchError, match="1..57344"):
        _layout(_Ws("1000:uniform"), 65536)


def test_row_blocks_refuse_a_long_bound_under_a_piece():
    with pytest.raises(spmv.LaunchError, match="LONG 100: at least a piece"):
        _layout(_Ws("1000:uniform"), 1024, 100)


def test_row_blocks_one_build_serves_every_row_bound_and_long_bound():
    """ROWS and LONG shape the host's arrays, not the kernel: every pair of them is one cubin."""
    rung = family("spmv").rung("row_blocks")
    paths = {build(rung, {"ROWS": r, "LONG": long}, "sm_90").cubin.path for r in (8192, 32768) for long in (256, 4096)}
    assert len(paths) == 1
