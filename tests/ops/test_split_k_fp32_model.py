"""gemm rung 14 on the CPU: a NumPy model of kernels/gemm/14_split_k.cu that follows its index
expressions - chunks staged in registers, stored into the [k][m] and [k][n] slices as they lie or
transposed, each thread's 4-wide fragments multiplied, its sums windowed and folded with Kahan
compensation, the cluster's K split, the parked tile and each block's band, alpha and beta -
for all four layouts, swapped and not, on odd shapes; and the windowed, compensated sums in
float32 against one sequential sum, the reason for them."""

import numpy as np
import pytest

from simtlab.ops import gemm_dispatch as gd
from simtlab.ops.gemm_tc import split_layout
from simtlab.ops.gemm_plans import _Shape
from test_split_k_model import band_elements  # (rung 7's model: the same epilogue order)

pytestmark = pytest.mark.split


def staged(g, rows_total, cols_total, R, CC, row0, col0):
    """Staged<R, CC>::load: the tile's values, zeros outside (every chunk; which thread holds it does
    not change where it lands)."""
    t = np.zeros((R, CC))
    for r in range(R):
        for c in range(CC):
            gr, gc = row0 + r, col0 + c
            if gr < rows_total and gc < cols_total:
                t[r, c] = g[gr, gc]
    return t


def rung14(A, B, P, S, alpha=1.0, beta=0.0, C0=None):
    BM, BN, BK, TM, TN, W = (P[k] for k in ("BM", "BN", "BK", "TM", "TN", "WINDOW"))
    TA, TB, TC = P["TA"], P["TB"], P["TC"]
    M = A.shape[1] if TA else A.shape[0]
    K = A.shape[0] if TA else A.shape[1]
    N = B.shape[0] if TB else B.shape[1]
    TX = BN // TN
    threads = (BM // TM) * TX
    KT = -(-K // BK)
    C = np.array(C0, dtype=float) if C0 is not None else np.full((N, M) if TC else (M, N), np.nan)
    for by in range(-(-M // BM)):
        for bx in range(-(-N // BN)):
            m0, n0 = by * BM, bx * BN
            parked = np.zeros((S, BM, BN + 1))
            for split in range(S):
                kt0, kt1 = KT * split // S, KT * (split + 1) // S
                win, tot, comp = (np.zeros((threads, TM, TN)) for _ in range(3))
                for n_done, kt in enumerate(range(kt0, kt1), start=1):
                    k0 = kt * BK
                    # [k][m]: A staged as it lies (TA 1: K x M rows) or transposed (TA 0: M x K rows)
                    As = staged(A, K, M, BK, BM, k0, m0) if TA else staged(A, M, K, BM, BK, m0, k0).T
                    Bs = staged(B, N, K, BN, BK, n0, k0).T if TB else staged(B, K, N, BK, BN, k0, n0)
                    for tid in range(threads):
                        tx, ty = tid % TX, tid // TX
                        a = As[:, ty * TM:ty * TM + TM]  # (k, i)
                        b = Bs[:, tx * TN:tx * TN + TN]  # (k, j)
                        win[tid] += a.T @ b
                    if n_done % W == 0:
                        y = win - comp
                        t = tot + y
                        comp, tot, win = (t - tot) - y, t, np.zeros_like(win)
                y = win - comp
                t = tot + y
                comp, tot = (t - tot) - y, t
                for tid in range(threads):
                    tx, ty = tid % TX, tid // TX
                    parked[split, ty * TM:ty * TM + TM, tx * TN:tx * TN + TN] = tot[tid] - comp[tid]
            for split in range(S):
                for r, c in band_elements(split, S, BM, BN, TC):
                    gm, gn = m0 + r, n0 + c
                    v = sum(parked[p, r, c] for p in range(S))
                    if gm < M and gn < N:
                        at = (gn, gm) if TC else (gm, gn)
                        C[at] = alpha * v if beta == 0 else beta * C[at] + alpha * v
    return C


@pytest.mark.parametrize("tile", list(gd.FP32_TILES), ids=str)
@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("swap", [False, True], ids=["plain", "swapped"])
def test_the_kernels_addressing_computes_the_product(tile, layout, swap):
    rng = np.random.default_rng(len(tile) * 7 + sum(map(ord, layout)) + swap)
    M, N, K = 69, 13, 150
    A = rng.integers(-4, 5, (M, K)).astype(np.float64)
    B = rng.integers(-4, 5, (K, N)).astype(np.float64)
    C0 = rng.integers(-4, 5, (M, N)).astype(np.float64)
    ta, tb = layout[0] == "t", layout[1] == "t"
    params = {**gd.FP32_TILES[tile], **split_layout(_Shape(M, N, K, ta, tb), swap, 4).params}
    As, Bs = (np.ascontiguousarray(A.T) if ta else A), (np.ascontiguousarray(B.T) if tb else B)
    first, second = (Bs, As) if swap else (As, Bs)
    got = rung14(first, second, params, 3, alpha=2.0, beta=-1.0, C0=C0)  # (TC 1 stores C^T's rows: C itself)
    np.testing.assert_array_equal(got, 2.0 * (A @ B) - C0)


def test_windowed_compensated_sums_lose_less_than_one_sequential_sum():
    """In float32, the order rung 14 sums in (K split in 8, each split's slices of 16 summed
    plainly two at a time, the windows added with Kahan compensation, the 8 partial sums added in
    order) against one sequential sum of all K products (rung 10's): at K = 65536 on products of
    inputs in [0, 1), whose rounding errors do not cancel, an order of magnitude less error."""
    rng = np.random.default_rng(0)
    K, n = 65536, 256
    a = rng.random((n, K), dtype=np.float32)
    b = rng.random((K,), dtype=np.float32)
    prods = (a * b).astype(np.float32)  # (an FMA rounds once; the products' roundings are common to both)
    exact = prods.astype(np.float64).sum(axis=1)
    seq = np.zeros(n, np.float32)
    for k in range(K):
        seq += prods[:, k]
    S, BK, W = 8, 16, 2
    total = np.zeros(n, np.float32)
    for part in np.split(prods, S, axis=1):
        win, tot, comp = (np.zeros(n, np.float32) for _ in range(3))
        for s, piece in enumerate(np.split(part, part.shape[1] // BK, axis=1), start=1):
            for k in range(BK):
                win += piece[:, k]
            if s % W == 0:
                y = win - comp
                t = tot + y
                comp, tot, win = (t - tot) - y, t, np.zeros(n, np.float32)
        total += tot - comp
    err = lambda x: float(np.linalg.norm(x - exact) / np.linalg.norm(exact))  # noqa: E731
    assert err(total) * 10 < err(seq), (err(total), err(seq))
    assert err(total) < 2e-7


MIRRORED = [  # the kernel's expressions this model follows
    "const int idx = tid + i * THREADS, r = idx / (CC / 4), c = idx % (CC / 4) * 4;",
    "s[(c + 0) * LD + r] = v[i].x, s[(c + 1) * LD + r] = v[i].y;",
    "if constexpr (TA) a_st.load(A, M, k0, K, m0, M, tid);",
    "else a_st.load(A, K, m0, M, k0, K, tid);",
    "if constexpr (TB) b_st.load(B, K, n0, N, k0, K, tid);",
    "else b_st.load(B, N, k0, K, n0, N, tid);",
    "a_st.template store<LDA, TA == 0>(As + buf * BK * LDA, tid);",
    "b_st.template store<LDB, TB == 1>(Bs + buf * BK * LDB, tid);",
    "const int tid = threadIdx.x, tx = tid % TX, ty = tid / TX;",
    "const float y = win[i][j] - comp[i][j], t = tot[i][j] + y;",
    "comp[i][j] = (t - tot[i][j]) - y;",
    "if ((kt - kt0 + 1) % WINDOW == 0) fold();",
    "parked[(ty * TM + i) * LDP + tx * TN + j] = tot[i][j] - comp[i][j];",
    "const int r = r0 + (TC ? e % rows : e / BN), c = TC ? e / rows : e % BN;",
    "float* out = C + (TC ? (size_t)gn * M + gm : (size_t)gm * N + gn);",
]


def test_the_model_follows_the_kernel_as_it_stands():
    from test_split_k_model import missing_from  # (rung 7's model test: the same check)

    assert not missing_from("gemm/14_split_k.cu", MIRRORED), "14_split_k.cu changed where this model mirrors it"
