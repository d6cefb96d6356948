"""The fp32 ladder's rung 13 (three fp16 products, rows and columns scaled) on the GPU: accuracy no
worse than cuBLAS SGEMM's on the inputs that stress the scaling (N(0,1), positive sums, rows 2^60
apart, values near the smallest normal), Inf and NaN where SGEMM gives them, simtlab.gemm(precision=
"f16x3") at odd sizes with alpha and beta. Odd sizes on a poisoned C through the ladder's runner:
tests/test_tf32x3_gpu.py, beside rung 11."""

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.gemm]


def _rung_13(A, B):
    import torch

    from simtlab.catalog import family
    from simtlab.device import device_info
    from simtlab.launch import build, prepare
    from simtlab.ops import f16x3, gemm

    M, K = A.shape
    N = B.shape[1]
    rung, info = family("gemm").rung("f16x3"), device_info()
    params = f16x3.size_defaults(gemm.GemmProblem(M, N, K), info)
    k = f16x3.F16x3Gemm(build(rung, params, info.arch), M, N, K, info, prepare)
    C = torch.empty(M, N, device=A.device)
    scratch = torch.empty(-(-k.parts_bytes // 4), device=A.device)
    k.run(A.data_ptr(), K, B.data_ptr(), N, C.data_ptr(), 1.0, 0.0, scratch.data_ptr(),
          torch.cuda.current_stream().cuda_stream)
    return C


@pytest.mark.parametrize("kind", ["normal", "uniform", "rows 2^+-30", "tiny A", "tiny B"])
def test_rung_13_error_at_most_sgemms(kind, needs_sm90):
    """Against float64 on the same inputs, the relative Frobenius error of rung 13 is at most cuBLAS
    SGEMM's (torch.mm, TF32 off): the scales keep every row's values within fp16's range however
    far apart the rows are, or however near the smallest normal fp32."""
    torch = pytest.importorskip("torch")
    needs_sm90("rung 13")
    g = torch.Generator(device="cuda").manual_seed(11)
    M, N, K = 2048, 2048, 4096
    if kind == "uniform":
        A, B = torch.rand(M, K, device="cuda", generator=g), torch.rand(K, N, device="cuda", generator=g)
    elif kind.startswith("tiny"):  # one operand in [2^-125, 2^-124), the other in [0.5, 1)
        A = (1 + torch.rand(M, K, device="cuda", generator=g)) * 2.0 ** -125
        B = 0.5 + torch.rand(K, N, device="cuda", generator=g) / 2
        if kind == "tiny B":
            A, B = B.T.contiguous(), A.T.contiguous()
    else:
        A, B = torch.randn(M, K, device="cuda", generator=g), torch.randn(K, N, device="cuda", generator=g)
        if kind == "rows 2^+-30":
            A *= torch.where(torch.arange(M, device="cuda") % 2 == 0, 2.0 ** 30, 2.0 ** -30)[:, None]
    ref = A.double() @ B.double()
    torch.backends.cuda.matmul.allow_tf32 = False
    sgemm = float(((A @ B).double() - ref).norm() / ref.norm())
    ours = float((_rung_13(A, B).double() - ref).norm() / ref.norm())
    assert ours <= sgemm, (kind, ours, sgemm)


def test_rung_13_gives_inf_and_nan_where_sgemm_does(needs_sm90, nonfinite_as_sgemm):
    """Infinities and NaNs in A (B finite) set no scale: the same entries of C are infinite or NaN
    as in SGEMM's C, with the same signs; the finite ones agree."""
    pytest.importorskip("torch")
    needs_sm90("rung 13")
    nonfinite_as_sgemm(_rung_13)


@pytest.mark.api
@pytest.mark.parametrize("size", ["1x1x1", "127x129x65", "300x264x520", "1000x1013x37", "257x250x4099", "1024x1024x1024"])
def test_gemm_f16x3_call_matches_float64(size, needs_sm90):
    """simtlab.gemm(precision="f16x3") as a user calls it: a new C, then alpha and beta into a given
    C, and into a C that starts off a 16-byte boundary (the register epilogue); K < 64 sums in
    float64. Within the fp32 family's tolerance of the float64 product each time."""
    import simtlab
    from simtlab.ops import gemm

    torch = pytest.importorskip("torch")
    needs_sm90("rung 13")
    M, N, K = map(int, size.split("x"))
    g = torch.Generator(device="cuda").manual_seed(M + N + K)
    A, B = torch.randn(M, K, device="cuda", generator=g), torch.randn(K, N, device="cuda", generator=g)
    C0 = torch.randn(M, N, device="cuda", generator=g)
    ref = A.double() @ B.double()
    tol = gemm.tolerance(gemm.GemmProblem(M, N, K))

    def err(C, want):
        return float((C.double() - want).norm() / want.norm())

    assert err(simtlab.gemm(A, B, precision="f16x3"), ref) <= tol
    C = C0.clone()
    simtlab.gemm(A, B, C, alpha=-0.75, beta=1.5, precision="f16x3")
    assert err(C, -0.75 * ref + 1.5 * C0.double()) <= tol
    flat = torch.empty(M * N + 1, device="cuda")
    Cs = flat[1:].view(M, N)  # (4 bytes past a 16-byte boundary)
    Cs.copy_(C0)
    simtlab.gemm(A, B, Cs, alpha=2.0, beta=-1.0, precision="f16x3")
    assert err(Cs, 2.0 * ref - C0.double()) <= tol
