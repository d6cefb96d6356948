"""simtlab.conv2d as users call it (GPU): PyTorch tensors and CuPy arrays against a float64
correlation, every filter size (3 to 15), images that are multiples of no tile (one pixel, widths
not in groups of four, an image off 16 bytes), batches, non-contiguous views, two filters on two
streams at once, CUDA graphs, torch.compile(fullgraph=True) and the gradients in x and weight."""

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.api, pytest.mark.conv2d]


def _torch():
    return pytest.importorskip("torch")


def _reference(torch, x, w):
    """float64 F.conv2d of each image (the correlation, zeros outside)."""
    h, wd = x.shape[-2:]
    d = w.shape[0]
    out = torch.nn.functional.conv2d(x.double().reshape(-1, 1, h, wd), w.double().reshape(1, 1, d, d), padding=d // 2)
    return out.reshape(x.shape)


def _err(ours, ref):
    return float((ours.double() - ref).norm() / max(float(ref.norm()), 1e-300))


def _tol(d):
    from simtlab.verify import dot_tolerance

    return dot_tolerance("float32", d * d)


@pytest.mark.parametrize("d", [3, 5, 7, 9, 11, 13, 15])
@pytest.mark.parametrize("shape", [(1, 1), (33, 65), (1000, 1013), (2, 3, 130, 257)], ids=lambda s: "x".join(map(str, s)))
def test_conv2d_matches_float64(shape, d):
    import simtlab

    torch = _torch()
    g = torch.Generator(device="cuda").manual_seed(d * 1000 + shape[-1])
    x = torch.rand(shape, device="cuda", generator=g) * 2 - 1
    w = (torch.rand(d, d, device="cuda", generator=g) * 2 - 1) / d
    out = simtlab.conv2d(x, w)
    assert out.shape == x.shape and out.dtype == torch.float32
    assert _err(out, _reference(torch, x, w)) <= _tol(d)
    off = torch.rand(x.numel() + 1, device="cuda", generator=g)[1:].view(shape)  # 4 bytes off: 4-byte copies
    assert _err(simtlab.conv2d(off, w), _reference(torch, off, w)) <= _tol(d)


def test_views_empty_batches_and_bad_input():
    import simtlab

    torch = _torch()
    x = torch.rand(40, 50, device="cuda")
    w = torch.rand(5, 5, device="cuda")
    assert _err(simtlab.conv2d(x.T, w), _reference(torch, x.T, w)) <= _tol(5)  # copied first
    assert _err(simtlab.conv2d(x, w.T), _reference(torch, x, w.T)) <= _tol(5)
    assert simtlab.conv2d(torch.empty(0, 7, 9, device="cuda"), w).shape == (0, 7, 9)
    with pytest.raises(ValueError, match="odd size"):
        simtlab.conv2d(x, torch.rand(4, 4, device="cuda"))
    with pytest.raises(TypeError, match="float32"):
        simtlab.conv2d(x.half(), w.half())


def test_two_filters_on_two_streams_do_not_race():
    import simtlab

    torch = _torch()
    x = torch.rand(8, 512, 512, device="cuda")
    w1, w2 = torch.rand(7, 7, device="cuda"), -torch.rand(7, 7, device="cuda")
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    for s in (s1, s2):
        s.wait_stream(torch.cuda.current_stream())
    outs = []
    for _ in range(5):
        with torch.cuda.stream(s1):
            outs.append((simtlab.conv2d(x, w1), w1))
        with torch.cuda.stream(s2):
            outs.append((simtlab.conv2d(x, w2), w2))
    torch.cuda.synchronize()
    for out, w in outs:
        assert _err(out, _reference(torch, x, w)) <= _tol(7)


def test_graphs_compile_and_gradients():
    import simtlab

    torch = _torch()
    x = torch.rand(3, 65, 129, device="cuda")
    w = torch.rand(3, 3, device="cuda")
    simtlab.conv2d(x, w)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = simtlab.conv2d(x, w)
    x.copy_(torch.rand_like(x))
    graph.replay()
    torch.cuda.synchronize()
    assert _err(captured, _reference(torch, x, w)) <= _tol(3)

    compiled = torch.compile(lambda a, b: simtlab.conv2d(a * 2, b).sum(), fullgraph=True)
    expected = float(_reference(torch, x * 2, w).sum())
    assert abs(float(compiled(x, w)) - expected) <= 1e-5 * abs(expected)

    xs, ws = x.clone().requires_grad_(), torch.rand(5, 5, device="cuda").requires_grad_()
    g = torch.rand_like(x)
    (simtlab.conv2d(xs, ws) * g).sum().backward()
    xd, wd = x.double().requires_grad_(), ws.detach().double().requires_grad_()
    (_reference(torch, xd, wd) * g.double()).sum().backward()
    assert _err(xs.grad, xd.grad) <= _tol(5)
    # (dweight through PyTorch's grouped correlation, TF32 where cuDNN's defaults allow it)
    assert _err(ws.grad, wd.grad) <= 2e-3


def test_cupy_arrays():
    cupy = pytest.importorskip("cupy")
    from cupyx.scipy import ndimage

    import simtlab

    rng = cupy.random.default_rng(5)
    x = rng.random((2, 100, 77), dtype=cupy.float32)
    w = rng.random((7, 7), dtype=cupy.float32)
    out = simtlab.conv2d(x, w)
    for i in range(2):
        ref = ndimage.correlate(x[i].astype(cupy.float64), w.astype(cupy.float64), mode="constant", cval=0.0)
        assert float(cupy.linalg.norm(out[i] - ref) / cupy.linalg.norm(ref)) <= _tol(7)
