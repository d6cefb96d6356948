"""The distributed GEMM's partitioning and schedules, run with ranks as threads on the CPU (NumPy
local GEMMs, an in-process communicator): every rank's C block must equal the float64 product."""

import threading

import numpy as np
import pytest

from simtlab.distributed.comm import SoloComm, ThreadComm
from simtlab.distributed.gemm import row_panels, scatter_blocks, summa
from simtlab.distributed.partition import RowPanels, Summa, grid_shape, split


def test_split_and_grid():
    assert split(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert split(2, 4) == [(0, 1), (1, 2), (2, 2), (2, 2)]
    with pytest.raises(ValueError):
        split(5, 0)
    assert [grid_shape(w) for w in (1, 2, 4, 6, 8, 7)] == [(1, 1), (1, 2), (2, 2), (2, 3), (2, 4), (1, 7)]


def test_summa_panels_never_straddle_an_owner():
    plan = Summa(100, 90, 77, 6)  # 2 x 3 grid: K split 3 ways for A, 2 ways for B
    panels = plan.panels()
    assert panels[0][0] == 0 and panels[-1][1] == 77
    assert all(a[1] == b[0] for a, b in zip(panels, panels[1:]))
    for k0, k1, col, row in panels:
        a0, a1 = plan.a_cols[col]
        b0, b1 = plan.b_rows[row]
        assert a0 <= k0 < k1 <= a1 and b0 <= k0 < k1 <= b1
    # every rank receives the panels it does not own: the textbook SUMMA volume
    assert plan.bytes_received(0) == 4 * (50 * (77 - 26) + (77 - 39) * 30)


def _run(world: int, fn):
    comms = ThreadComm.world(world)
    errors = []

    def body(c):
        try:
            fn(c)
        except BaseException as exc:  # surfaced in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(c,)) for c in comms]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors


@pytest.mark.parametrize("world", [1, 2, 3, 4, 6, 8])
@pytest.mark.parametrize("shape", [(97, 61, 53), (8, 8, 8), (3, 200, 5)])
@pytest.mark.parametrize("lookahead", [True, False])
def test_summa_matches_float64(world, shape, lookahead):
    M, N, K = shape
    rng = np.random.default_rng(world)
    A, B = rng.random((M, K)) - 0.5, rng.random((K, N)) - 0.5
    plan = Summa(M, N, K, world)
    blocks = scatter_blocks(plan, A, B)
    C = np.full((M, N), np.nan)

    def rank(c):
        a, b = blocks[c.rank]
        (r0, r1), (c0, c1) = plan.blocks(c.rank)["C"]
        out = np.empty((r1 - r0, c1 - c0))
        summa(plan, c, a, b, out, np, lookahead=lookahead)
        C[r0:r1, c0:c1] = out

    _run(world, rank)
    assert np.allclose(C, A @ B, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("world", [1, 2, 5])
def test_row_panels_match_float64(world):
    M, N, K = 41, 37, 29
    rng = np.random.default_rng(0)
    A, B = rng.random((M, K)), rng.random((K, N))
    plan = RowPanels(M, N, K, world)
    blocks = scatter_blocks(plan, A, B)
    C = np.full((M, N), np.nan)

    def rank(c):
        a, b = blocks[c.rank]
        m0, m1 = plan.rows[c.rank]
        out = np.empty((m1 - m0, N))
        row_panels(plan, c, a, b, out, np)
        C[m0:m1] = out

    _run(world, rank)
    assert np.allclose(C, A @ B, rtol=1e-12)
    if world == 2:  # B's rows split 15 + 14: a rank misses at most K - 14 rows... and at least K - 15
        assert plan.bytes_received() == 4 * (K - 15) * N
    if world == 1:
        assert plan.bytes_received() == 0


def test_solo_world_needs_no_communication():
    A, B = np.ones((4, 3)), np.ones((3, 5))
    C = np.empty((4, 5))
    summa(Summa(4, 5, 3, 1), SoloComm(), A, B, C, np)
    assert (C == 3).all()
    with pytest.raises(ValueError, match="world size 1"):
        SoloComm().broadcast(A, 1, (0, 1))
