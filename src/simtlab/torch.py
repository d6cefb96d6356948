"""simtlab's kernels as PyTorch operators: `simtlab.torch.matmul(a, b)` (the tensor-core GEMM) and the
row operators `softmax`, `log_softmax`, `layer_norm`, `rms_norm` (also reached as simtlab.softmax
etc. with a tensor).

Registered with torch.library as `simtlab::matmul` - a custom operator with a fake (meta)
implementation, so `torch.compile(fullgraph=True)` traces it as one node without a graph break,
and with autograd, whose backward runs the same operator on transposed views (dA = dC @ B^T,
dB = A^T @ dC: rung 6 reads them with no copy). The product is written in the inputs' type, as
torch.mm does (fp32 sums, rounded once at the end).

    import simtlab.torch
    y = simtlab.torch.matmul(x, w)          # x: (..., K) bf16 / fp16 CUDA, w: (K, N); or two (B, M, K), (B, K, N)

The row operators are `simtlab::softmax`, `simtlab::log_softmax`, `simtlab::layer_norm` and
`simtlab::rms_norm`, each with a fake implementation and with autograd through its own fused
backward operator (`simtlab::softmax_backward`, `simtlab::norm_backward`: rung 5 of the softmax
ladder; the layernorm ladder's rung 6 on Hopper, rung 5 elsewhere). Outputs are contiguous, in the input's type; a weight or bias of another type
than x (an fp32 weight beside bf16 activations) is converted to x's type for the kernel and its
gradient back to its own type.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch

from .api import gemm_tc
from .arrays import layout_of
from .operator import call, call_along, contiguous, named, reduce_along
from .ops.stencil import C0 as STENCIL_C0, C1 as STENCIL_C1

__all__ = ["matmul", "softmax", "log_softmax", "layer_norm", "rms_norm", "sum", "amax", "cumsum", "transpose", "stencil",
           "conv2d", "sort", "argsort", "attention", "spmv"]

_TYPES = {torch.float16: "float16", torch.bfloat16: "bfloat16"}


def _no_context(ctx, inputs, output) -> None:
    """register_autograd's setup for a backward that needs nothing saved."""


_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _eager(*tensors) -> bool:
    """Plain CUDA tensors with no tracer about (torch.compile, fake or meta tensors, torch.func's
    transforms): the call may skip torch.library's dispatch - about 40 us of Python a call with
    autograd on (measured on an H100's host, run c4799c8) - for `_autograd_function`'s twin of the
    operator; anything else goes through the registered operator."""
    if torch.compiler.is_compiling() or torch._C._are_functorch_transforms_active():
        return False
    for t in tensors:
        if t is not None and (type(t) not in _PLAIN or not t.is_cuda):
            return False
    return True


def _autograd_function(name: str, work, setup, backward):
    """An autograd.Function running an operator's own work with its registered setup_context and
    backward - the same forward, the same saved tensors, the same backward kernels - without the
    operator dispatch (what eager calls run; see _eager). The forward takes ctx itself: a Function
    with a separate setup_context binds its arguments by inspect.signature on every call (about 25
    us, measured: run 17eec5d), and torch.func's transforms, which would need that form, never
    reach here."""

    def forward(ctx, *inputs):
        output = work(*inputs)
        setup(ctx, inputs, output)
        return output

    methods = {"forward": staticmethod(forward), "backward": staticmethod(backward)}
    return type(f"{name}_eager", (torch.autograd.Function,), methods).apply


def _readable(x: torch.Tensor) -> torch.Tensor:
    """x itself where simtlab reads it in place (row-major or a transposed view), else a
    contiguous copy (an expanded gradient, a sliced view)."""
    return x if layout_of(tuple(x.shape), tuple(x.stride())) is not None else x.contiguous()


def _check(a: torch.Tensor, b: torch.Tensor) -> None:
    if a.dtype not in _TYPES or b.dtype != a.dtype:
        raise TypeError(f"simtlab.torch.matmul takes two float16 or two bfloat16 tensors, got {a.dtype} and {b.dtype}")
    if a.dim() < 2 or b.dim() not in (2, a.dim()) or (a.dim() > 3 and b.dim() != 2):
        raise ValueError(f"simtlab.torch.matmul takes matrices, batches of them (3-D, both), or any leading dimensions "
                         f"of A against one matrix B; got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[-1] != b.shape[-2] or (b.dim() == 3 and a.shape[0] != b.shape[0]):
        raise ValueError(f"simtlab.torch.matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} do not multiply")


def matmul_work(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """simtlab::matmul's work."""
    _check(a, b)
    if a.dim() > b.dim():  # (..., K) @ (K, N): the leading dimensions as rows of one product (a linear layer)
        rows = _readable(a.reshape(-1, a.shape[-1]))
        return gemm_tc(rows, _readable(b), out_dtype=_TYPES[a.dtype]).view(*a.shape[:-1], b.shape[-1])
    return gemm_tc(_readable(a), _readable(b), out_dtype=_TYPES[a.dtype])


@torch.library.custom_op("simtlab::matmul", mutates_args=())
def _matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return matmul_work(a, b)


@_matmul.register_fake
def _matmul_fake(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    _check(a, b)
    return a.new_empty((*a.shape[:-1], b.shape[-1]))


def _setup_context(ctx, inputs, output) -> None:
    a, b = inputs
    ctx.save_for_backward(a, b)


def _backward(ctx, grad: torch.Tensor):
    a, b = ctx.saved_tensors
    grad_a = matmul(grad, b.mT) if ctx.needs_input_grad[0] else None
    grad_b = None
    if ctx.needs_input_grad[1]:  # (one B for all leading dimensions of A: their products summed, as one GEMM)
        grad_b = (matmul(a.reshape(-1, a.shape[-1]).mT, grad.reshape(-1, grad.shape[-1])) if a.dim() > b.dim()
                  else matmul(a.mT, grad))
    return grad_a, grad_b


_matmul.register_autograd(_backward, setup_context=_setup_context)
_MATMUL = _autograd_function("matmul", matmul_work, _setup_context, _backward)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b on simtlab's tensor-core GEMM (float16 / bfloat16): two matrices, two 3-D batches, or
    any leading dimensions of a against one matrix b; differentiable and traceable by torch.compile."""
    return _MATMUL(a, b) if _eager(a, b) else torch.ops.simtlab.matmul(a, b)


# --- the row operators ------------------------------------------------------------------------------

_ROW_TYPES = (torch.float32, torch.bfloat16, torch.float16)


def _check_rows(name: str, x: torch.Tensor) -> None:
    if x.dtype not in _ROW_TYPES:
        raise TypeError(f"simtlab.{name} takes float32, bfloat16 or float16 tensors, got {x.dtype}")


def softmax_rows(x: torch.Tensor, dim: int, log: bool) -> torch.Tensor:
    """simtlab::softmax's work, also run directly on tensors neither autograd nor a tracer watches
    (simtlab.softmax's inference path)."""
    _check_rows("log_softmax" if log else "softmax", x)
    return call_along("log_softmax" if log else "softmax", x, dim)


@torch.library.custom_op("simtlab::softmax", mutates_args=())
def _softmax(x: torch.Tensor, dim: int, log: bool) -> torch.Tensor:
    return softmax_rows(x, dim, log)


@_softmax.register_fake
def _softmax_fake(x: torch.Tensor, dim: int, log: bool) -> torch.Tensor:
    _check_rows("softmax", x)
    return x.new_empty(x.shape)


@torch.library.custom_op("simtlab::softmax_backward", mutates_args=())
def _softmax_backward(y: torch.Tensor, dy: torch.Tensor, dim: int, log: bool) -> torch.Tensor:
    return call_along("log_softmax_backward" if log else "softmax_backward", y, dim, dy.to(y.dtype))


@_softmax_backward.register_fake
def _softmax_backward_fake(y: torch.Tensor, dy: torch.Tensor, dim: int, log: bool) -> torch.Tensor:
    return y.new_empty(y.shape)


def _softmax_setup(ctx, inputs, output) -> None:
    _, ctx.dim, ctx.log = inputs
    ctx.save_for_backward(output)


def _softmax_grad(ctx, grad: torch.Tensor):
    (y,) = ctx.saved_tensors
    return torch.ops.simtlab.softmax_backward(y, grad, ctx.dim, ctx.log), None, None


_softmax.register_autograd(_softmax_grad, setup_context=_softmax_setup)
_SOFTMAX = _autograd_function("softmax", softmax_rows, _softmax_setup, _softmax_grad)


def _vector(v: torch.Tensor | None, x: torch.Tensor) -> torch.Tensor | None:
    """A weight or bias as the kernel reads it: x's type, contiguous."""
    if v is None:
        return None
    return (v if v.dtype == x.dtype else v.to(x.dtype)).contiguous()


def _eps(x: torch.Tensor, eps: float | None) -> float:
    """eps, or for None the machine epsilon of x's type (F.rms_norm's default)."""
    return torch.finfo(x.dtype).eps if eps is None else eps


def norm_rows(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float | None,
              rms: bool) -> torch.Tensor:
    """simtlab::norm's work, also run directly on tensors neither autograd nor a tracer watches
    (simtlab.layer_norm's and rms_norm's inference path; eps None: x's machine epsilon)."""
    name = "rms_norm" if rms else "layer_norm"
    _check_rows(name, x)
    if x.dim() == 0:
        raise ValueError(f"simtlab.{name}: x is a 0-d tensor; it normalises along the last dimension")
    vectors = (_vector(weight, x),) if rms else (_vector(weight, x), _vector(bias, x))
    return call(named(name), contiguous(x), *vectors, eps=float(_eps(x, eps)))


@torch.library.custom_op("simtlab::norm", mutates_args=())
def _norm(x: torch.Tensor, weight: Optional[torch.Tensor], bias: Optional[torch.Tensor], eps: float,
          rms: bool) -> torch.Tensor:  # (typing's Optional and Tuple: what every torch.library release parses)
    return norm_rows(x, weight, bias, eps, rms)


@_norm.register_fake
def _norm_fake(x, weight, bias, eps: float, rms: bool) -> torch.Tensor:
    _check_rows("rms_norm" if rms else "layer_norm", x)
    return x.new_empty(x.shape)


@torch.library.custom_op("simtlab::norm_backward", mutates_args=())
def _norm_backward(x: torch.Tensor, weight: Optional[torch.Tensor], dy: torch.Tensor, eps: float,
                   rms: bool) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    name = "rms_norm_backward" if rms else "layer_norm_backward"
    out = call(named(name), contiguous(x), _vector(weight, x), contiguous(dy.to(x.dtype)), eps=float(eps))
    if rms:  # (no bias: an empty db keeps the operator's one signature)
        return out[0], out[1], x.new_empty((0,))
    return out


@_norm_backward.register_fake
def _norm_backward_fake(x, weight, dy, eps: float, rms: bool):
    cols = x.shape[-1] if x.dim() else 1
    return x.new_empty(x.shape), x.new_empty((cols,)), x.new_empty((0,) if rms else (cols,))


def _norm_setup(ctx, inputs, output) -> None:
    x, weight, bias, ctx.eps, ctx.rms = inputs
    ctx.weight_type = None if weight is None else weight.dtype
    ctx.bias_type = None if bias is None else bias.dtype
    ctx.save_for_backward(x, weight)


def _norm_grad(ctx, grad: torch.Tensor):
    x, weight = ctx.saved_tensors
    dx, dw, db = torch.ops.simtlab.norm_backward(x, weight, grad, ctx.eps, ctx.rms)
    wants = ctx.needs_input_grad
    grad_w = dw.to(ctx.weight_type) if wants[1] else None
    grad_b = db.to(ctx.bias_type) if len(wants) > 2 and wants[2] and not ctx.rms else None
    return dx if wants[0] else None, grad_w, grad_b, None, None


_norm.register_autograd(_norm_grad, setup_context=_norm_setup)
_NORM = _autograd_function("norm", norm_rows, _norm_setup, _norm_grad)


# --- reductions and transpose -------------------------------------------------------------------------

def _reduced_shape(x: torch.Tensor, dim: Optional[int], keepdim: bool) -> list:
    if dim is None:
        return [1] * x.dim() if keepdim else []
    if x.dim() == 0:
        return []
    d = dim % x.dim()
    return [1 if i == d else n for i, n in enumerate(x.shape) if keepdim or i != d]


def reduce_rows(x: torch.Tensor, dim: Optional[int], keepdim: bool, name: str) -> torch.Tensor:
    """simtlab::sum's and amax's work, also run directly on tensors neither autograd nor a tracer
    watches (the inference path)."""
    _check_rows(name, x)
    return reduce_along(name, x, dim, keepdim)


@torch.library.custom_op("simtlab::sum", mutates_args=())
def _sum(x: torch.Tensor, dim: Optional[int], keepdim: bool) -> torch.Tensor:
    return reduce_rows(x, dim, keepdim, "sum")


@torch.library.custom_op("simtlab::amax", mutates_args=())
def _amax(x: torch.Tensor, dim: Optional[int], keepdim: bool) -> torch.Tensor:
    return reduce_rows(x, dim, keepdim, "amax")


def _reduce_fake(name: str):
    def fake(x: torch.Tensor, dim: Optional[int], keepdim: bool) -> torch.Tensor:
        _check_rows(name, x)
        return x.new_empty(_reduced_shape(x, dim, keepdim))

    return fake


_sum.register_fake(_reduce_fake("sum"))
_amax.register_fake(_reduce_fake("amax"))


def _sum_setup(ctx, inputs, output) -> None:
    x, ctx.dim, ctx.keepdim = inputs
    ctx.shape = x.shape


def _amax_setup(ctx, inputs, output) -> None:
    _sum_setup(ctx, inputs, output)
    ctx.save_for_backward(inputs[0], output)  # (the maxima's places: sum's gradient needs neither)


def _kept(ctx, t: torch.Tensor) -> torch.Tensor:
    """A reduced tensor with its reduced dimension(s) back as 1, to broadcast against x."""
    if ctx.dim is None:
        return t.reshape([1] * len(ctx.shape))
    if ctx.keepdim or len(ctx.shape) == 0:
        return t
    return t.unsqueeze(ctx.dim % len(ctx.shape))


def _sum_grad(ctx, grad: torch.Tensor):
    return _kept(ctx, grad).expand(ctx.shape), None, None


def _amax_grad(ctx, grad: torch.Tensor):
    x, out = ctx.saved_tensors  # (as torch.amax: the gradient shared evenly among a row's maxima)
    hit = (x == _kept(ctx, out)).to(grad.dtype)
    count = hit.sum(dim=None if ctx.dim is None else ctx.dim % max(x.dim(), 1), keepdim=True)
    return hit * (_kept(ctx, grad) / count), None, None


_sum.register_autograd(_sum_grad, setup_context=_sum_setup)
_amax.register_autograd(_amax_grad, setup_context=_amax_setup)
_SUM = _autograd_function("sum", lambda x, dim, keepdim: reduce_rows(x, dim, keepdim, "sum"), _sum_setup, _sum_grad)
_AMAX = _autograd_function("amax", lambda x, dim, keepdim: reduce_rows(x, dim, keepdim, "amax"), _amax_setup,
                           _amax_grad)


_CUMSUM = {torch.float32: torch.float32, torch.int32: torch.int64, torch.int64: torch.int64}


def cumsum_rows(x: torch.Tensor, dim: int) -> torch.Tensor:
    """simtlab::cumsum's work (also the inference path)."""
    if x.dtype not in _CUMSUM:
        raise TypeError(f"simtlab.cumsum takes float32, int32 or int64 tensors (scan rungs 6 and 7), got {x.dtype}")
    return call_along("cumsum", x, dim)


@torch.library.custom_op("simtlab::cumsum", mutates_args=())
def _cumsum(x: torch.Tensor, dim: int) -> torch.Tensor:
    return cumsum_rows(x, dim)


@_cumsum.register_fake
def _cumsum_fake(x: torch.Tensor, dim: int) -> torch.Tensor:
    if x.dtype not in _CUMSUM:
        return cumsum_rows(x, dim)  # (the same one-line error)
    return x.new_empty(x.shape, dtype=_CUMSUM[x.dtype])


def _cumsum_setup(ctx, inputs, output) -> None:
    ctx.dim = inputs[1]


def _cumsum_grad(ctx, grad: torch.Tensor):  # (dx_i = sum of dy_j for j >= i: a scan of dy reversed)
    return torch.ops.simtlab.cumsum(grad.flip(ctx.dim), ctx.dim).flip(ctx.dim), None


_cumsum.register_autograd(_cumsum_grad, setup_context=_cumsum_setup)
_CUMSUM_FN = _autograd_function("cumsum", cumsum_rows, _cumsum_setup, _cumsum_grad)


_SORT_KEYS = (torch.float32, torch.int32) + ((torch.uint32,) if hasattr(torch, "uint32") else ())


def _check_keys(name: str, keys: torch.Tensor, values: Optional[torch.Tensor] = None) -> None:
    if keys.dtype not in _SORT_KEYS:
        raise TypeError(f"simtlab.{name} takes float32, int32 or uint32 keys (sort rung 5), got {keys.dtype}")
    if keys.dim() != 1:
        raise ValueError(f"simtlab.{name}: the radix sort takes one row of keys, got shape {tuple(keys.shape)}")
    if values is not None:
        if values.element_size() != 4 or values.is_complex():
            raise TypeError(f"simtlab.sort: values must be a 32-bit type (float32, int32, uint32), got {values.dtype}")
        if values.shape != keys.shape:
            raise ValueError(f"simtlab.sort: values have shape {tuple(values.shape)} but keys {tuple(keys.shape)}")


def sort_rows(keys: torch.Tensor, values: Optional[torch.Tensor], descending: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    """simtlab::sort's work (also the inference path): the sorted keys, and the values moved with
    them (an empty tensor where none were given)."""
    _check_keys("sort", keys, values)
    if values is None:
        return call(named("sort"), contiguous(keys), None, descending=bool(descending)), keys.new_empty((0,))
    k, v = call(named("sort"), contiguous(keys), contiguous(values).view(keys.dtype), descending=bool(descending))
    return k, v.view(values.dtype)


@torch.library.custom_op("simtlab::sort", mutates_args=())
def _sort(keys: torch.Tensor, values: Optional[torch.Tensor], descending: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    return sort_rows(keys, values, descending)


@_sort.register_fake
def _sort_fake(keys, values, descending: bool):
    _check_keys("sort", keys, values)
    return keys.new_empty(keys.shape), (values.new_empty(values.shape) if values is not None else keys.new_empty((0,)))


def argsort_rows(keys: torch.Tensor, descending: bool) -> torch.Tensor:
    """simtlab::argsort's work (also the inference path)."""
    _check_keys("argsort", keys)
    _, order = call(named("argsort"), contiguous(keys), descending=bool(descending))
    return order.to(torch.int64)


@torch.library.custom_op("simtlab::argsort", mutates_args=())
def _argsort(keys: torch.Tensor, descending: bool) -> torch.Tensor:
    return argsort_rows(keys, descending)


@_argsort.register_fake
def _argsort_fake(keys: torch.Tensor, descending: bool) -> torch.Tensor:
    _check_keys("argsort", keys)
    return keys.new_empty(keys.shape, dtype=torch.int64)


def _csr_parts(A: torch.Tensor, name: str = "spmv"):
    if A.layout != torch.sparse_csr:
        raise TypeError(f"simtlab.{name} takes a sparse CSR tensor (A.to_sparse_csr()), got layout {A.layout}")
    if A.dim() != 2:
        raise ValueError(f"simtlab.{name} takes a matrix, got a {A.dim()}-d sparse tensor")
    return A.crow_indices(), A.col_indices(), A.values()


def spmv_csr(A: torch.Tensor, x: torch.Tensor, alpha: float, beta: float, y: Optional[torch.Tensor]) -> torch.Tensor:
    """simtlab.spmv on a torch sparse CSR matrix: through simtlab::spmv (differentiable in x and y)."""
    crow, col, val = _csr_parts(A)
    if _eager(crow, col, val, x, y):
        return _SPMV(crow, col, val, x, y, A.shape[1], alpha, beta)
    return torch.ops.simtlab.spmv(crow, col, val, x, y, A.shape[1], alpha, beta)


def _spmv_run(crow, col, val, x, y, cols: int, alpha: float, beta: float) -> torch.Tensor:
    if val.dtype != torch.float32 or x.dtype != torch.float32:
        raise TypeError(f"simtlab.spmv takes float32 values and x, got {val.dtype} and {x.dtype}")
    rows = crow.shape[0] - 1
    if val.numel() == 0 or cols == 0:  # (nothing to multiply: beta y)
        return beta * y if (y is not None and beta != 0.0) else x.new_zeros(rows)
    if crow.dtype != torch.int32 or col.dtype != torch.int32:
        if val.numel() + rows >= 2**31:
            raise ValueError(f"simtlab.spmv: {val.numel()} nonzeros; the kernel counts them in 32 bits")
        crow, col = crow.to(torch.int32), col.to(torch.int32)  # (torch's default int64 indices)
    return call(named("spmv"), contiguous(crow), contiguous(col), contiguous(val), contiguous(x), contiguous(y),
                cols=int(cols), alpha=float(alpha), beta=float(beta))


@torch.library.custom_op("simtlab::spmv", mutates_args=())
def _spmv(crow: torch.Tensor, col: torch.Tensor, val: torch.Tensor, x: torch.Tensor, y: Optional[torch.Tensor],
          cols: int, alpha: float, beta: float) -> torch.Tensor:
    return _spmv_run(crow, col, val, x, y, cols, alpha, beta)


@_spmv.register_fake
def _spmv_fake(crow, col, val, x, y, cols: int, alpha: float, beta: float) -> torch.Tensor:
    return x.new_empty((crow.shape[0] - 1,))


def _spmv_setup(ctx, inputs, output) -> None:
    crow, col, val, x, y, ctx.cols, ctx.alpha, ctx.beta = inputs
    ctx.save_for_backward(crow, col, val)


def _csr_grads(ctx, grad: torch.Tensor, want_x: bool, want_y: bool):
    """(dx, dy_in) of y = alpha A x + beta y_in, A the CSR arrays saved: dx = alpha A^T dy (PyTorch's
    sparse product: simtlab has no transposed SpMV), dy_in = beta dy; None where not wanted."""
    crow, col, val = ctx.saved_tensors
    dx = dy = None
    if want_x:
        a = torch.sparse_csr_tensor(crow, col, val, (crow.shape[0] - 1, ctx.cols))
        dx = ctx.alpha * (a.t() @ grad.unsqueeze(1)).squeeze(1).to_dense()
    if want_y:
        dy = ctx.beta * grad
    return dx, dy


def _spmv_grad(ctx, grad: torch.Tensor):
    wants = ctx.needs_input_grad
    if wants[2]:
        raise NotImplementedError("simtlab.spmv is differentiable in x and y, not in A's values")
    return (None, None, None, *_csr_grads(ctx, grad, wants[3], wants[4]), None, None, None)


_spmv.register_autograd(_spmv_grad, setup_context=_spmv_setup)
_SPMV = _autograd_function("spmv", _spmv_run, _spmv_setup, _spmv_grad)


# --- a prepared matrix (simtlab.spmv_plan): its arrays passed as one list ----------------------------

_CSR_AT = (7, 8, 9)  # the layout's row_ptr, cols, values (ops.spmv.PREPARED)


def spmv_plan_call(plan, x: torch.Tensor, alpha: float, beta: float, y: Optional[torch.Tensor]) -> torch.Tensor:
    """A simtlab.spmv_plan's call on tensors: straight to the plan where nothing watches x and y,
    else through simtlab::spmv_prepared (differentiable in x and y, traced by torch.compile)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"simtlab.spmv_plan: the plan was made from a PyTorch tensor's matrix; x is a "
                        f"{type(x).__module__.split('.')[0]}.{type(x).__name__}")
    name = (lambda t: "float32" if t.dtype == torch.float32 else str(t.dtype))  # (str only for the message)
    plan.check(x, y, name(x), None if y is None else name(y))
    if plan.nnz == 0:  # (nothing to multiply: beta y; no launch reads an empty layout)
        return beta * y if (beta != 0.0 and y is not None) else x.new_zeros(plan.shape[0])
    layout = list(plan.layout())
    args = (x, y, plan.shape[1], plan.chunks, plan.rows_bound, alpha, beta)
    if _eager(x, y):
        grad = torch.is_grad_enabled() and (x.requires_grad or (y is not None and y.requires_grad))
        return _SPMV_PREPARED(layout, *args) if grad else _spmv_prepared_run(layout, *args)
    return torch.ops.simtlab.spmv_prepared(layout, *args)


def _spmv_prepared_run(layout: list[Optional[torch.Tensor]], x: torch.Tensor, y: Optional[torch.Tensor], cols: int,
                       chunks: int, bound: int, alpha: float, beta: float) -> torch.Tensor:
    return call(named("spmv_prepared"), *layout, contiguous(x), contiguous(y), cols=cols, chunks=chunks, rows=bound,
                alpha=alpha, beta=beta)


@torch.library.custom_op("simtlab::spmv_prepared", mutates_args=())
def _spmv_prepared(layout: list[Optional[torch.Tensor]], x: torch.Tensor, y: Optional[torch.Tensor], cols: int,
                   chunks: int, bound: int, alpha: float, beta: float) -> torch.Tensor:
    return _spmv_prepared_run(layout, x, y, cols, chunks, bound, alpha, beta)


@_spmv_prepared.register_fake
def _spmv_prepared_fake(layout, x, y, cols: int, chunks: int, bound: int, alpha: float, beta: float) -> torch.Tensor:
    return x.new_empty((layout[_CSR_AT[0]].shape[0] - 1,))


def _spmv_prepared_setup(ctx, inputs, output) -> None:
    layout, x, y, ctx.cols, _, _, ctx.alpha, ctx.beta = inputs
    ctx.save_for_backward(*(layout[i] for i in _CSR_AT))


def _spmv_prepared_grad(ctx, grad: torch.Tensor):
    """The same gradients, A the plan's copy."""
    wants = ctx.needs_input_grad
    return (None, *_csr_grads(ctx, grad, wants[1], wants[2]), None, None, None, None, None)


_spmv_prepared.register_autograd(_spmv_prepared_grad, setup_context=_spmv_prepared_setup)
_SPMV_PREPARED = _autograd_function("spmv_prepared", _spmv_prepared_run, _spmv_prepared_setup, _spmv_prepared_grad)


_ATTENTION_TYPES = (torch.bfloat16, torch.float16)


def _check_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    if q.dtype not in _ATTENTION_TYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        raise TypeError(f"simtlab.attention takes bfloat16 or float16 q, k, v of one type, got {q.dtype}, {k.dtype}, "
                        f"{v.dtype}")
    if q.dim() != 4 or k.dim() != 4 or k.shape != v.shape:
        raise ValueError(f"simtlab.attention takes (batch, heads, sequence, head dim) q and k, v of one shape; got "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")


def _aligned(x: torch.Tensor) -> torch.Tensor:
    """x contiguous and 16-byte aligned (what rungs 3 and 4 and the backward copy 16 bytes at a time),
    copied where it is not."""
    x = contiguous(x)
    return x if x.data_ptr() % 16 == 0 else x.clone()


def attention_with_lse(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                       scale: Optional[float]) -> Tuple[torch.Tensor, torch.Tensor]:
    """simtlab::attention's work (also the inference path): the output and each row's log-sum-exp
    (fp32), which the backward recomputes the probabilities from."""
    _check_attention(q, k, v)
    return call(named("attention"), _aligned(q), _aligned(k), _aligned(v), causal=bool(causal), scale=scale)


@torch.library.custom_op("simtlab::attention", mutates_args=())
def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
               scale: Optional[float]) -> Tuple[torch.Tensor, torch.Tensor]:
    return attention_with_lse(q, k, v, causal, scale)


@_attention.register_fake
def _attention_fake(q, k, v, causal: bool, scale: Optional[float]) -> Tuple[torch.Tensor, torch.Tensor]:
    _check_attention(q, k, v)
    return q.new_empty(q.shape), q.new_empty(q.shape[:3], dtype=torch.float32)


@torch.library.custom_op("simtlab::attention_backward", mutates_args=())
def _attention_backward(grad: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                        lse: torch.Tensor, causal: bool,
                        scale: Optional[float]) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dq, dk, dv on attention_backward rung 2 on Hopper, rung 1 elsewhere (FlashAttention-2's
    algorithm: the probabilities recomputed from the log-sum-exp)."""
    _check_attention(q, k, v)
    return call(named("attention_backward"), _aligned(q), _aligned(k), _aligned(v), _aligned(out),
                _aligned(grad.to(q.dtype)), _aligned(lse), causal=bool(causal), scale=scale)


@_attention_backward.register_fake
def _attention_backward_fake(grad, q, k, v, out, lse, causal: bool, scale: Optional[float]):
    _check_attention(q, k, v)
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _attention_setup(ctx, inputs, output) -> None:
    q, k, v, causal, scale = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.mark_non_differentiable(lse)  # (as FlashAttention's: a statistic handed back, not a result)
    ctx.causal, ctx.scale = causal, scale


def _attention_grad(ctx, grad, grad_lse):
    """(The log-sum-exp is marked non-differentiable: no gradient flows back through it.)"""
    q, k, v, out, lse = ctx.saved_tensors
    dq, dk, dv = torch.ops.simtlab.attention_backward(grad, q, k, v, out, lse, ctx.causal, ctx.scale)
    return dq, dk, dv, None, None


_attention.register_autograd(_attention_grad, setup_context=_attention_setup)
_ATTENTION = _autograd_function("attention", attention_with_lse, _attention_setup, _attention_grad)


def transpose_matrix(x: torch.Tensor) -> torch.Tensor:
    """simtlab::transpose's work (also the inference path): a contiguous x.T."""
    if x.dtype != torch.float32:
        raise TypeError(f"simtlab.transpose takes float32 tensors (transpose rung 5), got {x.dtype}")
    if x.dim() > 2:
        raise ValueError(f"simtlab.transpose takes a matrix (x.T of a {x.dim()}-d tensor reverses every dimension); "
                         f"got shape {tuple(x.shape)}")
    if x.dim() < 2:
        return x.clone(memory_format=torch.contiguous_format)
    if 1 in x.shape:  # (a row or a column: its transpose holds the same bytes in the same order - a copy)
        return x.reshape(x.shape[1], x.shape[0]).clone(memory_format=torch.contiguous_format)
    return call(named("transpose"), contiguous(x))


@torch.library.custom_op("simtlab::transpose", mutates_args=())
def _transpose(x: torch.Tensor) -> torch.Tensor:
    return transpose_matrix(x)


@_transpose.register_fake
def _transpose_fake(x: torch.Tensor) -> torch.Tensor:
    if x.dtype != torch.float32 or x.dim() > 2:
        return transpose_matrix(x)  # (the same one-line errors)
    return x.new_empty(tuple(reversed(x.shape)))


def _transpose_grad(ctx, grad):
    return torch.ops.simtlab.transpose(grad)


_transpose.register_autograd(_transpose_grad, setup_context=_no_context)
_TRANSPOSE = _autograd_function("transpose", transpose_matrix, _no_context, _transpose_grad)


def stencil_grid(u: torch.Tensor, c0: float, c1: float) -> torch.Tensor:
    """simtlab::stencil's work (also the inference path): one Jacobi step of a float32 3-D grid."""
    if u.dtype != torch.float32:
        raise TypeError(f"simtlab.stencil takes float32 tensors (the stencil rungs), got {u.dtype}")
    return call(named("stencil"), contiguous(u), c0=float(c0), c1=float(c1))


@torch.library.custom_op("simtlab::stencil", mutates_args=())
def _stencil(u: torch.Tensor, c0: float, c1: float) -> torch.Tensor:
    return stencil_grid(u, c0, c1)


@_stencil.register_fake
def _stencil_fake(u: torch.Tensor, c0: float, c1: float) -> torch.Tensor:
    from .ops.stencil import check_grid

    if u.dtype != torch.float32:
        return stencil_grid(u, c0, c1)  # (the same one-line error)
    check_grid(tuple(u.shape))
    return torch.empty_like(u, memory_format=torch.contiguous_format)


def _stencil_setup(ctx, inputs, output) -> None:
    ctx.c0, ctx.c1 = inputs[1], inputs[2]


def _stencil_grad(ctx, grad):
    # (c0 u + c1 A u with A the grid's symmetric face adjacency, zeros outside: its own adjoint)
    return torch.ops.simtlab.stencil(grad, ctx.c0, ctx.c1), None, None


_stencil.register_autograd(_stencil_grad, setup_context=_stencil_setup)
_STENCIL = _autograd_function("stencil", stencil_grid, _stencil_setup, _stencil_grad)


def stencil(u: torch.Tensor, c0: float = STENCIL_C0, c1: float = STENCIL_C1) -> torch.Tensor:
    """One Jacobi step of the 3-D 7-point stencil (simtlab.stencil) as a differentiable operator."""
    c0, c1 = float(c0), float(c1)
    return _STENCIL(u, c0, c1) if _eager(u) else torch.ops.simtlab.stencil(u, c0, c1)


def conv2d_images(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """simtlab::conv2d's work (also the inference path): each image of x filtered by weight."""
    for name, t in (("x", x), ("weight", weight)):
        if t.dtype != torch.float32:
            raise TypeError(f"simtlab.conv2d takes float32 tensors (conv2d rung 8), got {name} of {t.dtype}")
    return call(named("conv2d"), contiguous(x), contiguous(weight))


@torch.library.custom_op("simtlab::conv2d", mutates_args=())
def _conv2d(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return conv2d_images(x, weight)


@_conv2d.register_fake
def _conv2d_fake(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    from .ops.conv2d import check_shapes

    if x.dtype != torch.float32 or weight.dtype != torch.float32:
        return conv2d_images(x, weight)  # (the same one-line error)
    check_shapes(tuple(x.shape), tuple(weight.shape))
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _conv2d_setup(ctx, inputs, output) -> None:
    x, weight = inputs
    ctx.save_for_backward(x if ctx.needs_input_grad[1] else None, weight)


def _conv2d_grad(ctx, grad):
    """dx: the same filter flipped, on simtlab's kernel; dweight: each tap's sum over the batch's
    pixels of x shifted by the tap times grad (PyTorch's grouped correlation)."""
    x, weight = ctx.saved_tensors
    dx = dw = None
    if ctx.needs_input_grad[0]:
        dx = torch.ops.simtlab.conv2d(grad, weight.flip(0, 1).contiguous())
    if ctx.needs_input_grad[1]:
        h, w = x.shape[-2:]
        images = x.reshape(1, -1, h, w)
        dw = torch.nn.functional.conv2d(images, grad.reshape(-1, 1, h, w), padding=weight.shape[0] // 2,
                                        groups=images.shape[1]).sum((0, 1))
    return dx, dw


_conv2d.register_autograd(_conv2d_grad, setup_context=_conv2d_setup)
_CONV2D = _autograd_function("conv2d", conv2d_images, _conv2d_setup, _conv2d_grad)


def conv2d(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Each image of x (..., H, W) filtered by weight (D, D) (simtlab.conv2d), differentiable."""
    return _CONV2D(x, weight) if _eager(x, weight) else torch.ops.simtlab.conv2d(x, weight)


def sum(x: torch.Tensor, dim: Optional[int] = None, keepdim: bool = False) -> torch.Tensor:  # noqa: A001
    """torch.sum(x, dim, keepdim) on simtlab's reduction rung 10: differentiable, traced by torch.compile."""
    return _SUM(x, dim, keepdim) if _eager(x) else torch.ops.simtlab.sum(x, dim, keepdim)


def amax(x: torch.Tensor, dim: Optional[int] = None, keepdim: bool = False) -> torch.Tensor:
    """torch.amax(x, dim, keepdim) on simtlab's reduction rung 10 (NaN propagated)."""
    return _AMAX(x, dim, keepdim) if _eager(x) else torch.ops.simtlab.amax(x, dim, keepdim)


def cumsum(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """torch.cumsum(x, dim) on simtlab's scan rungs 6 and 7 (float32, int32 -> int64, int64)."""
    return _CUMSUM_FN(x, dim) if _eager(x) else torch.ops.simtlab.cumsum(x, dim)


def sort(keys: torch.Tensor, values: Optional[torch.Tensor] = None, descending: bool = False):
    """A stable sort of one row of keys on simtlab's sort rung 5: the keys, or (keys, values)."""
    k, v = torch.ops.simtlab.sort(keys, values, descending)
    return (k, v) if values is not None else k


def argsort(keys: torch.Tensor, descending: bool = False) -> torch.Tensor:
    """torch.argsort(keys, stable=True, descending=...) on simtlab's sort rung 5 (int64 positions)."""
    return torch.ops.simtlab.argsort(keys, descending)


def attention_pair(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                   scale: Optional[float]) -> Tuple[torch.Tensor, torch.Tensor]:
    """simtlab::attention as autograd and torch.compile see it: the output and the log-sum-exp."""
    if _eager(q, k, v):
        return _ATTENTION(q, k, v, causal, scale)
    return torch.ops.simtlab.attention(q, k, v, causal, scale)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
              scale: Optional[float] = None) -> torch.Tensor:
    """F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale) on simtlab's attention
    rungs 6 (full) and 5 (causal) on Hopper, rung 3 on other sm_80+; differentiable (attention_backward
    rung 2 on Hopper, rung 1 elsewhere) and traced by torch.compile."""
    return attention_pair(q, k, v, causal, scale)[0]


def spmv(A: torch.Tensor, x: torch.Tensor, alpha: float = 1.0, beta: float = 0.0,
         y: Optional[torch.Tensor] = None) -> torch.Tensor:
    """alpha A x + beta y for a sparse CSR A on simtlab's SpMV rung 4 (merge path)."""
    return spmv_csr(A, x, alpha, beta, y)


def transpose(x: torch.Tensor) -> torch.Tensor:
    """x.T.contiguous() for a float32 matrix on simtlab's transpose rung 5."""
    return _TRANSPOSE(x) if _eager(x) else torch.ops.simtlab.transpose(x)


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """torch.softmax(x, dim) on simtlab's softmax rung 5: differentiable, traced by torch.compile."""
    return _SOFTMAX(x, dim, False) if _eager(x) else torch.ops.simtlab.softmax(x, dim, False)


def log_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """torch.log_softmax(x, dim) on simtlab's softmax rung 5."""
    return _SOFTMAX(x, dim, True) if _eager(x) else torch.ops.simtlab.softmax(x, dim, True)


def layer_norm(x: torch.Tensor, weight: torch.Tensor | None = None, bias: torch.Tensor | None = None,
               eps: float = 1e-5) -> torch.Tensor:
    """F.layer_norm(x, (x.shape[-1],), weight, bias, eps) on simtlab's layernorm rungs 3 and 5."""
    return _NORM(x, weight, bias, eps, False) if _eager(x, weight, bias) else \
        torch.ops.simtlab.norm(x, weight, bias, eps, False)


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None = None, eps: float | None = None) -> torch.Tensor:
    """F.rms_norm(x, (x.shape[-1],), weight, eps) on simtlab's layernorm rungs 4 and 5 (eps=None: the
    machine epsilon of x's type, as PyTorch)."""
    eps = _eps(x, eps)
    return _NORM(x, weight, None, eps, True) if _eager(x, weight) else \
        torch.ops.simtlab.norm(x, weight, None, eps, True)
