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
        out = np.full((r1 - r0, c1 - c0), np.nan)  # (the first panel must write every element)
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
        out = np.full((m1 - m0, N), np.nan)
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
    C = np.full((4, 5), np.nan)
    summa(Summa(4, 5, 3, 1), SoloComm(), A, B, C, np)
    assert (C == 3).all()
    with pytest.raises(ValueError, match="world size 1"):
        SoloComm().broadcast(A, 1, (0, 1))


@pytest.mark.parametrize("world", [1, 3, 4])
def test_summa_on_bf16_torch_tensors(world):
    """The schedules on PyTorch tensors (how bf16 blocks travel: CuPy has no bfloat16), through
    TorchArrays, with bf16 inputs and fp32 sums and C: every rank's block equals the float64 product
    of the bf16-rounded inputs to fp32 accumulation accuracy."""
    torch = pytest.importorskip("torch")
    from simtlab.distributed.gemm import TorchArrays

    M, N, K = 45, 38, 70
    gen = torch.Generator().manual_seed(world)
    A = (torch.rand((M, K), generator=gen) - 0.5).to(torch.bfloat16)
    B = (torch.rand((K, N), generator=gen) - 0.5).to(torch.bfloat16)
    ref = A.double() @ B.double()
    plan = Summa(M, N, K, world)
    blocks = scatter_blocks(plan, A, B)
    C = torch.full((M, N), float("nan"), dtype=torch.float64)

    def local(a, b, c, beta):  # (bf16 products are exact in fp32)
        if beta:
            c += a.float() @ b.float()
        else:
            c.copy_(a.float() @ b.float())

    def rank(comm):
        a, b = blocks[comm.rank]
        (r0, r1), (c0, c1) = plan.blocks(comm.rank)["C"]
        out = torch.full((r1 - r0, c1 - c0), float("nan"), dtype=torch.float32)
        summa(plan, comm, a.contiguous(), b.contiguous(), out, TorchArrays("cpu"), local)
        C[r0:r1, c0:c1] = out.double()

    _run(world, rank)
    assert torch.allclose(C, ref, rtol=0, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_tensor_core_local_gemm_writes_then_accumulates(dtype):
    """The distributed GEMM's tensor-core local GEMM on this GPU: beta 0 writes every element of a
    NaN-filled fp32 block, beta 1 adds the next panel's product; then SUMMA at world size 1 over
    the same blocks. K = 520 and N = 264 are not multiples of the rung's tiles."""
    import cupy

    torch = pytest.importorskip("torch")
    from simtlab.distributed.gemm import TorchArrays, tensor_core_accumulate
    from simtlab.ops import gemm_tc
    from simtlab.verify import compare

    M, N, K = 300, 264, 520
    gen = torch.Generator(device="cuda").manual_seed(5)
    t = getattr(torch, dtype)
    A = (torch.rand((M, 2 * K), generator=gen, device="cuda") - 0.5).to(t)
    B = (torch.rand((2 * K, N), generator=gen, device="cuda") - 0.5).to(t)
    ref = cupy.from_dlpack(A.double() @ B.double())
    tol = gemm_tc.tolerance(gemm_tc.TcProblem(M, N, 2 * K, dtype))
    c = torch.full((M, N), float("nan"), device="cuda")
    tensor_core_accumulate(A[:, :K].contiguous(), B[:K].contiguous(), c, 0.0)
    tensor_core_accumulate(A[:, K:].contiguous(), B[K:].contiguous(), c, 1.0)
    verdict = compare(cupy.from_dlpack(c), ref, tol)
    assert verdict.ok, verdict.reason
    c.fill_(float("nan"))
    summa(Summa(M, N, 2 * K, 1), SoloComm(), A, B, c, TorchArrays(A.device), tensor_core_accumulate)
    verdict = compare(cupy.from_dlpack(c), ref, tol)
    assert verdict.ok, verdict.reason
