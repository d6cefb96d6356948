"""Rung 7 (split-K in clusters, small tiles, any alignment) on the GPU: every tile the dispatcher
names, splits from 1 to 8 (and an odd 3), swapped and not, all four layouts, odd extents and
misaligned addresses, K from 1 to 10^6, batches, fp32 and 16-bit C - against the float64 product
with outputs poisoned first; then through simtlab.gemm_tc as users call it (the dispatcher's
choice), in CUDA graphs and on streams."""

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.gemm_tc, pytest.mark.split]

LAYOUTS = ("nn", "nt", "tn", "tt")


def _torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU visible to PyTorch")
    return torch


def _hopper(torch):
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("rung 7's K split runs in clusters (compute capability 9.0)")


def _operand(torch, rows, cols, transposed, dtype, batch, gen):
    lead = (batch,) if batch > 1 else ()
    if transposed:
        return _operand(torch, cols, rows, False, dtype, batch, gen).transpose(-1, -2)
    return (torch.rand(*lead, rows, cols, device="cuda", generator=gen) * 2 - 1).to(dtype)


def _run_rung7(torch, A, B, out, tile: dict, splits: int, swap: bool, poison=True):
    """C = A @ B through rung 7 at a tile and split chosen here, as simtlab.gemm_tc launches it."""
    from simtlab.device import device_info
    from simtlab.ops.gemm_dispatch import split_problem_params
    from simtlab.ops.gemm_tc import DT, OUT, TcProblem, split_layout
    from simtlab.ops.split import SplitKernel
    from simtlab.catalog import family
    from simtlab.launch import build, prepare

    names = {torch.bfloat16: "bfloat16", torch.float16: "float16", torch.float32: "float32"}
    batch = A.shape[0] if A.dim() == 3 else 1
    (M, K), N = A.shape[-2:], B.shape[-1]
    layout = ("t" if A.stride(-2) == 1 and A.stride(-1) != 1 else "n") + ("t" if B.stride(-2) == 1 and B.stride(-1) != 1 else "n")
    p = TcProblem(M, N, K, names[A.dtype], batch, names[out], layout)
    params = {**tile, "SPLITS": splits, "DT": DT[p.dtype], "OUT": OUT[p.out], **split_layout(p, swap).params}
    info = device_info(torch.cuda.current_device())
    kernel = SplitKernel(build(family("gemm_tc").rung("split_k"), params, info.arch), p, info, prepare)
    C = torch.full(A.shape[:-2] + (M, N), float("nan"), device="cuda", dtype=out) if poison else \
        torch.empty(A.shape[:-2] + (M, N), device="cuda", dtype=out)
    assert kernel.aligned(A.data_ptr(), B.data_ptr(), C.data_ptr())
    kernel.launch(A.data_ptr(), B.data_ptr(), C.data_ptr(), torch.cuda.current_stream().cuda_stream)
    return C, p


def _check(torch, C, A, B, p):
    from simtlab.ops import gemm_tc

    ref = A.double() @ B.double()
    assert not torch.isnan(C).any(), "an element was never written (NaN poison left)"
    err = float((C.double() - ref).norm() / ref.norm())
    assert err <= gemm_tc.tolerance(p), (p.label, err)


@pytest.mark.parametrize("tile", ["32x8", "64x8", "64x16", "64x32", "64x64", "128x64", "128x128"])
@pytest.mark.parametrize("swap", [False, True], ids=["plain", "swapped"])
def test_every_tile_and_split_on_odd_shapes(tile, swap):
    """Each named tile, S = 1, 3 and 8, each layout, sizes that are multiples of no tile and K that
    leaves some splits no slice at all."""
    from simtlab.ops.gemm_dispatch import TILES

    torch = _torch()
    _hopper(torch)
    gen = torch.Generator(device="cuda").manual_seed(7)
    shapes = [(1, 77, 300), (37, 1, 1000), (129, 65, 517), (200, 24, 40), (7, 300, 8)]
    for i, (M, N, K) in enumerate(shapes):
        layout = LAYOUTS[i % 4]
        dtype = (torch.bfloat16, torch.float16)[i % 2]
        A = _operand(torch, M, K, layout[0] == "t", dtype, 1, gen)
        B = _operand(torch, K, N, layout[1] == "t", dtype, 1, gen)
        for splits in (1, 3, 8):
            out = (torch.float32, dtype)[splits % 2]
            C, p = _run_rung7(torch, A, B, out, TILES[tile], splits, swap)
            torch.cuda.synchronize()
            _check(torch, C, A, B, p)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_row_alignments_16_8_4_and_2_bytes(layout):
    """Extents that are multiples of 8, 4, 2 and 1 elements: each operand's copies 16, 8, 4 or 2
    bytes wide (AV, BV), read where they lie."""
    from simtlab.ops.gemm_dispatch import TILES

    torch = _torch()
    _hopper(torch)
    gen = torch.Generator(device="cuda").manual_seed(8)
    for M, N, K in ((96, 64, 136), (92, 60, 132), (90, 58, 130), (91, 59, 131)):
        A = _operand(torch, M, K, layout[0] == "t", torch.bfloat16, 1, gen)
        B = _operand(torch, K, N, layout[1] == "t", torch.bfloat16, 1, gen)
        for swap in (False, True):
            C, p = _run_rung7(torch, A, B, torch.bfloat16, TILES["64x32"], 2, swap)
            torch.cuda.synchronize()
            _check(torch, C, A, B, p)


def test_batches_split_in_clusters():
    from simtlab.ops.gemm_dispatch import TILES

    torch = _torch()
    _hopper(torch)
    gen = torch.Generator(device="cuda").manual_seed(9)
    A = _operand(torch, 33, 700, False, torch.float16, 5, gen)
    B = _operand(torch, 700, 19, True, torch.float16, 5, gen)
    for splits in (1, 4):
        C, p = _run_rung7(torch, A, B, torch.float16, TILES["64x16"], splits, False)
        torch.cuda.synchronize()
        _check(torch, C, A, B, p)


@pytest.mark.parametrize("M, N, K", [(64, 48, 1), (1, 1, 1), (3, 5, 1_000_000), (1, 4096, 4096), (4096, 1, 4096),
                                     (8, 512, 131_072), (1000, 1000, 17)], ids=lambda v: str(v))
def test_the_public_call_on_the_issues_edge_shapes(M, N, K):
    """simtlab.gemm_tc as users call it (the dispatcher's choice), and rung 7 by name (at the tile
    and split its rule gives), on K = 1, K = 10^6, one row, one column, long K: correct in every
    layout, C poisoned first."""
    import simtlab
    from simtlab.ops.gemm_tc import TcProblem

    torch = _torch()
    gen = torch.Generator(device="cuda").manual_seed(M + N + K)
    rungs = ("best", "split_k") if torch.cuda.get_device_capability() >= (9, 0) else ("best",)
    for layout in LAYOUTS:
        A = _operand(torch, M, K, layout[0] == "t", torch.bfloat16, 1, gen)
        B = _operand(torch, K, N, layout[1] == "t", torch.bfloat16, 1, gen)
        for rung in rungs:
            C = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            simtlab.gemm_tc(A, B, C, rung=rung)
            torch.cuda.synchronize()
            _check(torch, C, A, B, TcProblem(M, N, K, "bfloat16", 1, "bfloat16", layout))


def test_misaligned_addresses_run_on_the_two_byte_build():
    """Operands that start one element into a buffer: the plan made for aligned ones takes its
    2-byte build for them (no copies), and the result is right."""
    import simtlab

    torch = _torch()
    _hopper(torch)
    M, N, K = 24, 2048, 1032
    bufA = torch.rand(M * K + 1, device="cuda").to(torch.bfloat16)
    bufB = torch.rand(K * N + 1, device="cuda").to(torch.bfloat16)
    A0, B0 = bufA[: M * K].view(M, K), bufB[: K * N].view(K, N)
    A1, B1 = bufA[1:].view(M, K), bufB[1:].view(K, N)
    plan = simtlab.gemm_tc_plan(A0, B0, out_dtype="bfloat16", rung="split_k")
    for A, B in ((A0, B0), (A1, B1), (A0, B1)):
        C = plan(A, B)
        torch.cuda.synchronize()
        from simtlab.ops.gemm_tc import TcProblem

        _check(torch, C, A, B, TcProblem(M, N, K, "bfloat16", 1, "bfloat16"))


def test_split_launches_capture_in_a_cuda_graph_and_follow_the_stream():
    import simtlab

    torch = _torch()
    _hopper(torch)
    M, N, K = 16, 4096, 4096  # a decode step against a weight (split, swapped)
    x = torch.empty(M, K, device="cuda", dtype=torch.bfloat16)
    w = torch.empty(N, K, device="cuda", dtype=torch.bfloat16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        plan = simtlab.gemm_tc_plan(x, w.T, out_dtype="bfloat16", rung="split_k")
        assert plan.params["SPLITS"] > 1 and plan.params["TC"] == 1, plan.describe()
        simtlab.gemm_tc(x, w.T, out_dtype="bfloat16", rung="split_k")
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = simtlab.gemm_tc(x, w.T, out_dtype="bfloat16", rung="split_k")
    for seed in (1, 2):
        torch.manual_seed(seed)
        x.copy_(torch.rand(M, K, device="cuda") * 2 - 1)
        w.copy_(torch.rand(N, K, device="cuda") * 2 - 1)
        graph.replay()
        torch.cuda.synchronize()
        from simtlab.ops.gemm_tc import TcProblem

        _check(torch, y, x, w.T, TcProblem(M, N, K, "bfloat16", 1, "bfloat16", "nt"))
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        z = simtlab.gemm_tc(x, w.T, out_dtype="bfloat16", rung="split_k")
    s.synchronize()
    assert torch.equal(z, y)  # (the same sums in the same order: a split's result is deterministic)


def test_the_plan_says_what_it_runs_and_why():
    import simtlab

    torch = _torch()
    _hopper(torch)
    a = torch.rand(8, 4096, device="cuda").to(torch.bfloat16)
    b = torch.rand(4096, 4096, device="cuda").to(torch.bfloat16)
    text = simtlab.gemm_tc_plan(a, b, out_dtype="bfloat16").describe()
    assert "gemm_tc/0" in text and "table" in text, text  # (the table's pick, or rung 6 for want of a table)
    text = simtlab.gemm_tc_plan(a, b, out_dtype="bfloat16", rung="split_k").describe()
    assert "gemm_tc/07_split_k" in text and "SPLITS" in text and "asked for" in text, text
    big = torch.rand(4096, 4096, device="cuda").to(torch.bfloat16)
    assert "gemm_tc/06_wgmma_cluster" in simtlab.gemm_tc_plan(big, b).describe()
