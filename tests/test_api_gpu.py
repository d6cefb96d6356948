"""The library calls as users make them (GPU): transposed views, the caller's stream, CUDA graphs,
prepared plans, and the PyTorch operator with autograd and torch.compile."""

import pytest

from simtlab.verify import compare

pytestmark = [pytest.mark.gpu, pytest.mark.api]

LAYOUTS = ("nn", "nt", "tn", "tt")


def _torch():
    return pytest.importorskip("torch")


def _operand(torch, rows, cols, transposed, dtype, batch=None, gen=None):
    """A rows x cols operand (batched when batch is set): row-major, or the transposed view of a
    cols x rows matrix; random values in [-1, 1)."""
    lead = (batch,) if batch else ()
    if transposed:
        return _operand(torch, cols, rows, False, dtype, batch, gen).transpose(-1, -2)
    return (torch.rand(*lead, rows, cols, device="cuda", generator=gen) * 2 - 1).to(dtype)


def _error(c, ref) -> float:
    return float((c.double() - ref).norm() / ref.norm())


def _tolerance(M, N, K, dtype, out, batch=1):
    from simtlab.ops import gemm_tc

    return gemm_tc.tolerance(gemm_tc.TcProblem(M, N, K, dtype, batch, out))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", [(256, 512, 192), (136, 264, 72), (3, 128, 256, 96), (64, 64, 30), (200, 72, 130)],
                         ids=lambda s: "x".join(map(str, s)))
def test_gemm_tc_reads_transposed_views(layout, shape):
    """All four layouts, 2-D and batched, aligned and odd extents (those run on padded copies),
    bf16 and fp16, C in fp32 and in the inputs' type, against the float64 product."""
    import simtlab

    torch = _torch()
    *lead, M, N, K = shape
    batch = lead[0] if lead else None
    gen = torch.Generator(device="cuda").manual_seed(sum(shape) + len(layout))
    for dtype in (torch.bfloat16, torch.float16):
        A = _operand(torch, M, K, layout[0] == "t", dtype, batch, gen)
        B = _operand(torch, K, N, layout[1] == "t", dtype, batch, gen)
        ref = A.double() @ B.double()
        name = str(dtype).removeprefix("torch.")
        for out in ("float32", name):
            C = simtlab.gemm_tc(A, B, out_dtype=out)
            assert C.dtype == getattr(torch, out) and C.shape == ref.shape and C.is_contiguous()
            err = _error(C, ref)
            assert err <= _tolerance(M, N, K, name, out, batch or 1), (layout, name, out, err)


def test_gemm_tc_layouts_on_cupy_views_and_other_rungs():
    """CuPy transposed views on rung 6, and on rung 3 (which gets row-major copies)."""
    import cupy

    import simtlab

    rng = cupy.random.default_rng(3)
    M, N, K = 192, 136, 264
    At = (rng.random((K, M), dtype=cupy.float32) * 2 - 1).astype(cupy.float16)
    Bt = (rng.random((N, K), dtype=cupy.float32) * 2 - 1).astype(cupy.float16)
    ref = At.T.astype(cupy.float64) @ Bt.T.astype(cupy.float64)
    for rung in ("best", "mma_multistage"):
        C = simtlab.gemm_tc(At.T, Bt.T, rung=rung)
        assert compare(C, ref, _tolerance(M, N, K, "float16", "float32")).ok, rung


def test_other_strides_are_named():
    import simtlab

    torch = _torch()
    A = torch.ones(128, 128, device="cuda", dtype=torch.bfloat16)
    B = torch.ones(64, 64, device="cuda", dtype=torch.bfloat16)
    for bad in (A[:64, ::2], A[::2, :64], A[:64, 1:65], torch.ones(1, 64, device="cuda", dtype=torch.bfloat16).expand(64, 64)):
        with pytest.raises(ValueError, match="element strides"):
            simtlab.gemm_tc(bad, B)
        with pytest.raises(ValueError, match="element strides"):
            simtlab.gemm_tc(B, bad)
    with pytest.raises(ValueError, match="element strides"):
        simtlab.gemm(A.float()[:64, ::2], B.float())
    with pytest.raises(TypeError, match="pass one library's arrays"):
        import cupy

        simtlab.gemm_tc(A, cupy.ones((128, 64), cupy.float16))


def test_gemm_tc_builds_what_the_store_found_for_the_shape(tmp_path, monkeypatch):
    """`simtlab tune gemm_tc` feeds the library call: a plan for a shape builds rung 6 at the store's
    fastest verified row for it on this GPU (a row as the tuner writes one); a row that no longer
    launches (here: a ring of stages beyond a block's shared memory) warns and runs the shipped
    parameters; both products right."""
    import simtlab
    from simtlab.ops import gemm_plans as plans
    from simtlab.catalog import family
    from simtlab.device import device_info
    from simtlab.launch import rung_source
    from simtlab.store import Store

    torch = _torch()
    fam = family("gemm_tc")
    rung = fam.rung("wgmma_cluster")
    info = device_info()
    if not rung.supports(info.compute_capability):
        pytest.skip(f"rung 6 needs {rung.requirement}")
    M, N, K = 384, 512, 320
    problem = fam.op().parse_size(f"{M}x{N}x{K}:bf16")
    shipped = rung.size_defaults(problem, info, None)
    full = dict(rung.params(info.arch, shipped))
    gen = torch.Generator(device="cuda").manual_seed(7)
    A = _operand(torch, M, K, False, torch.bfloat16, gen=gen)
    B = _operand(torch, K, N, False, torch.bfloat16, gen=gen)
    ref = A.double() @ B.double()
    for row, stale in (({**full, "STAGES": 3, "GROUP_M": 8}, False), ({**full, "STAGES": 16}, True)):
        db = tmp_path / f"{len(list(tmp_path.iterdir()))}.db"
        store = Store(db)
        run = store.start_run("test", info)
        store.add_result(run, family="gemm_tc", rung=rung.id, problem=problem.label, median_ms=0.01, status="ok",
                         params=row, extra={"source": rung_source(rung)})
        store.close()
        monkeypatch.setenv("SIMTLAB_DB", str(db))
        plans._store_params.cache_clear()
        try:
            if stale:
                with pytest.warns(RuntimeWarning, match="shipped parameters"):
                    plan = simtlab.gemm_tc_plan(A, B)
                assert plan.params == full
            else:
                plan = simtlab.gemm_tc_plan(A, B)
                assert plan.params == row
            assert _error(plan(A, B), ref) <= _tolerance(M, N, K, "bfloat16", "float32"), row
        finally:
            plans._store_params.cache_clear()


def _slow_producer(torch, dst, value):
    """Work on the current stream that takes ~10 ms before it writes dst: a GEMM enqueued on
    another stream (or run before it) reads the old contents."""
    torch.cuda._sleep(20_000_000)
    dst.fill_(value)


def test_gemm_tc_and_gemm_run_on_the_callers_stream():
    import simtlab

    torch = _torch()
    side = torch.cuda.Stream()
    M = N = K = 512
    for dtype, call in ((torch.bfloat16, lambda a, b: simtlab.gemm_tc(a, b)), (torch.float32, simtlab.gemm)):
        A = torch.zeros(M, K, device="cuda", dtype=dtype)
        B = torch.ones(K, N, device="cuda", dtype=dtype)
        call(A, B)  # (plan and compile outside the race)
        torch.cuda.synchronize()
        with torch.cuda.stream(side):
            _slow_producer(torch, A, 1.0)
            C = call(A, B)
        side.synchronize()
        assert float(C.float().min()) == K and float(C.float().max()) == K, dtype  # A's ones, not its zeros


def test_cupy_calls_use_cupys_current_stream():
    import cupy

    import simtlab

    n = 256
    A = cupy.zeros((n, n), cupy.float16)
    B = cupy.ones((n, n), cupy.float16)
    simtlab.gemm_tc(A, B)
    cupy.cuda.Device().synchronize()
    # ~10 ms of spinning, then A = 1 (fp16 bits 0x3C00), on a non-blocking stream
    spin_then_fill = cupy.RawKernel(r"""extern "C" __global__ void spin_then_fill(long long cycles, unsigned short* a,
                                                                                 int n) {
        long long t0 = clock64();
        while (clock64() - t0 < cycles) {}
        for (int i = threadIdx.x; i < n; i += blockDim.x) a[i] = 0x3C00;
    }""", "spin_then_fill")
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        spin_then_fill((1,), (256,), (cupy.int64(20_000_000), A, cupy.int32(n * n)))
        C = simtlab.gemm_tc(A, B)
    stream.synchronize()
    assert float(C.min()) == n and float(C.max()) == n


def test_calls_are_captured_by_torch_cuda_graphs():
    """gemm_tc (in place, and allocating C from the graph's pool), a transposed view, and gemm:
    captured once, replayed on new contents of the static inputs."""
    import simtlab

    torch = _torch()
    M, N, K = 384, 256, 320
    A = torch.empty(M, K, device="cuda", dtype=torch.bfloat16)
    Bt = torch.empty(N, K, device="cuda", dtype=torch.bfloat16)
    C = torch.empty(M, N, device="cuda", dtype=torch.float32)
    A32, B32 = torch.empty(M, K, device="cuda"), torch.empty(K, N, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up: plans and compiles outside the capture
        simtlab.gemm_tc(A, Bt.T, C)
        simtlab.gemm_tc(A, Bt.T, out_dtype="bfloat16")
        simtlab.gemm(A32, B32)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        simtlab.gemm_tc(A, Bt.T, C)
        C16 = simtlab.gemm_tc(A, Bt.T, out_dtype="bfloat16")
        C32 = simtlab.gemm(A32, B32)
    for seed in (1, 2):
        torch.manual_seed(seed)
        A.copy_(torch.rand(M, K, device="cuda") * 2 - 1)
        Bt.copy_(torch.rand(N, K, device="cuda") * 2 - 1)
        A32.copy_(torch.rand(M, K, device="cuda"))
        B32.copy_(torch.rand(K, N, device="cuda"))
        graph.replay()
        torch.cuda.synchronize()
        ref = A.double() @ Bt.double().T
        assert _error(C, ref) <= _tolerance(M, N, K, "bfloat16", "float32")
        assert _error(C16, ref) <= _tolerance(M, N, K, "bfloat16", "bfloat16")
        assert _error(C32, A32.double() @ B32.double()) <= 1e-5


def test_calls_are_captured_by_cupy_stream_capture():
    import cupy

    import simtlab

    rng = cupy.random.default_rng(5)
    A = cupy.empty((256, 192), cupy.float16)
    B = cupy.empty((192, 320), cupy.float16)
    C = cupy.empty((256, 320), cupy.float32)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        simtlab.gemm_tc(A, B, C)  # (plan outside the capture)
        stream.begin_capture()
        simtlab.gemm_tc(A, B, C)
        graph = stream.end_capture()
    A[...] = (rng.random(A.shape, dtype=cupy.float32) * 2 - 1).astype(cupy.float16)
    B[...] = (rng.random(B.shape, dtype=cupy.float32) * 2 - 1).astype(cupy.float16)
    cupy.cuda.Device().synchronize()
    graph.launch(stream)
    stream.synchronize()
    assert compare(C, A.astype(cupy.float64) @ B.astype(cupy.float64), _tolerance(256, 320, 192, "float16",
                                                                                    "float32")).ok


def test_prepared_plans_launch_new_operands_and_refuse_other_kinds():
    import simtlab
    from simtlab.ops.gemm_plans import PlanMismatch

    torch = _torch()
    M, N, K = 256, 128, 192
    A = torch.rand(M, K, device="cuda").to(torch.bfloat16)
    B = torch.rand(K, N, device="cuda").to(torch.bfloat16)
    plan = simtlab.gemm_tc_plan(A, B, out_dtype="bfloat16")
    for _ in range(3):  # new tensors of the same kind each call, as an allocator hands them out
        A2, B2 = torch.rand_like(A, dtype=torch.float32).to(torch.bfloat16), torch.rand_like(B, dtype=torch.float32).to(
            torch.bfloat16)
        C2 = plan(A2, B2)
        assert _error(C2, A2.double() @ B2.double()) <= _tolerance(M, N, K, "bfloat16", "bfloat16")
    with pytest.raises(PlanMismatch, match="A differs"):
        plan(A[:, :64], B[:64])
    with pytest.raises(PlanMismatch, match="B differs"):
        plan(A, B.to(torch.float16))
    # strides are trusted on each call (types and shapes are checked); matches() checks them too
    assert plan.matches(A, B) and not plan.matches(A.T.contiguous().T, B)
    with pytest.raises(PlanMismatch, match="C differs"):
        plan(A, B, torch.empty(M, N, device="cuda", dtype=torch.bfloat16))  # (made to allocate C)
    fplan = simtlab.gemm_plan(A.float(), B.float(), torch.empty(M, N, device="cuda"))
    C = torch.ones(M, N, device="cuda")
    fplan(A.float(), B.float(), C, 2.0, 0.5)
    expect = 2.0 * (A.double() @ B.double()) + 0.5
    assert _error(C, expect) <= 1e-5


@pytest.mark.parametrize("shape", [(256, 128, 192), (4, 128, 64, 320)], ids=["2d", "batched"])
def test_new_addresses_every_call_repoint_the_maps(shape):
    """Rung 6's maps are re-pointed by one write per operand (driver.MapSlot): many pairs in
    turn, a misaligned call (encoded, on the padded path) between them, every result checked."""
    import simtlab

    torch = _torch()
    *lead, M, N, K = shape
    batch = lead[0] if lead else None
    gen = torch.Generator(device="cuda").manual_seed(5)
    pairs = [(_operand(torch, M, K, False, torch.bfloat16, batch, gen), _operand(torch, K, N, False, torch.bfloat16,
                                                                                 batch, gen)) for _ in range(9)]
    plan = simtlab.gemm_tc_plan(*pairs[0], out_dtype="bfloat16")
    tol = _tolerance(M, N, K, "bfloat16", "bfloat16", batch or 1)
    for i in range(27):
        A, B = pairs[i % 9]
        if i == 13:  # (an A two bytes off 16-byte alignment: the general path, then the slots again)
            A = torch.empty(A.numel() + 1, device="cuda", dtype=A.dtype)[1:].view(A.shape).copy_(A)
        C = simtlab.gemm_tc(A, B, out_dtype="bfloat16") if i % 2 else plan(A, B)
        assert _error(C, A.double() @ B.double()) <= tol, i
    assert plan._direct.slots, "the maps were encoded per address: the driver's layout was not learned"


@pytest.mark.parametrize("layout", ["nn", "tn"])
def test_a_bound_plan_launches_its_operands_with_one_driver_call(layout):
    """plan.bind(A, B, C): everything set once; each call is one launch on the current stream (or
    the named one) and sees the operands' new contents. Shapes a single launch cannot take (an
    fp32 transposed view: a copy first) run the plan's full path."""
    import simtlab

    torch = _torch()
    M, N, K = 320, 192, 256
    A = _operand(torch, M, K, layout[0] == "t", torch.bfloat16)
    B = _operand(torch, K, N, layout[1] == "t", torch.bfloat16)
    bound = simtlab.gemm_tc_plan(A, B, out_dtype="bfloat16").bind(A, B)
    assert bound.one_launch
    side = torch.cuda.Stream()
    for i in range(3):
        A.copy_(_operand(torch, M, K, layout[0] == "t", torch.bfloat16))  # new contents, same buffers
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            C = bound() if i < 2 else None
        if i == 2:
            C = bound(side.cuda_stream)
        torch.cuda.current_stream().wait_stream(side)
        assert C is bound.C
        assert _error(C, A.double() @ B.double()) <= _tolerance(M, N, K, "bfloat16", "bfloat16")
    with pytest.raises(simtlab.ops.gemm_plans.PlanMismatch, match="B differs"):
        simtlab.gemm_tc_plan(A, B).bind(A, B.contiguous() if layout[1] == "t" else B.T.contiguous().T)
    A32, B32, C32 = torch.rand(M, K, device="cuda"), torch.rand(K, N, device="cuda"), torch.rand(M, N, device="cuda")
    start = C32.clone()
    fbound = simtlab.gemm_plan(A32, B32, C32).bind(A32, B32, C32, 2.0, 0.5)
    assert fbound.one_launch
    fbound()
    assert _error(C32, 2.0 * (A32.double() @ B32.double()) + 0.5 * start.double()) <= 1e-5
    copies = simtlab.gemm_plan(A32.T.contiguous().T, B32).bind(A32.T.contiguous().T, B32)
    assert not copies.one_launch
    assert _error(copies(), A32.double() @ B32.double()) <= 1e-5
    with pytest.raises(ValueError, match="more than one launch"):
        copies(side.cuda_stream)


def test_gemm_fp32_takes_transposed_views_and_misaligned_tensors():
    import simtlab

    torch = _torch()
    M, N, K = 130, 96, 72
    At = torch.rand(K, M, device="cuda")
    Bt = torch.rand(N, K, device="cuda")
    for A, B in ((At.T, Bt.T), (At.T.contiguous(), Bt.T), (At.T, Bt.T.contiguous())):
        C = simtlab.gemm(A, B)
        assert _error(C, A.double() @ B.double()) <= 1e-5
    buf = torch.rand(M * K + 1, device="cuda")
    A = buf[1:].view(M, K)  # contiguous, 4 bytes off a 16-byte boundary: the scalar path
    B = Bt.T.contiguous()
    assert _error(simtlab.gemm(A, B), A.double() @ B.double()) <= 1e-5
    buf16 = torch.rand(M * K + 1, device="cuda").to(torch.bfloat16)
    A16 = buf16[1:].view(M, K)  # 2 bytes off: rung 6 runs on an aligned copy
    B16 = B.to(torch.bfloat16)
    assert _error(simtlab.gemm_tc(A16, B16), A16.double() @ B16.double()) <= _tolerance(M, N, K, "bfloat16", "float32")


def test_torch_matmul_gradients_match_torch_mm():
    torch = _torch()
    import simtlab.torch as st

    gen = torch.Generator(device="cuda").manual_seed(11)
    for M, N, K, batch in ((256, 192, 320, None), (130, 72, 96, None), (64, 128, 64, 3)):
        lead = (batch,) if batch else ()
        a = (torch.rand(*lead, M, K, device="cuda", generator=gen) * 2 - 1).to(torch.bfloat16).requires_grad_()
        b = (torch.rand(*lead, K, N, device="cuda", generator=gen) * 2 - 1).to(torch.bfloat16).requires_grad_()
        g = torch.rand(*lead, M, N, device="cuda", generator=gen) * 2 - 1
        y = st.matmul(a, b)
        assert y.dtype == torch.bfloat16 and y.shape == (*lead, M, N)
        (y.float() * g).sum().backward()
        ad, bd, gd = a.detach().double(), b.detach().double(), g.to(torch.bfloat16).double()
        # reference: the float64 gradients of the same bf16 values (grad rounded to bf16 as the op sees it)
        for got, ref, k in ((a.grad, gd @ bd.transpose(-1, -2), N), (b.grad, ad.transpose(-1, -2) @ gd, M)):
            assert _error(got, ref) <= _tolerance(M, N, k, "bfloat16", "bfloat16"), (M, N, K)


def test_torch_matmul_as_a_linear_layer():
    """(batch, tokens, K) @ (K, N): one product over all leading rows; the weight's gradient sums
    them (one GEMM of the flattened rows), against float64."""
    torch = _torch()
    import simtlab.torch as st

    gen = torch.Generator(device="cuda").manual_seed(5)
    x = (torch.rand(3, 40, 96, device="cuda", generator=gen) * 2 - 1).to(torch.bfloat16).requires_grad_()
    w = (torch.rand(96, 72, device="cuda", generator=gen) * 2 - 1).to(torch.bfloat16).requires_grad_()
    g = torch.rand(3, 40, 72, device="cuda", generator=gen) * 2 - 1
    y = st.matmul(x, w)
    assert y.shape == (3, 40, 72)
    assert _error(y, x.detach().double() @ w.detach().double()) <= _tolerance(120, 72, 96, "bfloat16", "bfloat16")
    (y.float() * g).sum().backward()
    gd = g.to(torch.bfloat16).double().reshape(120, 72)
    xd = x.detach().double().reshape(120, 96)
    assert _error(w.grad, xd.T @ gd) <= _tolerance(96, 72, 120, "bfloat16", "bfloat16")
    assert _error(x.grad.reshape(120, 96), gd @ w.detach().double().T) <= _tolerance(120, 96, 72, "bfloat16",
                                                                                        "bfloat16")


def test_torch_compile_traces_matmul_without_graph_breaks():
    torch = _torch()
    import simtlab.torch as st

    def mlp(x, w1, w2):
        return st.matmul(torch.relu(st.matmul(x, w1)), w2)

    x = torch.rand(256, 128, device="cuda").to(torch.bfloat16)
    w1 = torch.rand(128, 192, device="cuda").to(torch.bfloat16) / 8
    w2 = torch.rand(192, 64, device="cuda").to(torch.bfloat16) / 8
    explained = torch._dynamo.explain(mlp)(x, w1, w2)
    assert explained.graph_break_count == 0 and explained.graph_count == 1
    compiled = torch.compile(mlp, fullgraph=True)
    got = compiled(x, w1, w2)
    ref = torch.relu(x.double() @ w1.double()) @ w2.double()
    assert _error(got, ref) <= 2e-2  # two bf16 roundings of the hidden layer and the output
    w1.requires_grad_()
    compiled(x, w1, w2).float().sum().backward()
    assert w1.grad is not None and torch.isfinite(w1.grad.float()).all()
