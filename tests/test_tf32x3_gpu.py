"""The fp32 ladder's rungs 11 and 12 (3xTF32 on the tensor cores: Hopper's, and the sm_80 path)
and simtlab.gemm(precision="tf32x3") on the GPU: odd sizes, alpha and beta, a poisoned C (rung 13's
too: the same split over fp16 parts), accuracy no worse than cuBLAS SGEMM's on the same inputs, Inf
and NaN as SGEMM gives them, the caller's stream."""

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.gemm, pytest.mark.api]


def _needs(rung: str, needs_sm90) -> None:
    """Rung 11 ("best" on Hopper) needs sm_90; rung 12 (tf32x3_mma) sm_80 or later."""
    from simtlab.device import device_info

    if rung == "best":
        needs_sm90("rung 11")
    elif device_info().compute_capability < (8, 0):
        pytest.skip("rung 12 (mma.sync tf32) runs on sm_80 and later")


RUNGS = ["best", "tf32x3_mma"]  # rung 11 on Hopper; rung 12 (asked for by name there)


@pytest.mark.parametrize("size", ["1x1x1", "127x129x65", "300x264x520", "1000x1013x37", "64x64x1", "257x250x4099",
                                  "2048x2048x2048"])
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (-0.75, 1.5)])
@pytest.mark.parametrize("name", ["tf32x3", "f16x3"], ids=["rung_11", "rung_13"])
def test_split_rungs_match_float64_on_a_poisoned_c(name, size, alpha, beta, needs_sm90, poisoned_error):
    """Rung 11 (TF32 parts) and rung 13 (fp16 parts, rows and columns scaled): the ladder's runner
    (the split kernels - rung 13's maxima pass first - and the main loop, N % 4 != 0 through EPI 0),
    three launches on a poisoned C (NaN where beta == 0: C must not be read), then the float64
    product within the fp32 family's tolerance."""
    from simtlab.catalog import family
    from simtlab.device import device_info
    from simtlab.launch import build, choose_params, runner
    from simtlab.ops import gemm

    fam, dev = family("gemm"), device_info()
    rung = fam.rung(name)
    needs_sm90(f"rung {rung.stage}")
    p = gemm.parse_size(size, alpha=alpha, beta=beta)
    ws = fam.op().workspace(p, seed=7)
    inst = build(rung, choose_params(rung, p, dev, None), dev.arch)
    assert inst.params["EPI"] == (0 if p.N % 4 else 3)
    err = poisoned_error(runner(inst, p, ws, None, dev), ws, times=3)
    assert err <= gemm.tolerance(p), (size, err)


@pytest.mark.parametrize("size", ["127x129x64", "300x264x512", "1000x1016x1024", "4096x4096x4096"])
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (-0.75, 1.5)])
def test_rung_11_areg_matches_float64_on_a_poisoned_c(size, alpha, beta, needs_sm90, poisoned_error):
    """AREG 1: A read as fp32 by the main loop and split in registers, B's parts in A's fragment
    order - three calls on a poisoned C against float64 (EPI 0 where C's rows are not 16-byte units)."""
    from simtlab.catalog import family
    from simtlab.device import device_info
    from simtlab.launch import build, choose_params, runner
    from simtlab.ops import gemm

    needs_sm90("rung 11")
    fam, dev = family("gemm"), device_info()
    rung = fam.rung("tf32x3")
    p = gemm.parse_size(size, alpha=alpha, beta=beta)
    ws = fam.op().workspace(p, seed=3)
    params = {**choose_params(rung, p, dev, None), "AREG": 1}
    params["EPI"] = min(params.get("EPI", 3), 2)
    err = poisoned_error(runner(build(rung, params, dev.arch), p, ws, None, dev), ws, times=3)
    assert err <= gemm.tolerance(p), (size, err)


def _areg_kernel(M: int, N: int, K: int, needs_sm90):
    """Rung 11 with AREG 1 (EPI 2: its registers leave none for kept pieces) on one shape."""
    from simtlab.catalog import family
    from simtlab.device import device_info
    from simtlab.launch import build, choose_params, prepare
    from simtlab.ops import gemm, tf32x3

    needs_sm90("rung 11")
    dev = device_info()
    rung = family("gemm").rung("tf32x3")
    params = {**choose_params(rung, gemm.GemmProblem(M, N, K), dev, None), "AREG": 1, "EPI": 2}
    return tf32x3.Tf32x3Gemm(build(rung, params, dev.arch), M, N, K, dev, prepare)


def _areg_product(kernel, a, B):
    """C = A @ B by `kernel` with A at the device array `a` (M x K, packed) and B from the host; C
    (poisoned with NaN first) back on the host in float64."""
    import cupy
    import numpy as np

    M, N, K = kernel.M, kernel.N, kernel.K
    b, c = cupy.asarray(B), cupy.full((M, N), np.nan, dtype=cupy.float32)
    scratch = cupy.empty(kernel.parts_bytes, dtype=cupy.uint8)
    kernel.run(a.data.ptr, K, b.data.ptr, N, c.data.ptr, 1.0, 0.0, scratch.data.ptr,
               cupy.cuda.get_current_stream().ptr)
    return cupy.asnumpy(c).astype(np.float64)


def test_rung_11_areg_takes_inf_and_nan_through_the_guarded_split(needs_sm90):
    """AREG 1 with Inf and NaN in A: the note pass flags them, so the main loop splits with the
    guards (Inf whole in the small part), and C's non-finite entries fall where float64's do."""
    import cupy
    import numpy as np

    M, N, K = 256, 264, 512
    rng = np.random.default_rng(4)
    A, B = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    A[3, 7], A[40, 100], A[41, 5] = np.inf, -np.inf, np.nan
    out = _areg_product(_areg_kernel(M, N, K, needs_sm90), cupy.asarray(A), B)
    with np.errstate(invalid="ignore"):
        ref = A.astype(np.float64) @ B.astype(np.float64)
    assert np.array_equal(np.isnan(out), np.isnan(ref)) and np.array_equal(np.isinf(out), np.isinf(ref))
    fin = np.isfinite(ref)
    assert np.linalg.norm(out[fin] - ref[fin]) / np.linalg.norm(ref[fin]) <= 1e-6


@pytest.mark.parametrize("offset", [0, 1])
def test_rung_11_areg_scales_tiny_rows_and_reads_a_copy_where_tma_cannot(offset, needs_sm90):
    """AREG 1 with tiny rows of A and columns of B (the rescaling pass's exponents applied as A is
    split in registers), A where it lies (offset 0) or 4 bytes off a 16-byte boundary (the split
    copies it for TMA): the float64 product, the tiny rows' too."""
    import cupy
    import numpy as np

    M, N, K = 300, 264, 512
    rng = np.random.default_rng(9)
    A, B = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    A[::3] = np.ldexp(A[::3], -120)
    B[:, ::5] = np.ldexp(B[:, ::5], -110)
    kernel = _areg_kernel(M, N, K, needs_sm90)
    buf = cupy.empty(M * K + 4, dtype=cupy.float32)
    a = buf[offset:offset + M * K]
    a.set(A.ravel())  # (memory copies: subnormal values kept)
    assert kernel.reads_a_in_place(a.data.ptr, K) == (offset == 0)
    out, ref = _areg_product(kernel, a, B), A.astype(np.float64) @ B.astype(np.float64)
    assert not np.isnan(out).any()
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) <= 1e-6
    tiny, mine = ref[::3, 1::5], out[::3, 1::5]  # tiny rows, ordinary columns
    assert np.linalg.norm(mine - tiny) / np.linalg.norm(tiny) < 1e-6


# Sizes whose tiles leave a partial last round over the H200's 66 clusters (132 SMs, CM 2 / 132 CM 1),
# cut into chunks of K: 12 of 144 unpaired tiles in 10 chunks; N not a whole 16-byte row (EPI 0);
# 64 tiles, fewer than the SMs, in 2 chunks (split-K); 50 of 512 cluster tiles in 5
@pytest.mark.parametrize("size,extra", [("1500x1500x1000", {"CM": 1}), ("3001x2901x333", {}), ("1000x1000x5000", {}),
                                        ("3000x2900x333", {}), ("4096x4096x4096", {})])
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (-0.75, 1.5)])
def test_rung_11_split_last_round_matches_float64_on_a_poisoned_c(size, extra, alpha, beta, needs_sm90, poisoned_error):
    """SK 1: the last round's tiles cut into chunks of K, each chunk's sums through scratch to the
    tile's last chunk - three calls on one scratch (the flags cleared by each call) against float64."""
    from simtlab.catalog import family
    from simtlab.device import device_info
    from simtlab.launch import build, choose_params, runner
    from simtlab.ops import gemm, gemm_tc, tf32x3

    needs_sm90("rung 11")
    fam, dev = family("gemm"), device_info()
    rung = fam.rung("tf32x3")
    p = gemm.parse_size(size, alpha=alpha, beta=beta)
    ws = fam.op().workspace(p, seed=11)
    inst = build(rung, {**choose_params(rung, p, dev, None), "SK": 1, "KEEP": 3, **extra}, dev.arch)
    params = inst.params
    rest, parts = gemm_tc.tail_split(params, tf32x3.tc_problem(p), dev.sms // (params["CM"] * params["CN"]))
    assert rest > 0 and parts > 1  # (it cuts tiles)
    err = poisoned_error(runner(inst, p, ws, None, dev), ws, times=3)
    assert err <= gemm.tolerance(p), (size, err)


@pytest.mark.parametrize("size", ["1x1x1", "127x129x65", "1000x1013x37", "33x1x300", "512x512x4099"])
@pytest.mark.parametrize("once", [0, 1])
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (-0.75, 1.5)])
def test_rung_12_matches_float64_on_a_poisoned_c(size, once, alpha, beta, needs_sm90, poisoned_error):
    """Rung 12, each value split on every read (ONCE 0) or each slice split once in shared memory
    (ONCE 1), both copy paths (K or N not a multiple of 4: element loads), on a poisoned C (NaN where
    beta == 0: C must not be read), within the fp32 family's tolerance of the float64 product."""

    from simtlab.catalog import family
    from simtlab.device import device_info
    from simtlab.launch import build, runner
    from simtlab.ops import gemm

    _needs("tf32x3_mma", needs_sm90)
    fam, dev = family("gemm"), device_info()
    rung = fam.rung("tf32x3_mma")
    p = gemm.parse_size(size, alpha=alpha, beta=beta)
    ws = fam.op().workspace(p, seed=3)
    vec = ws.vec_ok()
    err = poisoned_error(runner(build(rung, {**rung.params(dev.arch), "ONCE": once}, dev.arch), p, ws, vec, dev), ws)
    assert err <= gemm.tolerance(p), (size, once, err)


def _error_against_sgemm_and_triton(kind: str, rung: str, needs_sm90) -> None:
    import simtlab
    from simtlab.references.triton_gemm import triton_tf32x3_runner

    torch = pytest.importorskip("torch")
    _needs(rung, needs_sm90)
    g = torch.Generator(device="cuda").manual_seed(11)
    M, N, K = 2048, 2048, 4096
    if kind == "normal":
        A, B = torch.randn(M, K, device="cuda", generator=g), torch.randn(K, N, device="cuda", generator=g)
    elif kind == "uniform":
        A, B = torch.rand(M, K, device="cuda", generator=g), torch.rand(K, N, device="cuda", generator=g)
    else:  # "tiny A", "tiny B": one operand in [2^-125, 2^-124), the other in [0.5, 1)
        A = (1 + torch.rand(M, K, device="cuda", generator=g)) * 2.0 ** -125
        B = 0.5 + torch.rand(K, N, device="cuda", generator=g) / 2
        if kind == "tiny B":
            A, B = B.T.contiguous(), A.T.contiguous()
    ref = A.double() @ B.double()

    def err(C):
        return float((C.double() - ref).norm() / ref.norm())

    torch.backends.cuda.matmul.allow_tf32 = False
    sgemm = err(A @ B)
    C = torch.empty(M, N, device="cuda")
    triton_tf32x3_runner(A, B, C)()
    triton = err(C)
    ours = err(simtlab.gemm(A, B, rung=rung, precision="tf32x3"))
    bound = sgemm if kind.startswith("tiny") else min(sgemm, 2 * triton)  # (Triton's tiny case: 6x SGEMM's)
    assert ours <= bound, (kind, rung, ours, sgemm, triton)


@pytest.mark.parametrize("kind", ["normal", "uniform"])
@pytest.mark.parametrize("rung", RUNGS)
def test_tf32x3_error_against_sgemm_and_triton(kind, rung, needs_sm90):
    """Against float64, on the same inputs, the relative Frobenius error of
    simtlab.gemm(precision="tf32x3"): at most cuBLAS SGEMM's (torch.mm, TF32 off) on N(0,1) and on
    uniform [0, 1) inputs, and at most twice that of Triton's tf32x3, the same three products
    (promoting every two slices leaves 64 k in the tensor cores' truncating sums: 1.46x Triton's
    on the uniform inputs, 1.0x on N(0,1), run 2026-12-04_h200_342a5b_tf32x3; without promotion it
    was 40x)."""
    _error_against_sgemm_and_triton(kind, rung, needs_sm90)


@pytest.mark.parametrize("kind", ["tiny A", "tiny B"])
@pytest.mark.parametrize("rung", RUNGS)
def test_tf32x3_error_near_the_smallest_normal(kind, rung, needs_sm90):
    """A (or B) in [2^-125, 2^-124), the other operand in [0.5, 1): the split (rung 11) or a note
    pass (rung 12) sees the tiny values and those rows of A (columns of B) are scaled by a power of
    two, undone in the epilogue, so the error stays at most SGEMM's (Triton's tf32x3 has no such
    step: 6x SGEMM's, benchmarks/tf32x3_table.py)."""
    _error_against_sgemm_and_triton(kind, rung, needs_sm90)


@pytest.mark.parametrize("once", [0, 1])
@pytest.mark.parametrize("size", ["127x129x65", "300x264x520"])
def test_rung_12_scales_tiny_rows_and_columns(size, once, needs_sm90):
    """Rung 12 through the ladder's runner, each way of splitting (on every read, once a slice), on
    a workspace whose A has every third row and B every fifth column near the smallest normal,
    alpha -0.75 on a poisoned C: within the fp32 family's tolerance of float64, and the tiny rows'
    products (2^-120 under the rest) within 1e-5 of their own norm - compared on the host in
    NumPy, since CuPy's kernels flush subnormal values to zero (some of those products are
    subnormal fp32 numbers: run 3c3aaa's failures were CuPy's conversion of them, not the kernel)."""
    import cupy
    import numpy as np

    from simtlab.catalog import family
    from simtlab.device import device_info
    from simtlab.launch import build, runner
    from simtlab.ops import gemm

    _needs("tf32x3_mma", needs_sm90)
    fam, dev = family("gemm"), device_info()
    rung = fam.rung("tf32x3_mma")
    p = gemm.parse_size(size, alpha=-0.75, beta=0.0)
    ws = fam.op().workspace(p, seed=5)
    A, B = cupy.asnumpy(ws.A), cupy.asnumpy(ws.B)
    A[::3] = np.ldexp(A[::3], -120)  # (on the host: subnormal values kept)
    B[:, ::5] = np.ldexp(B[:, ::5], -110)
    ws.A.set(A), ws.B.set(B)  # (memory copies: the bits as they are)
    run = runner(build(rung, {**rung.params(dev.arch), "ONCE": once}, dev.arch), p, ws, ws.vec_ok(), dev)
    ws.poison()
    run()
    cupy.cuda.get_current_stream().synchronize()
    out = cupy.asnumpy(ws.output()).astype(np.float64)
    ref = -0.75 * (A.astype(np.float64) @ B.astype(np.float64))
    assert not np.isnan(out).any()
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) <= gemm.tolerance(p)
    tiny, mine = ref[::3, 1::5], out[::3, 1::5]  # tiny rows, ordinary columns
    rel = float(np.linalg.norm(mine - tiny) / np.linalg.norm(tiny))
    assert rel < 1e-5, (size, once, rel)


def test_tf32x3_rescales_only_the_rows_that_need_it(needs_sm90):
    """Tiny rows of A beside ordinary ones, one subnormal in an ordinary row, an infinity in a tiny
    row and tiny columns of B, with alpha and beta: Inf and NaN where the float64 product has them,
    every finite entry within fp32 accuracy of its own scale, the tiny rows' products too."""
    import simtlab

    torch = pytest.importorskip("torch")
    needs_sm90("rung 11")
    g = torch.Generator(device="cuda").manual_seed(13)
    M, N, K = 300, 264, 520
    A, B = torch.randn(M, K, device="cuda", generator=g), torch.randn(K, N, device="cuda", generator=g)
    A[::3] *= 2.0 ** -120  # a third of A's rows near the smallest normal
    A[1, 5] = 2.0 ** -130  # a subnormal in an ordinary row (no scaling there)
    A[6, 7] = float("inf")  # a tiny row with an infinity: its row max is taken over finite values
    B[:, ::5] *= 2.0 ** -110  # a fifth of B's columns
    C0 = torch.randn(M, N, device="cuda", generator=g)
    C = C0.clone()
    simtlab.gemm(A, B, C, 0.5, -1.0, precision="tf32x3")
    ref = 0.5 * (A.double() @ B.double()) - C0.double()
    assert torch.equal(torch.isnan(C), torch.isnan(ref)) and torch.equal(torch.isinf(C), torch.isinf(ref))
    fin = torch.isfinite(ref)
    scale = 0.5 * (A.double().abs().nan_to_num(posinf=0.0) @ B.double().abs()) + C0.double().abs()
    worst = float(((C.double() - ref).abs()[fin] / scale[fin]).max())
    assert worst < 1e-6, worst
    D = torch.empty(M, N, device="cuda")  # the tiny rows' products alone (beta 0: nothing to hide them)
    simtlab.gemm(A, B, D, precision="tf32x3")
    want = (A.double() @ B.double())[::3][:, 1::5]  # tiny rows times ordinary columns (row 6's infinity left out)
    got = D.double()[::3][:, 1::5]
    ok = torch.isfinite(want)
    rel = float((got[ok] - want[ok]).norm() / want[ok].norm())
    assert rel < 1e-6, rel


def test_tf32x3_plan_alternating_tiny_and_ordinary_operands(needs_sm90):
    """One plan called on tiny, ordinary, tiny, ordinary A in turn (the scratch the allocator hands
    back is likely the same memory each call): each call's result matches float64, so no call
    inherits an earlier one's rescaling (each clears the split's flag first)."""
    import simtlab

    torch = pytest.importorskip("torch")
    needs_sm90("rung 11")
    g = torch.Generator(device="cuda").manual_seed(17)
    M, N, K = 512, 384, 640
    B = torch.randn(K, N, device="cuda", generator=g)
    A0 = torch.randn(M, K, device="cuda", generator=g)
    plan = simtlab.gemm_plan(A0, B, precision="tf32x3")
    for step in range(4):
        A = A0 * 2.0 ** -120 if step % 2 == 0 else A0
        C = plan(A, B)
        ref = A.double() @ B.double()
        err = float((C.double() - ref).norm() / ref.norm())
        assert err < 1e-6, (step, err)


@pytest.mark.parametrize("K", [1, 16, 37, 63])
def test_tf32x3_short_k_sums_in_float64(K):
    """Below TF32X3_MIN_K precision="tf32x3" runs rung 8 with float64 sums: an error of about one
    rounding (under half SGEMM's on N(0,1) inputs), alpha and beta on a C that is read, odd
    shapes."""
    import simtlab
    from simtlab.ops.gemm_plans import TF32X3_MIN_K

    torch = pytest.importorskip("torch")
    assert K < TF32X3_MIN_K
    g = torch.Generator(device="cuda").manual_seed(K)
    M, N = 1000, 1013
    A, B = torch.randn(M, K, device="cuda", generator=g), torch.randn(K, N, device="cuda", generator=g)
    C0 = torch.randn(M, N, device="cuda", generator=g)
    plan = simtlab.gemm_plan(A, B, C0.clone(), precision="tf32x3")
    assert plan.rung.name == "warptiling" and plan.split is None
    ref = A.double() @ B.double()
    torch.backends.cuda.matmul.allow_tf32 = False
    sgemm = float(((A @ B).double() - ref).norm() / ref.norm())
    ours = float((simtlab.gemm(A, B, precision="tf32x3").double() - ref).norm() / ref.norm())
    assert ours <= 0.5 * sgemm or ours < 4e-8, (K, ours, sgemm)
    C = C0.clone()
    simtlab.gemm(A, B, C, -0.75, 1.5, precision="tf32x3")
    want = -0.75 * ref + 1.5 * C0.double()
    assert float((C.double() - want).norm() / want.norm()) < 1e-7


def test_tf32x3_split_reads_misaligned_and_odd_rows(needs_sm90):
    """The pre-pass's scalar reads: A a view one float past a 16-byte boundary (lda a multiple of
    4, the address not), B with rows of 1013 floats; the product still matches float64."""
    import simtlab

    torch = pytest.importorskip("torch")
    needs_sm90("rung 11")
    g = torch.Generator(device="cuda").manual_seed(3)
    buf = torch.randn(300 * 256 + 1, device="cuda", generator=g)
    A = buf[1:].view(300, 256)
    B = torch.randn(256, 1013, device="cuda", generator=g)
    C = simtlab.gemm(A, B, precision="tf32x3")
    ref = A.double() @ B.double()
    assert float((C.double() - ref).norm() / ref.norm()) < 1e-6


@pytest.mark.parametrize("rung", RUNGS)
def test_tf32x3_gives_inf_and_nan_where_sgemm_does(rung, needs_sm90, nonfinite_as_sgemm):
    """Infinities and NaNs in A (B finite): the same entries of C are infinite or NaN as in SGEMM's
    C, with the same signs; the finite ones agree."""
    import simtlab

    pytest.importorskip("torch")
    _needs(rung, needs_sm90)
    nonfinite_as_sgemm(lambda A, B: simtlab.gemm(A, B, rung=rung, precision="tf32x3"))


def test_tf32x3_call_follows_the_callers_stream_and_views(needs_sm90):
    """A producer kernel and the call on a side stream (the result read after that stream only),
    transposed views (copied to row-major inside the call), a C that is not 16-byte aligned (the
    register epilogue), a plan, and alpha/beta."""
    import simtlab

    torch = pytest.importorskip("torch")
    needs_sm90("rung 11")
    g = torch.Generator(device="cuda").manual_seed(9)
    At = torch.randn(300, 200, device="cuda", generator=g)  # A = At.T: 200 x 300
    B = torch.randn(300, 256, device="cuda", generator=g)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        A = At.T * 2  # produced on the side stream
        C = simtlab.gemm(A, B, precision="tf32x3")
    side.synchronize()
    ref = (At.T.double() * 2) @ B.double()
    assert float((C.double() - ref).norm() / ref.norm()) < 1e-6
    buf = torch.zeros(200 * 256 + 1, device="cuda")
    C1 = buf[1:].view(200, 256)  # 4 bytes past a 16-byte boundary
    C1.fill_(1.0)
    plan = simtlab.gemm_plan(At.T.contiguous(), B, C1, precision="tf32x3")
    plan(At.T.contiguous(), B, C1, 0.5, -2.0)
    ref = 0.5 * (At.T.double() @ B.double()) - 2.0
    assert float((C1.double() - ref).norm() / ref.norm()) < 1e-6


def test_tf32x3_refuses_what_it_cannot_do():
    import simtlab

    torch = pytest.importorskip("torch")
    A = torch.randn(8, 8, device="cuda")
    with pytest.raises(ValueError, match="precision 'tf16'"):
        simtlab.gemm(A, A, precision="tf16")
    with pytest.raises(ValueError, match="no other rung and no kahan"):
        simtlab.gemm(A, A, precision="tf32x3", kahan=True)
