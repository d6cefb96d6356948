"""The eager twins of the simtlab:: operators (simtlab.torch._autograd_function): the same setup and
backward as the registered operator, taken only for plain CUDA tensors outside torch.compile and
torch.func. Checked on the CPU with pure-PyTorch work in place of the kernels."""

import pytest

torch = pytest.importorskip("torch")

import simtlab.torch as st  # noqa: E402


def test_the_twin_runs_the_operator_s_own_setup_and_backward():
    x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    twin = st._autograd_function("sum", lambda t, dim, keepdim: t.sum(dim, keepdim), st._sum_setup, st._sum_grad)
    grad = torch.randn(3, dtype=torch.float64)
    (dx,) = torch.autograd.grad(twin(x, 1, False), x, grad)
    assert torch.equal(dx, grad.unsqueeze(1).expand(3, 5))

    amax = st._autograd_function("amax", lambda t, dim, keepdim: t.amax(dim, keepdim), st._amax_setup, st._amax_grad)
    y = torch.tensor([[1.0, 3.0, 3.0], [2.0, 0.0, 1.0]], dtype=torch.float64, requires_grad=True)
    (dy,) = torch.autograd.grad(amax(y, -1, True), y, torch.ones(2, 1, dtype=torch.float64))
    assert dy.tolist() == [[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]]  # (as torch.amax: shared among a row's maxima)


def test_the_twin_keeps_a_statistic_non_differentiable():
    def work(q, k, v, causal, scale):
        return q * 2, q.new_zeros(q.shape[:3])

    setup = st._attention_setup
    seen = {}

    def backward(ctx, grad, grad_lse):
        seen["lse"] = grad_lse
        return grad * 2, None, None, None, None

    twin = st._autograd_function("attention", work, setup, backward)
    q = torch.randn(1, 2, 3, 4, requires_grad=True)
    out, lse = twin(q, q.detach(), q.detach(), True, None)
    assert not lse.requires_grad and out.requires_grad
    (dq,) = torch.autograd.grad(out.sum(), q)
    assert torch.equal(dq, torch.full_like(q, 2.0))


def test_only_plain_cuda_tensors_outside_a_tracer_take_the_twin():
    cpu = torch.ones(2)
    assert not st._eager(cpu)
    assert not st._eager(torch.empty(2, device="meta"))

    class Sub(torch.Tensor):
        pass

    assert not st._eager(cpu.as_subclass(Sub))
    inside = {}

    def f(t):
        inside["eager"] = st._eager()  # (under torch.func's transforms: the registered operator)
        return t.sum()

    torch.func.grad(f)(torch.ones(2))
    assert inside["eager"] is False
    assert st._eager(None)  # (absent operands are no reason to leave the twin)


def test_every_public_torch_operator_has_its_twin():
    for name in ("_MATMUL", "_SOFTMAX", "_NORM", "_SUM", "_AMAX", "_CUMSUM_FN", "_SPMV", "_ATTENTION", "_CONV2D",
                 "_TRANSPOSE", "_STENCIL"):
        fn = getattr(st, name)
        assert issubclass(fn.__self__, torch.autograd.Function), name
