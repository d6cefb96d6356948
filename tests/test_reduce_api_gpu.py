"""simtlab.sum, simtlab.amax and simtlab.transpose as users call them (GPU): values against
float64 PyTorch on every storage type, rows short and long, few rows cut into chunks, one element,
empty dimensions, other dims, keepdim, views, misaligned addresses, NaN, gradients, CuPy arrays,
the caller's stream, CUDA graphs and torch.compile(fullgraph=True)."""

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.api, pytest.mark.reduction]

TYPES = ("float32", "bfloat16", "float16")
SHAPES = ((1, 1), (3, 7), (1, 4097), (5, 1000), (2, 100003), (1, 3_000_001), (4096, 4100), (300, 8192), (7, 65537))


def _torch():
    return pytest.importorskip("torch")


def _tol(dtype: str, length: int) -> float:
    """fp32 sums of positive values (condition 1) of `length`, rounded once to the storage type."""
    from simtlab.verify import UNIT_ROUNDOFF, dot_tolerance

    return 2 * dot_tolerance("float32", max(length, 1)) + 4 * UNIT_ROUNDOFF[dtype]


def _x(torch, shape, dtype, seed, offset=0.5):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.rand(shape, device="cuda", generator=g) + offset).to(getattr(torch, dtype))


def _rel(ours, ref) -> float:
    ours, ref = ours.double(), ref.double()
    return float(((ours - ref).abs() / ref.abs().clamp_min(1e-300)).max()) if ref.numel() else 0.0


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_sum_and_amax_match_float64_over_rows_and_everything(dtype, shape):
    import simtlab

    torch = _torch()
    x = _x(torch, shape, dtype, shape[-1])
    xd = x.double()
    for dim in (-1, None):
        ours, ref = simtlab.sum(x, dim), xd.sum(dim) if dim is not None else xd.sum()
        assert ours.dtype == x.dtype and ours.shape == ref.shape
        length = shape[-1] if dim is not None else x.numel()
        big = torch.isinf(ref.to(x.dtype))  # (past what rounds to fp16's max: inf, as torch's fp16 sum gives)
        assert torch.isinf(ours[big]).all() and _rel(ours[~big], ref[~big]) <= _tol(dtype, length), (dtype, shape, dim)
        ours = simtlab.amax(x, dim)
        assert torch.equal(ours, x.amax(dim) if dim is not None else x.amax()), (dtype, shape, dim)
    again = simtlab.sum(x, -1)
    assert torch.equal(again, simtlab.sum(x, -1))  # (a fixed order: the same bits every run)


def test_other_dims_keepdim_views_misaligned_and_empty():
    import simtlab

    torch = _torch()
    x = _x(torch, (6, 33, 70), "float32", 3)
    for dim in (0, 1, 2, -2):
        for keepdim in (False, True):
            ours = simtlab.sum(x, dim, keepdim)
            ref = x.double().sum(dim, keepdim)
            assert ours.shape == ref.shape and _rel(ours, ref) <= _tol("float32", x.shape[dim])
            assert torch.equal(simtlab.amax(x, dim, keepdim), x.amax(dim, keepdim))
    view = x[:, ::2, 1:]
    assert _rel(simtlab.sum(view, 1), view.double().sum(1)) <= _tol("float32", view.shape[1])
    assert simtlab.sum(x, None, True).shape == (1, 1, 1)
    flat = torch.rand(4 * 1000 + 1, device="cuda")[1:].view(4, 1000)  # 4 bytes past the allocation: unaligned
    assert _rel(simtlab.sum(flat, 1), flat.double().sum(1)) <= _tol("float32", 1000)
    assert torch.equal(simtlab.amax(flat, 1), flat.amax(1))
    half = torch.rand(2 * 999 + 1, device="cuda").to(torch.bfloat16)[1:].view(2, 999)
    assert _rel(simtlab.sum(half, 1), half.double().sum(1)) <= _tol("bfloat16", 999)
    empty = torch.empty(0, 5, device="cuda")
    assert simtlab.sum(empty, 1).shape == (0,) and simtlab.sum(empty).item() == 0.0
    assert torch.equal(simtlab.sum(torch.empty(3, 0, device="cuda"), 1), torch.zeros(3, device="cuda"))
    one = torch.tensor(2.5, device="cuda")
    assert simtlab.sum(one).item() == 2.5 and simtlab.amax(one, 0).item() == 2.5


def test_amax_propagates_nan_and_refuses_an_empty_dimension():
    import simtlab

    torch = _torch()
    x = _x(torch, (4, 9000), "float32", 5)
    x[1, 4321] = float("nan")
    x[2] = -float("inf")
    x[3, 8999] = float("inf")
    ours, ref = simtlab.amax(x, 1), x.amax(1)
    assert torch.equal(ours.isnan(), ref.isnan()) and torch.equal(ours[~ref.isnan()], ref[~ref.isnan()])
    assert simtlab.amax(x).isnan() and simtlab.sum(x, 1)[1].isnan()
    with pytest.raises(ValueError, match="empty dimension"):
        simtlab.amax(torch.empty(3, 0, device="cuda"), 1)
    with pytest.raises(TypeError, match="float32, bfloat16 or float16"):
        simtlab.sum(torch.ones(3, device="cuda", dtype=torch.int64))
    with pytest.raises(TypeError, match="one dimension"):
        simtlab.sum(x, (0, 1))


@pytest.mark.transpose
@pytest.mark.parametrize("shape", ((1, 1), (3, 5), (64, 64), (1000, 4), (4097, 1023), (1, 100003), (77, 1), (8192, 8192)),
                         ids=lambda s: "x".join(map(str, s)))
def test_transpose_is_exact(shape):
    import simtlab

    torch = _torch()
    x = torch.randn(shape, device="cuda")
    out = simtlab.transpose(x)
    assert out.is_contiguous() and torch.equal(out, x.T)
    odd = torch.randn(shape[0] * shape[1] + 1, device="cuda")[1:].view(shape)  # unaligned
    assert torch.equal(simtlab.transpose(odd), odd.T)
    assert torch.equal(simtlab.transpose(x.T.contiguous().T), x.T)  # (a transposed view: made contiguous first)


@pytest.mark.transpose
def test_transpose_of_vectors_and_bad_input():
    import simtlab

    torch = _torch()
    v = torch.randn(7, device="cuda")
    assert torch.equal(simtlab.transpose(v), v)
    with pytest.raises(TypeError, match="float32"):
        simtlab.transpose(v.to(torch.bfloat16))
    with pytest.raises(ValueError, match="takes a matrix"):
        simtlab.transpose(torch.randn(2, 3, 4, device="cuda"))


@pytest.mark.transpose
def test_gradients_match_torch():
    import simtlab

    torch = _torch()
    x = _x(torch, (37, 513), "float32", 9, offset=-0.5)
    x[3, :5] = 2.0  # (ties for the maximum: the gradient is shared among them, as torch.amax does)
    for fn, ref in ((lambda a: simtlab.sum(a, 1), lambda a: a.sum(1)),
                    (lambda a: simtlab.sum(a), lambda a: a.sum()),
                    (lambda a: simtlab.sum(a, 0, True), lambda a: a.sum(0, True)),
                    (lambda a: simtlab.amax(a, 1), lambda a: a.amax(1)),
                    (lambda a: simtlab.transpose(a), lambda a: a.T)):
        a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
        out, want = fn(a), ref(b)
        dy = torch.rand_like(want)
        out.backward(dy)
        want.backward(dy)
        assert torch.allclose(a.grad, b.grad, rtol=1e-6, atol=1e-6)


def test_cupy_arrays():
    cupy = pytest.importorskip("cupy")

    import simtlab

    x = cupy.random.default_rng(1).random((300, 5001), dtype=cupy.float32) + 0.5
    assert float(abs(simtlab.sum(x, 1) - x.astype(cupy.float64).sum(1)).max() / 5001) < 1e-5
    assert bool((simtlab.amax(x, 0) == x.max(0)).all()) and float(simtlab.sum(x)) == pytest.approx(float(x.sum()),
                                                                                                   rel=1e-5)
    h = x.astype(cupy.float16)
    assert simtlab.sum(h, -1, keepdim=True).shape == (300, 1)
    assert bool((simtlab.transpose(x) == x.T).all()) and simtlab.transpose(x).flags.c_contiguous


def test_runs_on_the_callers_stream_in_cuda_graphs_and_under_torch_compile():
    import simtlab

    torch = _torch()
    x = _x(torch, (64, 100000), "bfloat16", 21)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        s = simtlab.sum(x, 1)
    side.synchronize()
    assert _rel(s, x.double().sum(1)) <= _tol("bfloat16", 100000)
    static = x.clone()
    simtlab.sum(static)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        total = simtlab.sum(static)
        top = simtlab.amax(static, 1)
    static.copy_(_x(torch, (64, 100000), "bfloat16", 22))
    graph.replay()
    torch.cuda.synchronize()
    assert _rel(total, static.double().sum()) <= _tol("bfloat16", static.numel())
    assert torch.equal(top, static.amax(1))

    def f(a):
        return simtlab.sum(simtlab.transpose(a) * 2, 1) + simtlab.amax(a, 0)

    a = _x(torch, (96, 130), "float32", 23).requires_grad_()
    compiled = torch.compile(f, fullgraph=True)
    out = compiled(a)
    assert _rel(out, (a.double().T * 2).sum(1) + a.double().amax(0)) < 1e-5
    out.sum().backward()
    assert a.grad is not None


@pytest.mark.scan
@pytest.mark.parametrize("dtype", ("float32", "int32", "int64"))
@pytest.mark.parametrize("shape", ((1, 1), (1, 7), (1, 3_000_001), (2, 1 << 20), (3, 4097), (64, 100003), (5000, 4096),
                                   (300000, 16), (2, 3, 1000)), ids=lambda s: "x".join(map(str, s)))
def test_cumsum_matches_torch(dtype, shape):
    import simtlab

    torch = _torch()
    g = torch.Generator(device="cuda").manual_seed(shape[-1])
    if dtype == "float32":
        x = torch.rand(shape, device="cuda", generator=g) * 2 - 1
        ours, ref = simtlab.cumsum(x), x.double().cumsum(-1)
        from simtlab.verify import dot_tolerance

        assert ours.dtype == torch.float32
        err = float((ours.double() - ref).norm() / ref.norm())
        assert err <= dot_tolerance("float32", shape[-1]), err
    else:
        x = torch.randint(-1000, 1000, shape, device="cuda", generator=g, dtype=getattr(torch, dtype))
        ours = simtlab.cumsum(x)
        assert ours.dtype == torch.int64 and torch.equal(ours, x.cumsum(-1))


@pytest.mark.scan
def test_cumsum_other_dims_views_wide_sums_and_gradients():
    import simtlab

    torch = _torch()
    x = torch.randint(-5, 6, (40, 33, 17), device="cuda", dtype=torch.int32)
    for dim in (0, 1, 2, -1):
        assert torch.equal(simtlab.cumsum(x, dim), x.cumsum(dim))
    big = torch.full((3, 5000), 2**30, device="cuda", dtype=torch.int32)  # (sums past int32: int64, as torch)
    assert torch.equal(simtlab.cumsum(big), big.cumsum(-1))
    odd = torch.randint(-9, 9, (4 * 999 + 1,), device="cuda", dtype=torch.int64)[1:].view(4, 999)  # unaligned
    assert torch.equal(simtlab.cumsum(odd), odd.cumsum(-1))
    assert simtlab.cumsum(torch.empty(0, 5, device="cuda")).shape == (0, 5)
    assert simtlab.cumsum(torch.tensor(3, device="cuda", dtype=torch.int32)).item() == 3
    a = (torch.rand(9, 700, device="cuda") - 0.5).requires_grad_()
    b = a.detach().clone().requires_grad_()
    dy = torch.rand(9, 700, device="cuda")
    simtlab.cumsum(a, 1).backward(dy)
    b.cumsum(1).backward(dy)
    assert torch.allclose(a.grad, b.grad, rtol=1e-5, atol=1e-4)
    with pytest.raises(TypeError, match="float32, int32 or int64"):
        simtlab.cumsum(torch.ones(4, device="cuda", dtype=torch.bfloat16))


@pytest.mark.scan
def test_cumsum_in_cuda_graphs_on_streams_and_under_torch_compile():
    import simtlab

    torch = _torch()
    x = torch.rand(1, 5_000_000, device="cuda")
    simtlab.cumsum(x)  # (the plan made outside the capture; rung 6 clears its flags inside each call)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = simtlab.cumsum(x)
    for seed in (1, 2):
        x.copy_(torch.rand(1, 5_000_000, device="cuda", generator=torch.Generator(device="cuda").manual_seed(seed)))
        graph.replay()
        torch.cuda.synchronize()
        assert float((out.double() - x.double().cumsum(-1)).norm() / x.double().cumsum(-1).norm()) < 1e-5
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        ints = simtlab.cumsum(torch.ones(8, 100000, device="cuda", dtype=torch.int32))
    side.synchronize()
    assert int(ints[:, -1].min()) == 100000

    def f(a):
        return simtlab.cumsum(a, 1).sum()

    a = torch.rand(16, 3000, device="cuda", requires_grad=True)
    torch.compile(f, fullgraph=True)(a).backward()
    assert torch.allclose(a.grad, torch.arange(3000, 0, -1, device="cuda", dtype=torch.float32).expand(16, -1))


def test_cupy_cumsum():
    cupy = pytest.importorskip("cupy")

    import simtlab

    x = cupy.arange(3 * 4099, dtype=cupy.int32).reshape(3, 4099) % 7
    out = simtlab.cumsum(x, 1)
    assert out.dtype == cupy.int64 and bool((out == cupy.cumsum(x.astype(cupy.int64), 1)).all())


def _keys(torch, n, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    if dtype == "float32":
        x = torch.randn(n, device="cuda", generator=g) * 1e3
        special = torch.tensor([-0.0, 0.0, float("inf"), -float("inf"), float("nan"), 1.0], device="cuda")
        pick = torch.randint(0, 64, (n,), device="cuda", generator=g) == 0
        x[pick] = special[torch.randint(0, 6, (int(pick.sum()),), device="cuda", generator=g)]
        x[torch.randint(0, n, (max(n // 8, 1),), device="cuda", generator=g)] = 7.0  # (ties)
        return x
    return torch.randint(-2**31, 2**31 - 1, (n,), device="cuda", generator=g, dtype=torch.int32) // 1024  # (ties)


@pytest.mark.sort
@pytest.mark.parametrize("dtype", ("float32", "int32"))
@pytest.mark.parametrize("n", (1, 5, 4097, 1_000_003, 1 << 24))
@pytest.mark.parametrize("descending", (False, True), ids=("ascending", "descending"))
def test_sort_and_argsort_match_torch_stable(dtype, n, descending):
    import simtlab

    torch = _torch()
    keys = _keys(torch, n, dtype, n)
    want_k, want_i = torch.sort(keys, stable=True, descending=descending)
    got_k = simtlab.sort(keys, descending=descending)
    assert torch.equal(got_k.view(torch.int32), want_k.view(torch.int32))  # (bits: -0.0, NaN payloads where torch has them)
    got_i = simtlab.argsort(keys, descending=descending)
    assert got_i.dtype == torch.int64 and torch.equal(got_i, want_i)
    vals = torch.arange(n, device="cuda", dtype=torch.float32) * 0.5
    k2, v2 = simtlab.sort(keys, vals, descending=descending)
    assert torch.equal(k2.view(torch.int32), want_k.view(torch.int32)) and torch.equal(v2, vals[want_i])


@pytest.mark.sort
def test_sort_edges_graphs_and_compile():
    import simtlab

    torch = _torch()
    empty = torch.empty(0, device="cuda")
    assert simtlab.sort(empty).shape == (0,) and simtlab.argsort(empty).shape == (0,)
    with pytest.raises(ValueError, match="one row of keys"):
        simtlab.sort(torch.rand(3, 4, device="cuda"))
    with pytest.raises(TypeError, match="float32, int32 or uint32"):
        simtlab.argsort(torch.rand(4, device="cuda", dtype=torch.float64))
    odd = torch.rand(4097 + 1, device="cuda")[1:]  # 4 bytes off 16: the unaligned histogram path
    assert torch.equal(simtlab.sort(odd), torch.sort(odd).values)
    keys = torch.rand(1 << 20, device="cuda")
    simtlab.argsort(keys)  # (the plan made outside the capture; the call clears its counters inside)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        order = simtlab.argsort(keys)
    for seed in (3, 4):
        keys.copy_(torch.rand(1 << 20, device="cuda", generator=torch.Generator(device="cuda").manual_seed(seed)))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(order, torch.argsort(keys, stable=True))
    compiled = torch.compile(lambda k: simtlab.argsort(k) + 1, fullgraph=True)
    assert torch.equal(compiled(keys), torch.argsort(keys, stable=True) + 1)


def test_cupy_sort_of_uint32_keys_with_values():
    cupy = pytest.importorskip("cupy")

    import simtlab

    rng = cupy.random.default_rng(5)
    keys = rng.integers(0, 2**32, 100003, dtype=cupy.uint64).astype(cupy.uint32) >> 8
    vals = rng.random(100003, dtype=cupy.float32)
    order = cupy.argsort(keys, kind="stable")
    k, v = simtlab.sort(keys, vals)
    assert bool((k == keys[order]).all()) and bool((v == vals[order]).all())
    assert bool((simtlab.argsort(keys) == order).all())
