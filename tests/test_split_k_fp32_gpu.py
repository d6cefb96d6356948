"""gemm rung 14 (fp32 split-K on the CUDA cores, windowed compensated sums) on the GPU: every tile,
layout, swap and split from 1 to 8 (and 3) with alpha and beta, odd shapes; its error at K = 65536
against SGEMM's; simtlab.gemm reading transposed views in place through it."""

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.gemm, pytest.mark.split]

from test_split_k_gpu import LAYOUTS, _hopper, _operand, _torch  # noqa: E402 (rung 7's GPU tests' helpers)


def _run_rung14(torch, A, B, tile: dict, splits: int, swap: bool, alpha=1.0, beta=0.0, C0=None):
    from simtlab.catalog import family
    from simtlab.device import device_info
    from simtlab.launch import build, prepare
    from simtlab.ops.gemm_tc import split_layout
    from simtlab.ops.split import F32SplitKernel
    from simtlab.ops.gemm_plans import _Shape

    (M, K), N = A.shape, B.shape[1]
    ta, tb = A.stride(0) == 1 and A.stride(1) != 1, B.stride(0) == 1 and B.stride(1) != 1
    shape = _Shape(M, N, K, ta, tb)
    params = {**tile, "SPLITS": splits, **split_layout(shape, swap, 4).params}
    info = device_info(torch.cuda.current_device())
    kernel = F32SplitKernel(build(family("gemm").rung("split_k"), params, info.arch), shape, info, prepare)
    C = C0.clone() if C0 is not None else torch.full((M, N), float("nan"), device="cuda")
    kernel.launch(A.data_ptr(), B.data_ptr(), C.data_ptr(), torch.cuda.current_stream().cuda_stream, alpha, beta)
    return C


@pytest.mark.parametrize("tile", ["128x8", "64x16", "64x32", "64x64", "128x64"])
def test_rung_14_every_tile_layout_and_split(tile):
    from simtlab.ops.gemm_dispatch import FP32_TILES

    torch = _torch()
    _hopper(torch)
    gen = torch.Generator(device="cuda").manual_seed(14)
    for i, (M, N, K) in enumerate([(1, 77, 300), (37, 1, 1000), (129, 65, 517), (200, 24, 40), (7, 300, 8)]):
        layout = LAYOUTS[i % 4]
        A = _operand(torch, M, K, layout[0] == "t", torch.float32, 1, gen)
        B = _operand(torch, K, N, layout[1] == "t", torch.float32, 1, gen)
        C0 = torch.rand(M, N, device="cuda", generator=gen)
        ref = 1.5 * (A.double() @ B.double()) - 0.5 * C0.double()
        for swap in (False, True):
            for splits in (1, 3, 8):
                C = _run_rung14(torch, A, B, FP32_TILES[tile], splits, swap, 1.5, -0.5, C0)
                torch.cuda.synchronize()
                err = float((C.double() - ref).norm() / ref.norm())
                assert not torch.isnan(C).any() and err < 1e-5, (tile, layout, swap, splits, err)


def test_rung_14_is_more_accurate_than_sgemm_at_long_k():
    """K = 65536 (256 x 256 output, inputs in [0, 1)): error against float64 at most SGEMM's."""
    torch = _torch()
    _hopper(torch)
    from simtlab.ops.gemm_dispatch import FP32_TILES

    torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator(device="cuda").manual_seed(65536)
    A = torch.rand(256, 65536, device="cuda", generator=gen)
    B = torch.rand(65536, 256, device="cuda", generator=gen)
    exact = A.double() @ B.double()
    ours = _run_rung14(torch, A, B, FP32_TILES["128x64"], 8, False)
    sgemm = A @ B
    torch.cuda.synchronize()
    e_ours, e_sgemm = (float((x.double() - exact).norm() / exact.norm()) for x in (ours, sgemm))
    assert e_ours <= e_sgemm, (e_ours, e_sgemm)


def test_simtlab_gemm_reads_views_in_place_through_rung_14():
    import simtlab

    torch = _torch()
    _hopper(torch)
    gen = torch.Generator(device="cuda").manual_seed(3)
    for layout in LAYOUTS:
        A = _operand(torch, 33, 515, layout[0] == "t", torch.float32, 1, gen)
        B = _operand(torch, 515, 4099, layout[1] == "t", torch.float32, 1, gen)
        C0 = torch.rand(33, 4099, device="cuda", generator=gen)
        plan = simtlab.gemm_plan(A, B, C0, rung="split_k")
        assert plan.split_k is not None and plan.split_k.params["TC"] == 1, plan.describe()
        C = C0.clone()
        plan(A, B, C, 2.0, 1.0)
        torch.cuda.synchronize()
        ref = 2.0 * (A.double() @ B.double()) + C0.double()
        assert float((C.double() - ref).norm() / ref.norm()) < 1e-5
