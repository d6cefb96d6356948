"""The row operators as users call them (GPU): simtlab.softmax, log_softmax, layer_norm and
rms_norm on PyTorch tensors and CuPy arrays - values and gradients against PyTorch's own ops
within the type's tolerance, odd and long rows, one element, empty leading dimensions, other
dims and non-contiguous inputs, the caller's stream, CUDA graphs, torch.compile(fullgraph=True)."""

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.rows, pytest.mark.api]

TYPES = ("float32", "bfloat16", "float16")
COLS = (1, 7, 128, 1000, 1024, 2052, 4096, 6145, 8192, 12289, 16384, 32768, 40000)


def _torch():
    return pytest.importorskip("torch")


def _tol(dtype: str, length: int) -> float:
    """PyTorch's output and ours both round once to the storage type (fp32 sums of `length` values
    aside): a few units of that rounding, relative, in the norm."""
    from simtlab.verify import UNIT_ROUNDOFF, dot_tolerance

    return 2 * dot_tolerance("float32", length) + 4 * UNIT_ROUNDOFF[dtype]


def _error(ours, ref) -> float:
    ours, ref = ours.double(), ref.double()
    return float((ours - ref).norm() / max(float(ref.norm()), 1e-300))


def _x(torch, shape, dtype, seed, scale=4.0, offset=0.0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return ((torch.rand(shape, device="cuda", generator=g) * 2 - 1) * scale + offset).to(getattr(torch, dtype))


def _exact(torch, x):
    """The float64 reference's input: x's own (rounded) values."""
    return x.double()


@pytest.mark.softmax
@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("cols", COLS)
def test_softmax_and_log_softmax_match_float64(dtype, cols):
    import simtlab

    torch = _torch()
    x = _x(torch, (5, cols), dtype, cols, scale=8)
    for ours, ref in ((simtlab.softmax(x), torch.softmax(_exact(torch, x), -1)),
                      (simtlab.log_softmax(x), torch.log_softmax(_exact(torch, x), -1))):
        assert ours.dtype == x.dtype and ours.shape == x.shape and ours.is_contiguous()
        assert _error(ours, ref) <= _tol(dtype, cols), (dtype, cols)


@pytest.mark.layernorm
@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("cols", COLS)
def test_layer_norm_and_rms_norm_match_float64(dtype, cols):
    import torch.nn.functional as F

    import simtlab

    torch = _torch()
    x = _x(torch, (6, cols), dtype, cols, scale=2, offset=3)
    w, b = _x(torch, (cols,), dtype, 1, 0.5, 1.0), _x(torch, (cols,), dtype, 2, 0.5)
    xd, wd, bd = (_exact(torch, a) for a in (x, w, b))
    for ours, ref in ((simtlab.layer_norm(x, w, b), F.layer_norm(xd, (cols,), wd, bd, 1e-5)),
                      (simtlab.layer_norm(x), F.layer_norm(xd, (cols,), None, None, 1e-5)),
                      (simtlab.rms_norm(x, w, eps=1e-6), F.rms_norm(xd, (cols,), wd, 1e-6)),
                      (simtlab.rms_norm(x), F.rms_norm(xd, (cols,), None, torch.finfo(x.dtype).eps))):
        assert ours.dtype == x.dtype and ours.shape == x.shape
        assert _error(ours, ref) <= _tol(dtype, cols), (dtype, cols)


def _grads(torch, fn, inputs, dy):
    leaves = [a.detach().requires_grad_() if a is not None else None for a in inputs]
    out = fn(*leaves)
    out.backward(dy)
    return [a.grad if a is not None else None for a in leaves]


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize("cols", (3, 1024, 4100, 8192, 20000))
@pytest.mark.parametrize("rows", (1, 300))
def test_gradients_match_float64(dtype, cols, rows):
    """softmax, log_softmax, layer_norm (dx, dw, db) and rms_norm (dx, dw) backward through
    autograd, against the same ops' float64 gradients at the same (rounded) inputs."""
    import torch.nn.functional as F

    import simtlab

    torch = _torch()
    x = _x(torch, (rows, cols), dtype, rows + cols, scale=2, offset=1)
    w, b = _x(torch, (cols,), dtype, 3, 0.5, 1.0), _x(torch, (cols,), dtype, 4, 0.5)
    dy = _x(torch, (rows, cols), dtype, 5, 1)
    cases = [
        (simtlab.softmax, lambda a: torch.softmax(a, -1), (x,)),
        (simtlab.log_softmax, lambda a: torch.log_softmax(a, -1), (x,)),
        (lambda a, c, d: simtlab.layer_norm(a, c, d), lambda a, c, d: F.layer_norm(a, (cols,), c, d, 1e-5), (x, w, b)),
        (lambda a, c: simtlab.rms_norm(a, c, 1e-6), lambda a, c: F.rms_norm(a, (cols,), c, 1e-6), (x, w)),
    ]
    for ours_fn, ref_fn, inputs in cases:
        ours = _grads(torch, ours_fn, inputs, dy)
        ref = _grads(torch, ref_fn, [a.double() for a in inputs], dy.double())
        for g, r in zip(ours, ref):  # (a backward reads the forward's rounded output: twice the forward's bound)
            assert g.dtype == inputs[0].dtype and g.shape == r.shape
            assert _error(g, r) <= 2 * _tol(dtype, max(rows, cols)), (dtype, rows, cols)


def test_fp32_weight_beside_bf16_activations_gets_an_fp32_gradient():
    import simtlab

    torch = _torch()
    x = _x(torch, (64, 512), "bfloat16", 7).requires_grad_()
    w = torch.ones(512, device="cuda", requires_grad=True)
    simtlab.layer_norm(x, w).sum().backward()
    assert w.grad.dtype == torch.float32 and x.grad.dtype == torch.bfloat16


def test_any_leading_dimensions_other_dims_views_and_empty_ones():
    import simtlab

    torch = _torch()
    x = _x(torch, (2, 3, 5, 96), "float32", 9)
    assert _error(simtlab.softmax(x), torch.softmax(x.double(), -1)) < 1e-5
    for dim in (0, 1, -2):
        y = simtlab.softmax(x, dim=dim)
        assert y.shape == x.shape and _error(y, torch.softmax(x.double(), dim)) < 1e-5
    view = x[..., ::2]  # non-contiguous rows: copied inside the call
    assert _error(simtlab.log_softmax(view), torch.log_softmax(view.double(), -1)) < 1e-5
    t = x.transpose(1, 3)
    assert _error(simtlab.layer_norm(t), torch.nn.functional.layer_norm(t.double(), (t.shape[-1],))) < 1e-5
    assert simtlab.softmax(torch.zeros(0, 7, device="cuda")).shape == (0, 7)
    assert simtlab.layer_norm(torch.zeros(3, 0, 4, device="cuda")).shape == (3, 0, 4)
    one = torch.tensor(2.5, device="cuda")
    assert float(simtlab.softmax(one)) == 1.0 and float(simtlab.log_softmax(one)) == 0.0
    x0 = torch.zeros(0, 16, device="cuda", requires_grad=True)
    w0 = torch.ones(16, device="cuda", requires_grad=True)
    simtlab.layer_norm(x0, w0).sum().backward()
    assert float(w0.grad.abs().sum()) == 0.0  # (a sum over no rows)


def test_bad_input_is_one_line():
    import simtlab

    torch = _torch()
    x = _x(torch, (4, 8), "float32", 1)
    for call, match in ((lambda: simtlab.layer_norm(x, torch.ones(7, device="cuda")), r"one value per column, \(8,\)"),
                        (lambda: simtlab.softmax(x, dim=2), "dim 2 is out of range"),
                        (lambda: simtlab.softmax(x.double()), "float32, bfloat16 or float16"),
                        (lambda: simtlab.softmax(x.cpu()), "on cpu")):
        with pytest.raises((TypeError, ValueError), match=match):
            call()


def test_cupy_arrays_fp32_and_fp16():
    import cupy

    import simtlab

    rng = cupy.random.default_rng(3)
    for dtype in ("float32", "float16"):
        x = (rng.random((33, 1000), dtype=cupy.float32) * 4 - 2).astype(dtype)
        ref = cupy.exp(x.astype(cupy.float64) - x.astype(cupy.float64).max(axis=1, keepdims=True))
        ref /= ref.sum(axis=1, keepdims=True)
        y = simtlab.softmax(x)
        assert isinstance(y, cupy.ndarray) and y.dtype == x.dtype
        assert float(cupy.linalg.norm(y.astype(cupy.float64) - ref) / cupy.linalg.norm(ref)) < _tol(dtype, 1000)
        w = cupy.ones(1000, dtype=dtype)
        z = simtlab.rms_norm(x, w, eps=1e-6)
        xd = x.astype(cupy.float64)
        zr = xd / cupy.sqrt((xd * xd).mean(axis=1, keepdims=True) + 1e-6)
        assert float(cupy.linalg.norm(z.astype(cupy.float64) - zr) / cupy.linalg.norm(zr)) < _tol(dtype, 1000)
    odd = cupy.ones(4 * 8 + 1, dtype=cupy.float32)[1:].reshape(4, 8)  # a base 4 bytes off: the unaligned build
    assert float(abs(simtlab.softmax(odd).sum(axis=1) - 1).max()) < 1e-6


def test_runs_on_the_callers_stream_and_in_cuda_graphs():
    import simtlab

    torch = _torch()
    x = _x(torch, (512, 4096), "bfloat16", 11)
    w = torch.ones(4096, device="cuda", dtype=torch.bfloat16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = simtlab.rms_norm(x, w)
    side.synchronize()
    assert _error(y, torch.nn.functional.rms_norm(x.double(), (4096,), w.double(), torch.finfo(x.dtype).eps)) < 1e-2
    static = x.clone()
    simtlab.softmax(static)  # (plans made outside the capture)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = simtlab.softmax(static)
    static.copy_(_x(torch, (512, 4096), "bfloat16", 12))
    graph.replay()
    torch.cuda.synchronize()
    assert _error(out, torch.softmax(static.double(), -1)) <= _tol("bfloat16", 4096)


def test_torch_compile_fullgraph_traces_forward_and_backward():
    import simtlab

    torch = _torch()

    def block(x, w, b):
        h = simtlab.layer_norm(x, w, b)
        return simtlab.softmax(h @ h.mT / 8, -1) @ simtlab.rms_norm(h, w)

    compiled = torch.compile(block, fullgraph=True)
    x = _x(torch, (4, 64, 256), "float32", 13).requires_grad_()
    w = torch.ones(256, device="cuda", requires_grad=True)
    b = torch.zeros(256, device="cuda", requires_grad=True)
    eager = block(x, w, b)
    traced = compiled(x, w, b)
    assert _error(traced, eager) < 1e-5
    traced.sum().backward()
    assert x.grad is not None and w.grad is not None and b.grad is not None
