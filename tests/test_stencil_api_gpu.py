"""simtlab.stencil as users call it (GPU): PyTorch tensors and CuPy arrays against a float64 step,
grids that are multiples of no tile (one point, rows not in groups of four, a grid off 16 bytes),
custom coefficients, empty grids, non-contiguous views, the caller's stream, CUDA graphs,
torch.compile(fullgraph=True) and the gradient (the step is its own adjoint)."""

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.api, pytest.mark.stencil]

TOL = 16 * 2.0**-24  # seven fp32 roundings a point, 2x margin (ops/stencil.tolerance)


def _torch():
    return pytest.importorskip("torch")


def _reference(torch, u, c0, c1):
    v = torch.nn.functional.pad(u.double(), (1, 1, 1, 1, 1, 1))
    faces = (v[:-2, 1:-1, 1:-1] + v[2:, 1:-1, 1:-1] + v[1:-1, :-2, 1:-1] + v[1:-1, 2:, 1:-1]
             + v[1:-1, 1:-1, :-2] + v[1:-1, 1:-1, 2:])
    return c0 * v[1:-1, 1:-1, 1:-1] + c1 * faces


def _err(ours, ref):
    return float((ours.double() - ref).norm() / max(float(ref.norm()), 1e-300))


@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 5, 7), (17, 33, 65), (40, 100, 130), (70, 64, 256)],
                         ids=lambda s: "x".join(map(str, s)))
def test_stencil_matches_float64(shape):
    import simtlab

    torch = _torch()
    g = torch.Generator(device="cuda").manual_seed(sum(shape))
    u = torch.rand(shape, device="cuda", generator=g) * 2 - 1
    out = simtlab.stencil(u)
    assert out.shape == u.shape and out.dtype == torch.float32
    assert _err(out, _reference(torch, u, 0.4, 0.1)) <= TOL
    assert _err(simtlab.stencil(u, c0=-1.5, c1=0.25), _reference(torch, u, -1.5, 0.25)) <= TOL
    flat = torch.rand(u.numel() + 1, device="cuda", generator=g)[1:].view(shape)  # 4 bytes off: 4-byte copies
    assert _err(simtlab.stencil(flat), _reference(torch, flat, 0.4, 0.1)) <= TOL


def test_views_empty_grids_and_bad_input():
    import simtlab

    torch = _torch()
    u = torch.rand(9, 20, 30, device="cuda")
    view = u.transpose(0, 2)  # (30, 20, 9), not contiguous: copied first
    assert _err(simtlab.stencil(view), _reference(torch, view, 0.4, 0.1)) <= TOL
    assert simtlab.stencil(torch.empty(0, 4, 5, device="cuda")).shape == (0, 4, 5)
    with pytest.raises(ValueError, match="3-D grid"):
        simtlab.stencil(torch.rand(4, 5, device="cuda"))
    with pytest.raises(TypeError, match="float32"):
        simtlab.stencil(torch.rand(4, 5, 6, device="cuda").double())


def test_streams_graphs_compile_and_gradient():
    import simtlab

    torch = _torch()
    u = torch.rand(33, 65, 129, device="cuda")
    ref = _reference(torch, u, 0.4, 0.1)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = simtlab.stencil(u)
    side.synchronize()
    assert _err(out, ref) <= TOL
    simtlab.stencil(u)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = simtlab.stencil(u)
    u.copy_(torch.rand_like(u))
    graph.replay()
    torch.cuda.synchronize()
    assert _err(captured, _reference(torch, u, 0.4, 0.1)) <= TOL

    compiled = torch.compile(lambda x: simtlab.stencil(x * 2, 0.3, 0.2).sum(), fullgraph=True)
    expected = float(_reference(torch, u * 2, 0.3, 0.2).sum())
    assert abs(float(compiled(u)) - expected) <= 1e-5 * abs(expected)

    x = u.clone().requires_grad_()
    w = torch.rand_like(u)
    (simtlab.stencil(x, 0.7, -0.2) * w).sum().backward()
    xd = u.double().requires_grad_()
    (_reference(torch, xd, 0.7, -0.2) * w.double()).sum().backward()
    assert _err(x.grad, xd.grad) <= TOL


def test_cupy_arrays():
    cupy = pytest.importorskip("cupy")

    import simtlab

    u = cupy.random.default_rng(3).random((20, 31, 47), dtype=cupy.float32)
    v = cupy.pad(u.astype(cupy.float64), 1)
    faces = (v[:-2, 1:-1, 1:-1] + v[2:, 1:-1, 1:-1] + v[1:-1, :-2, 1:-1] + v[1:-1, 2:, 1:-1]
             + v[1:-1, 1:-1, :-2] + v[1:-1, 1:-1, 2:])
    ref = 0.4 * v[1:-1, 1:-1, 1:-1] + 0.1 * faces
    out = simtlab.stencil(u)
    assert float(cupy.linalg.norm(out - ref) / cupy.linalg.norm(ref)) <= TOL
