"""simtlab.spmv as users call it (GPU): torch sparse CSR tensors (int64 and int32 indices) and
CuPy csr_matrix, against a float64 product: uniform, power-law (one row of 50000) and empty rows,
alpha / beta / y, no nonzeros, the caller's stream, CUDA graphs, torch.compile and dx."""

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.api, pytest.mark.spmv]


def _torch():
    return pytest.importorskip("torch")


def _matrix(torch, n, cols, lengths, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    crow = torch.zeros(n + 1, dtype=torch.int64, device="cuda")
    crow[1:] = torch.cumsum(torch.as_tensor(lengths, device="cuda"), 0)
    nnz = int(crow[-1])
    col = torch.randint(0, cols, (nnz,), device="cuda", generator=g)
    val = torch.rand(nnz, device="cuda", generator=g) * 2 - 1
    return torch.sparse_csr_tensor(crow, col, val, (n, cols))


def _err(ours, ref):
    return float((ours.double() - ref).norm() / max(float(ref.norm()), 1e-300))


def _lengths(profile, n):
    """Row lengths: rows alike, a row of 50000 among short ones, empty rows, or (wide) 40-89."""
    if profile == "uniform":
        return [16] * n
    if profile == "powerlaw":
        lengths = [int(6 * (1 + i % 97) ** 0.5) for i in range(n)]
        lengths[123] = 50000
        return lengths
    if profile == "wide":
        return [40 + i % 50 for i in range(n)]
    return [0 if i % 3 else 5 for i in range(n)]


@pytest.mark.parametrize("profile", ["uniform", "powerlaw", "empty_rows"])
def test_spmv_matches_float64(profile):
    import simtlab

    torch = _torch()
    n, cols = 20001, 7000
    lengths = _lengths(profile, n)
    A = _matrix(torch, n, cols, lengths, len(profile))
    x = torch.rand(cols, device="cuda")
    y = torch.rand(n, device="cuda")
    dense = A.to_dense().double()
    from simtlab.verify import dot_tolerance

    tol = dot_tolerance("float32", max(lengths))
    assert _err(simtlab.spmv(A, x), dense @ x.double()) <= tol
    out = simtlab.spmv(A, x, alpha=2.0, beta=-0.5, y=y)
    assert _err(out, 2 * (dense @ x.double()) - 0.5 * y.double()) <= tol
    A32 = torch.sparse_csr_tensor(A.crow_indices().int(), A.col_indices().int(), A.values(), A.shape)
    assert _err(simtlab.spmv(A32, x), dense @ x.double()) <= tol


def test_spmv_edges_streams_graphs_compile_and_dx():
    import simtlab

    torch = _torch()
    empty = torch.sparse_csr_tensor(torch.zeros(5, dtype=torch.int64), torch.zeros(0, dtype=torch.int64),
                                    torch.zeros(0), (4, 3)).cuda()
    y = torch.rand(4, device="cuda")
    assert torch.equal(simtlab.spmv(empty, torch.rand(3, device="cuda")), torch.zeros(4, device="cuda"))
    assert torch.allclose(simtlab.spmv(empty, torch.rand(3, device="cuda"), beta=2.0, y=y), 2 * y)
    with pytest.raises(ValueError, match="x has shape"):
        simtlab.spmv(_matrix(torch, 10, 5, [2] * 10, 1), torch.rand(6, device="cuda"))
    A = _matrix(torch, 3000, 3000, [9] * 3000, 2)
    A32 = torch.sparse_csr_tensor(A.crow_indices().int(), A.col_indices().int(), A.values(), A.shape)
    x = torch.rand(3000, device="cuda")
    ref = A.to_dense() @ x
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = simtlab.spmv(A32, x)
    side.synchronize()
    assert _err(out, ref.double()) < 1e-5
    simtlab.spmv(A32, x)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = simtlab.spmv(A32, x)
    x.copy_(torch.rand(3000, device="cuda"))
    graph.replay()
    torch.cuda.synchronize()
    assert _err(captured, (A.to_dense() @ x).double()) < 1e-5
    xs = x.clone().requires_grad_()
    simtlab.spmv(A32, xs, alpha=3.0).sum().backward()
    assert torch.allclose(xs.grad, 3 * A.to_dense().sum(0), rtol=1e-5, atol=1e-5)


def test_cupy_csr_matrix_and_its_plan():
    cupy = pytest.importorskip("cupy")
    sparse = pytest.importorskip("cupyx.scipy.sparse")

    import simtlab

    A = sparse.random(5000, 70000, density=0.003, format="csr", dtype=cupy.float32, random_state=3)
    x = cupy.random.default_rng(4).random(70000, dtype=cupy.float32)
    ref = A.astype(cupy.float64) @ x.astype(cupy.float64)
    plan = simtlab.spmv_plan(A)  # (and a prepared plan of it: two column chunks)
    for out in (simtlab.spmv(A, x), plan(x)):
        assert isinstance(out, cupy.ndarray) and float(cupy.linalg.norm(out - ref) / cupy.linalg.norm(ref)) < 1e-5
    with pytest.raises(TypeError, match="made from a CuPy"):
        plan(_torch().rand(70000, device="cuda"))


@pytest.mark.parametrize("profile", ["uniform", "powerlaw", "empty_rows", "wide"])
def test_a_prepared_matrix_matches_float64(profile):
    """simtlab.spmv_plan (rung 6: row blocks, long rows in pieces) against a float64 product: rows
    alike, a row of 50000 among short ones, empty rows, and columns over several 65536-column chunks;
    alpha / beta / y; int64 and int32 indices; the plan holds A as it was."""
    import simtlab

    torch = _torch()
    n, cols = (3001, 200000) if profile == "wide" else (20001, 7000)
    lengths = _lengths(profile, n)
    A = _matrix(torch, n, cols, lengths, len(profile))
    x, y = torch.rand(cols, device="cuda"), torch.rand(n, device="cuda")
    dense = A.to_dense().double()
    from simtlab.verify import dot_tolerance

    tol = dot_tolerance("float32", max(lengths))
    plan = simtlab.spmv_plan(A)
    assert "rung 6" in plan.describe() and plan.shape == (n, cols)
    assert _err(plan(x), dense @ x.double()) <= tol
    assert _err(plan(x, alpha=2.0, beta=-0.5, y=y), 2 * (dense @ x.double()) - 0.5 * y.double()) <= tol
    A32 = torch.sparse_csr_tensor(A.crow_indices().int(), A.col_indices().int(), A.values().clone(), A.shape)
    plan32 = simtlab.spmv_plan(A32)
    A32.values().mul_(2)  # (after the plan: its copy is of A as it was)
    assert _err(plan32(x), dense @ x.double()) <= tol


def test_a_prepared_matrix_s_edges_streams_graphs_compile_and_gradients():
    import simtlab

    torch = _torch()
    empty = torch.sparse_csr_tensor(torch.zeros(5, dtype=torch.int64), torch.zeros(0, dtype=torch.int64),
                                    torch.zeros(0), (4, 3)).cuda()
    y = torch.rand(4, device="cuda")
    plan = simtlab.spmv_plan(empty)
    assert torch.equal(plan(torch.rand(3, device="cuda")), torch.zeros(4, device="cuda"))
    assert torch.allclose(plan(torch.rand(3, device="cuda"), beta=2.0, y=y), 2 * y)
    A = _matrix(torch, 3000, 2500, [9] * 2999 + [4000], 2)  # (one long row: two launches)
    plan = simtlab.spmv_plan(A)
    with pytest.raises(ValueError, match="x has shape"):
        plan(torch.rand(3000, device="cuda"))
    with pytest.raises(TypeError, match="float32"):
        plan(torch.rand(2500, device="cuda", dtype=torch.float64))
    x = torch.rand(2500, device="cuda")
    ref = A.to_dense() @ x
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = plan(x)
    side.synchronize()
    assert _err(out, ref.double()) < 1e-5
    plan(x)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = plan(x)
    x.copy_(torch.rand(2500, device="cuda"))
    graph.replay()
    torch.cuda.synchronize()
    assert _err(captured, (A.to_dense() @ x).double()) < 1e-5
    xs, ys = x.clone().requires_grad_(), torch.rand(3000, device="cuda", requires_grad=True)
    plan(xs, alpha=3.0, beta=0.5, y=ys).sum().backward()
    assert torch.allclose(xs.grad, 3 * A.to_dense().sum(0), rtol=1e-5, atol=1e-5)
    assert torch.allclose(ys.grad, torch.full_like(ys, 0.5))
    compiled = torch.compile(lambda v: plan(v, alpha=2.0) + 1.0, fullgraph=True)
    assert _err(compiled(x) - 1.0, 2 * (A.to_dense() @ x).double()) < 1e-5



def test_a_layout_wrong_for_its_matrix_is_refused_when_the_plan_is_made(monkeypatch):
    """The plan's check (one product of a random x against the merge path's, within the worst-case
    rounding) refuses a layout that does not give A x back - here one whose values were doubled."""
    import simtlab
    from simtlab.ops import spmv as ops

    torch = _torch()
    A = _matrix(torch, 3000, 2500, [9] * 3000, 5)
    simtlab.spmv_plan(A)  # (the real layout passes)
    made = ops.row_block_layout

    def doubled(*args, **kwargs):
        blk_row, cta_blk, seg_ptr, idx, vals, chunks = made(*args, **kwargs)
        return blk_row, cta_blk, seg_ptr, idx, 2 * vals, chunks

    monkeypatch.setattr(ops, "row_block_layout", doubled)
    with pytest.raises(RuntimeError, match="differs from the merge path's on"):
        simtlab.spmv_plan(A)
    assert "rung 6" in simtlab.spmv_plan(A, check=False).describe()
