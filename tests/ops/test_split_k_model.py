"""Rung 7's data movement on the CPU: a NumPy model of kernels/gemm_tc/07_split_k.cu that follows
its index expressions - chunks written to swizzled shared tiles, ldmatrix (plain and .trans)
reading them back as mma.sync fragments, the m16n8k16 product of those fragments, each cluster
block's share of K and each warp's k16 steps, the parked partial tiles and every block's band of
the sum - for all four layouts, swapped and not, tiles from 32x8 up, on odd shapes. What the GPU
alone can say (timing, races, the hardware's own fragment order) waits for a GPU run; what this
model checks is that the kernel's addressing is consistent with itself and with PTX's documented
fragment layouts."""

import numpy as np
import pytest

from simtlab.ops import gemm_dispatch as gd
from simtlab.ops.gemm_tc import TcProblem, split_layout

pytestmark = pytest.mark.split


def swizzled(nc: int, r: int, c: int) -> int:
    """simtlab::swizzled<NC>(r, c): the element offset of 16-byte chunk c of row r."""
    if nc >= 8:
        return (r * nc + (c ^ (r & 7))) * 8
    return (r * nc + (c ^ ((r // (8 // nc)) & (nc - 1)))) * 8


def load_tile(smem: np.ndarray, base: int, rows: int, cols: int, g: np.ndarray, row0: int, rows_ok: int, col0: int,
              cols_ok: int) -> None:
    """simtlab::load_tile: ROWS x COLS (COLS contiguous) from matrix g at (row0, col0), zeros past
    rows_ok / cols_ok (every chunk; which thread copies it does not change what lands where)."""
    nc = cols // 8
    for i in range(rows * nc):
        r, c = divmod(i, nc)
        gr, gc = row0 + r, col0 + c * 8
        dst = base + swizzled(nc, r, c)
        for e in range(8):
            ok = gr < rows_ok and gc + e < cols_ok
            smem[dst + e] = g[gr, gc + e] if ok else 0.0


def ldmatrix(smem: np.ndarray, addresses: list[int], count: int, trans: bool) -> np.ndarray:
    """ldmatrix.x{count}[.trans]: lane l gives row l % 8 of matrix l // 8; returns regs[lane][i] as
    the pair of 16-bit values thread (g, t) = (lane // 4, lane % 4) receives of matrix i: row g,
    columns 2t, 2t+1 (.trans: rows 2t, 2t+1 of column g)."""
    mats = np.zeros((count, 8, 8))
    for m in range(count):
        for row in range(8):
            a = addresses[8 * m + row]
            mats[m, row] = smem[a:a + 8]
    regs = np.zeros((32, count, 2))
    for lane in range(32):
        g, t = divmod(lane, 4)
        for m in range(count):
            regs[lane, m] = mats[m, 2 * t:2 * t + 2, g] if trans else mats[m, g, 2 * t:2 * t + 2]
    return regs


def mma_16816(acc: np.ndarray, a: np.ndarray, b0: np.ndarray, b1: np.ndarray) -> None:
    """mma.sync.m16n8k16 row.col: the A (16x16) and B (16x8) the warp's fragments hold, per PTX's
    layout (a0: rows g, k 2t..; a1: rows g+8; a2: rows g, k 8+2t..; a3: rows g+8, k 8+2t..; b0: k
    2t.., column g; b1: k 8+2t..), multiplied into the accumulator fragments (c0, c1: row g,
    columns 2t, 2t+1; c2, c3: row g+8)."""
    A, B = np.zeros((16, 16)), np.zeros((16, 8))
    for lane in range(32):
        g, t = divmod(lane, 4)
        A[g, 2 * t:2 * t + 2], A[g + 8, 2 * t:2 * t + 2] = a[lane, 0], a[lane, 1]
        A[g, 8 + 2 * t:10 + 2 * t], A[g + 8, 8 + 2 * t:10 + 2 * t] = a[lane, 2], a[lane, 3]
        B[2 * t:2 * t + 2, g], B[8 + 2 * t:10 + 2 * t, g] = b0[lane], b1[lane]
    D = A @ B
    for lane in range(32):
        g, t = divmod(lane, 4)
        acc[lane] += [D[g, 2 * t], D[g, 2 * t + 1], D[g + 8, 2 * t], D[g + 8, 2 * t + 1]]


def band_elements(split: int, S: int, BM: int, BN: int, TC: bool):
    """(row, column) of the tile's elements that block `split` of S sums and writes, in its threads'
    order: a band of ceil(BM / S) rows, down columns where C is written transposed (TC), else along
    rows (rungs 7 and 14 alike)."""
    band = -(-BM // S)
    r0, rows = split * band, min(BM, split * band + band) - split * band
    for e in range(max(rows, 0) * BN):
        yield r0 + (e % rows if TC else e // BN), e // rows if TC else e % BN


def rung7(A: np.ndarray, B: np.ndarray, P: dict, S: int) -> np.ndarray:
    """The kernel for C = A @ B as its launch takes them: A, B the kernel's operands as stored (TA:
    A stored K x M; TB: B stored N x K), M, N its own (swapped already), C returned as stored (TC:
    N x M)."""
    BM, BN, BK, WM, WN, WK = (P[k] for k in ("BM", "BN", "BK", "WM", "WN", "WK"))
    TA, TB, TC = P["TA"], P["TB"], P["TC"]
    M = A.shape[1] if TA else A.shape[0]
    K = A.shape[0] if TA else A.shape[1]
    N = B.shape[0] if TB else B.shape[1]
    MI, NI, STEPS, WARPS_N = WM // 16, WN // 8, BK // 16, BN // WN
    warps = (BM // WM) * WARPS_N * WK
    LDP = BN + 4
    KT = -(-K // BK)
    C = np.full((N, M) if TC else (M, N), np.nan)
    for by in range(-(-M // BM)):
        for bx in range(-(-N // BN)):
            m0, n0 = by * BM, bx * BN
            parked = np.zeros((S, WK * BM * LDP))
            for split in range(S):
                kt0, kt1 = KT * split // S, KT * (split + 1) // S
                acc = np.zeros((warps, MI, NI, 32, 4))
                for kt in range(kt0, kt1):
                    k0 = kt * BK
                    As, Bs = np.zeros(BM * BK), np.zeros(BK * BN)
                    if TA == 0:
                        load_tile(As, 0, BM, BK, A, m0, M, k0, K)
                    else:
                        load_tile(As, 0, BK, BM, A, k0, K, m0, M)
                    if TB == 0:
                        load_tile(Bs, 0, BK, BN, B, k0, K, n0, N)
                    else:
                        load_tile(Bs, 0, BN, BK, B, n0, N, k0, K)
                    for warp in range(warps):
                        wk = warp % WK
                        wn = (warp // WK) % WARPS_N * WN
                        wm = warp // WK // WARPS_N * WM
                        for s in range(STEPS):
                            if s % WK != wk:
                                continue
                            a = []
                            for i in range(MI):
                                if TA == 0:
                                    addrs = [swizzled(BK // 8, wm + 16 * i + l % 16, 2 * s + l // 16) for l in range(32)]
                                    a.append(ldmatrix(As, addrs, 4, False))
                                else:
                                    addrs = [swizzled(BM // 8, 16 * s + l % 8 + 8 * (l // 16), (wm + 16 * i) // 8 + l // 8 % 2)
                                             for l in range(32)]
                                    a.append(ldmatrix(As, addrs, 4, True))
                            b = [None] * NI
                            for j in range(0, NI, 2):
                                if j + 1 < NI:
                                    if TB == 0:
                                        addrs = [swizzled(BN // 8, 16 * s + l % 16, (wn + 8 * j) // 8 + l // 16) for l in range(32)]
                                        t4 = ldmatrix(Bs, addrs, 4, True)
                                    else:
                                        addrs = [swizzled(BK // 8, wn + 8 * j + l % 8 + 8 * (l // 16), 2 * s + l // 8 % 2)
                                                 for l in range(32)]
                                        t4 = ldmatrix(Bs, addrs, 4, False)
                                    b[j], b[j + 1] = (t4[:, 0], t4[:, 1]), (t4[:, 2], t4[:, 3])
                                else:  # (x2: lanes 0-15 give the addresses; the others' are valid and unused)
                                    if TB == 0:
                                        addrs = [swizzled(BN // 8, 16 * s + l % 16, (wn + 8 * j) // 8) for l in range(32)]
                                        t2 = ldmatrix(Bs, addrs[:16] + addrs[:16], 2, True)
                                    else:
                                        addrs = [swizzled(BK // 8, wn + 8 * j + l % 8, 2 * s + l // 8 % 2) for l in range(32)]
                                        t2 = ldmatrix(Bs, addrs[:16] + addrs[:16], 2, False)
                                    b[j] = (t2[:, 0], t2[:, 1])
                            for i in range(MI):
                                for j in range(NI):
                                    mma_16816(acc[warp, i, j], a[i], *b[j])
                for warp in range(warps):  # the fragments parked: WK partial tiles a block
                    wk = warp % WK
                    wn = (warp // WK) % WARPS_N * WN
                    wm = warp // WK // WARPS_N * WM
                    for i in range(MI):
                        for j in range(NI):
                            for lane in range(32):
                                g, t = divmod(lane, 4)
                                for h in range(2):
                                    at = (wk * BM + wm + 16 * i + g + 8 * h) * LDP + wn + 8 * j + 2 * t
                                    parked[split, at:at + 2] = acc[warp, i, j, lane, 2 * h:2 * h + 2]
            for split in range(S):  # each block's band of rows, summed over the cluster and the warps
                for r, c in band_elements(split, S, BM, BN, TC):
                    gm, gn = m0 + r, n0 + c
                    v = sum(parked[p, (w * BM + r) * LDP + c] for p in range(S) for w in range(WK))
                    if gm < M and gn < N:
                        if TC:
                            C[gn, gm] = v
                        else:
                            C[gm, gn] = v
    return C


def stored(x: np.ndarray, transposed: bool) -> np.ndarray:
    """How an operand lies in memory: row-major, or (a transposed view) its transpose's rows."""
    return np.ascontiguousarray(x.T) if transposed else x


@pytest.mark.parametrize("tile", list(gd.TILES), ids=str)
@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("swap", [False, True], ids=["plain", "swapped"])
def test_the_kernels_addressing_computes_the_product(tile, layout, swap):
    """Every dispatcher tile, every layout, swapped and not, on sizes that are multiples of no tile,
    K split three ways (one split short of slices): the model of the kernel gives A @ B exactly as
    float64 does."""
    rng = np.random.default_rng(sum(map(ord, tile + layout)) + swap)
    M, N, K = (37, 21, 150) if gd.TILES[tile]["BM"] < 128 else (70, 45, 70)
    A = rng.integers(-4, 5, (M, K)).astype(np.float64)  # (small integers: every sum exact)
    B = rng.integers(-4, 5, (K, N)).astype(np.float64)
    p = TcProblem(M, N, K, "bfloat16", 1, "bfloat16", layout)
    L = split_layout(p, swap)
    params = {**gd.TILES[tile], **L.params}
    As, Bs = stored(A, p.ta), stored(B, p.tb)  # (the problem's operands as they lie)
    first, second = (Bs, As) if swap else (As, Bs)  # (swapped: the kernel's A is B's memory, its B A's)
    got = rung7(first, second, params, 3)  # (TC 1 stores the kernel's C^T: that is C, row-major)
    assert got.shape == (M, N) and not np.isnan(got).any()
    np.testing.assert_array_equal(got, A @ B)


MIRRORED = [  # the kernel's expressions this model follows (a change to the kernel must change the model)
    "if constexpr (NC >= 8) return (r * NC + (c ^ (r & 7))) * 8;",
    "else return (r * NC + (c ^ ((r / (8 / NC)) & (NC - 1)))) * 8;",
    "swizzled<BK / 8>(wm + 16 * i + lane % 16, 2 * s + lane / 16)",
    "swizzled<BM / 8>(16 * s + lane % 8 + 8 * (lane / 16), (wm + 16 * i) / 8 + lane / 8 % 2)",
    "swizzled<BN / 8>(16 * s + lane % 16, (wn + 8 * j) / 8 + lane / 16)",
    "swizzled<BK / 8>(wn + 8 * j + lane % 8 + 8 * (lane / 16), 2 * s + lane / 8 % 2)",
    "swizzled<BN / 8>(16 * s + lane % 16, (wn + 8 * j) / 8))",
    "swizzled<BK / 8>(wn + 8 * j + lane % 8, 2 * s + lane / 8 % 2))",
    "const int wk = warp % WK, wn = (warp / WK) % WARPS_N * WN, wm = warp / WK / WARPS_N * WM;",
    "const int kt0 = (int)((long long)KT * split / S), kt1 = (int)((long long)KT * (split + 1) / S);",
    "parked + (wk * BM + wm + 16 * i + g + 8 * h) * LDP + wn + 8 * j + 2 * t",
    "const int band = (BM + (int)S - 1) / (int)S, r0 = (int)split * band, rows = min(BM, r0 + band) - r0;",
    "const int r = r0 + (TC ? e % rows : e / BN), c = TC ? e / rows : e % BN;",
    "(TC ? (size_t)gn * M + gm : (size_t)gm * N + gn)",
]


def missing_from(kernel: str, expressions: list[str]) -> list[str]:
    """The expressions a model mirrors that a kernel file (under kernels/) no longer holds, spacing aside."""
    from simtlab.compile import KERNELS_DIR

    source = " ".join((KERNELS_DIR / kernel).read_text().split())
    return [e for e in expressions if " ".join(e.split()) not in source]


def test_the_model_follows_the_kernel_as_it_stands():
    missing = missing_from("gemm_tc/07_split_k.cu", MIRRORED)
    assert not missing, f"07_split_k.cu changed where this model mirrors it: {missing}"
