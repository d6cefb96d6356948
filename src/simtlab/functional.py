"""The operators a model calls, on simtlab's kernels: `softmax`, `log_softmax`, `layer_norm`,
`rms_norm`, the reductions `sum` and `amax`, `cumsum`, `transpose`, `sort`, `argsort`, `spmv`,
`attention` and `attention_backward`, `stencil`, `conv2d` - for PyTorch CUDA tensors and CuPy
arrays (CuPy has no bfloat16), in the types each one's kernels take (docs/api.md lists them; another is one line naming those).
A tensor that autograd or torch.compile is watching goes through the `simtlab::` operators
(simtlab.torch: autograd with fused backward kernels, fake implementations for tracing); one
neither watches (inference) goes straight to the plan, without the operator dispatch's cost.

Each runs along one dimension of any number of leading ones, in float32 arithmetic whatever the
storage type (float32, bfloat16, float16; the output in the input's type), on the caller's
current stream, through a plan kept for the kind of call (see simtlab.operator). Inputs that are
not contiguous along the operation's rows - another `dim`, a sliced or transposed view - are
copied to contiguous ones first, inside the call (as PyTorch's own kernels do); the output is
contiguous."""

from __future__ import annotations

from .operator import call, call_along, contiguous, named, reduce_along
from .ops.stencil import C0 as STENCIL_C0, C1 as STENCIL_C1

__all__ = ["softmax", "log_softmax", "layer_norm", "rms_norm", "sum", "amax", "cumsum", "transpose", "sort", "argsort",
           "attention", "attention_backward", "spmv", "stencil", "conv2d", "EPS"]

EPS = 1e-5  # torch.nn.functional.layer_norm's default


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")


def _untracked(*tensors) -> bool:
    """CUDA tensors that neither autograd (no gradient asked of them) nor a tracer (torch.compile,
    fake tensors) is watching: the call goes straight to the plan, skipping the custom operator's
    dispatch (microseconds a call: inference's host cost); otherwise through torch.ops.simtlab."""
    torch = _torch_ops().torch
    grad, plain = torch.is_grad_enabled(), _PLAIN
    for t in tensors:
        if t is not None and (type(t) not in plain or not t.is_cuda or (grad and t.requires_grad)):
            return False
    return not torch.compiler.is_compiling()


_OPS = None
_PLAIN = ()  # torch.Tensor and torch.nn.Parameter (a module's weights), once torch is imported


def _torch_ops():
    """simtlab.torch (importing it registers the simtlab:: operators), imported once."""
    global _OPS, _PLAIN
    if _OPS is None:
        from . import torch as simtlab_torch

        _PLAIN = (simtlab_torch.torch.Tensor, simtlab_torch.torch.nn.Parameter)
        _OPS = simtlab_torch
    return _OPS


def softmax(x, dim: int = -1):
    """exp(x - max) / sum(exp(x - max)) along `dim`: rung 5 of the softmax ladder (rows of up to 32768
    values held in registers, one read and one write; longer rows streamed). PyTorch tensors go
    through `torch.ops.simtlab.softmax` (differentiable, traced by torch.compile)."""
    if _is_torch(x):
        ops = _torch_ops()
        return ops.softmax_rows(x, dim, False) if _untracked(x) else ops.softmax(x, dim)
    return call_along("softmax", x, dim)


def log_softmax(x, dim: int = -1):
    """x - max - log(sum(exp(x - max))) along `dim` (no division, no log of a rounded probability)."""
    if _is_torch(x):
        ops = _torch_ops()
        return ops.softmax_rows(x, dim, True) if _untracked(x) else ops.log_softmax(x, dim)
    return call_along("log_softmax", x, dim)


def layer_norm(x, weight=None, bias=None, eps: float = EPS):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last dimension (var the biased
    variance, as torch.nn.functional.layer_norm with normalized_shape = (x.shape[-1],)); weight and
    bias of that length, in x's type, or None."""
    if _is_torch(x):
        ops = _torch_ops()
        return ops.norm_rows(x, weight, bias, eps, False) if _untracked(x, weight, bias) else \
            ops.layer_norm(x, weight, bias, eps)
    return _cupy_norm("layer_norm", x, (weight, bias), eps)


def rms_norm(x, weight=None, eps: float | None = None):
    """x / sqrt(mean(x^2) + eps) * weight over the last dimension, as torch.nn.functional.rms_norm
    with normalized_shape = (x.shape[-1],): eps=None is the machine epsilon of x's type."""
    if _is_torch(x):
        ops = _torch_ops()
        return ops.norm_rows(x, weight, None, eps, True) if _untracked(x, weight) else ops.rms_norm(x, weight, eps)
    if eps is None:
        import numpy

        eps = float(numpy.finfo(x.dtype).eps) if getattr(x.dtype, "kind", "") == "f" else 2.0**-23
    return _cupy_norm("rms_norm", x, (weight,), eps)


def _cupy_norm(name: str, x, vectors: tuple, eps: float):
    """A normalisation of a CuPy array's rows with its per-column operands (None where absent), each
    made contiguous where it is not (tensors: simtlab.torch.norm_rows)."""
    if x.ndim == 0:
        raise ValueError(f"simtlab.{name}: x is a 0-d array; it normalises along the last dimension")
    return call(named(name), contiguous(x), *(contiguous(v) for v in vectors), eps=float(eps))


def sum(x, dim: int | None = None, keepdim: bool = False):  # noqa: A001 (torch.sum's name)
    """The sum over dimension `dim` (None: every element) in x's type, fp32 arithmetic, as torch.sum:
    reduction rung 10 (rows a warp or a block each; few long rows cut into chunks, their partials
    reduced by a second launch - a fixed order, the same result every run)."""
    if _is_torch(x):
        ops = _torch_ops()
        return ops.reduce_rows(x, dim, keepdim, "sum") if _untracked(x) else ops.sum(x, dim, keepdim)
    return reduce_along("sum", x, dim, keepdim)


def amax(x, dim: int | None = None, keepdim: bool = False):
    """The largest value over dimension `dim` (None: every element), as torch.amax: a NaN in a row
    makes its result NaN; an empty dimension is refused (no identity)."""
    if _is_torch(x):
        ops = _torch_ops()
        return ops.reduce_rows(x, dim, keepdim, "amax") if _untracked(x) else ops.amax(x, dim, keepdim)
    return reduce_along("amax", x, dim, keepdim)


def cumsum(x, dim: int = -1):
    """The inclusive prefix sum along `dim`, as torch.cumsum: float32 in float32, int32 and int64 in
    int64. One row of float32: scan rung 6 (one pass, decoupled look-back); otherwise rung 7 (a
    block a row where rows fill the GPU, else chunk totals, their scan, then the chunks)."""
    if _is_torch(x):
        ops = _torch_ops()
        return ops.cumsum_rows(x, dim) if _untracked(x) else ops.cumsum(x, dim)
    return call_along("cumsum", x, dim)


def sort(keys, values=None, descending: bool = False):
    """A stable sort of one row of float32, int32 or uint32 keys (ascending, or descending), in
    torch's order for floats (-0.0 equal to +0.0, NaNs last ascending and first descending): sort
    rung 5 (one-sweep radix; passes whose digit every key shares skipped on the device). Returns
    the sorted keys, or (keys, values) with `values` - any 32-bit type, one per key - moved with them."""
    if _is_torch(keys):
        ops = _torch_ops()
        tracked = not _untracked(keys, values)
        out = ops.sort(keys, values, descending) if tracked else ops.sort_rows(keys, values, descending)
        return out if values is not None else out[0]
    return _sort_arrays(keys, values, descending)


def argsort(keys, descending: bool = False):
    """The positions that sort one row of keys stably (int64, as torch.argsort(stable=True))."""
    if _is_torch(keys):
        ops = _torch_ops()
        return ops.argsort(keys, descending) if not _untracked(keys) else ops.argsort_rows(keys, descending)
    if getattr(keys, "ndim", None) is not None and keys.ndim != 1:
        raise ValueError(f"simtlab.argsort: the radix sort takes one row of keys, got shape {keys.shape}")
    _, order = call(named("argsort"), contiguous(keys), descending=bool(descending))
    return order.astype("int64")


def _sort_arrays(keys, values, descending: bool):
    if getattr(keys, "ndim", None) is not None and keys.ndim != 1:
        raise ValueError(f"simtlab.sort: the radix sort takes one row of keys, got shape {keys.shape}")
    if values is None:
        return call(named("sort"), contiguous(keys), None, descending=bool(descending))
    if getattr(values, "itemsize", 0) != 4:
        raise TypeError(f"simtlab.sort: values must be a 32-bit type (float32, int32, uint32), got "
                        f"{getattr(values, 'dtype', type(values).__name__)}")
    out_keys, out_values = call(named("sort"), contiguous(keys), contiguous(values).view(keys.dtype),
                                descending=bool(descending))
    return out_keys, out_values.view(values.dtype)


def attention(q, k, v, causal: bool = False, scale: float | None = None, return_lse: bool = False):
    """softmax(scale q k^T [causal]) v for (batch, heads, sequence, head dim) bf16 / fp16 tensors, as
    torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale) (scale
    None: 1/sqrt(head dim); causal: query i sees keys j <= i). On Hopper attention rung 6 (TMA,
    wgmma, warp-specialised, persistent blocks) for full attention and rung 5 for causal; rung 3 on
    other GPUs from sm_80 (mma.sync, FlashAttention-2's split).
    Differentiable for PyTorch tensors (attention_backward rung 2 on Hopper, rung 1 elsewhere).
    `return_lse`: also each row's log-sum-exp (batch, heads, sq) fp32, which `attention_backward`
    takes - how a CuPy user gets gradients."""
    if _is_torch(q):
        ops = _torch_ops()
        results = ops.attention_with_lse(q, k, v, causal, scale) if _untracked(q, k, v) else \
            ops.attention_pair(q, k, v, causal, scale)
    else:
        results = call(named("attention"), contiguous(q), contiguous(k), contiguous(v), causal=bool(causal),
                       scale=scale)
    return results if return_lse else results[0]


def attention_backward(grad, q, k, v, out, lse, causal: bool = False, scale: float | None = None):
    """(dq, dk, dv) of `attention(q, k, v, causal, scale)` given the gradient of its output, from its
    output and log-sum-exp (`attention(..., return_lse=True)`): attention_backward rung 2 on Hopper
    (warpgroup MMAs), rung 1 elsewhere - FlashAttention-2's algorithm. PyTorch users get this
    through autograd; it is here for CuPy arrays (fp16) and for callers who keep the forward's
    results themselves."""
    if _is_torch(q):
        return _torch_ops().torch.ops.simtlab.attention_backward(grad, q, k, v, out, lse, bool(causal), scale)
    return call(named("attention_backward"), contiguous(q), contiguous(k), contiguous(v), contiguous(out),
                contiguous(grad), contiguous(lse), causal=bool(causal), scale=scale)


def spmv(A, x, alpha: float = 1.0, beta: float = 0.0, y=None):
    """alpha A x + beta y for a sparse CSR matrix A (a torch.sparse_csr tensor or a
    cupyx.scipy.sparse.csr_matrix, float32 values) and a float32 vector x, as a new vector (y is
    read, not written): SpMV rung 4, the merge path (the same share of rows and nonzeros to every
    thread, whatever the rows' lengths; no setup). int64 indices (torch's default) are narrowed to
    int32 inside the call - build A with int32 indices to skip that copy. A matrix multiplied often:
    simtlab.spmv_plan(A) prepares it once in rung 6's faster layout."""
    if _is_torch(A):
        ops = _torch_ops()
        return ops.spmv_csr(A, x, alpha, beta, y)
    return _cupy_spmv(A, x, alpha, beta, y)


def _cupy_spmv(A, x, alpha, beta, y):
    import cupy

    if getattr(A, "format", None) != "csr":
        raise TypeError(f"simtlab.spmv takes a cupyx.scipy.sparse.csr_matrix (or a torch sparse CSR tensor), got "
                        f"{type(A).__name__}")
    if A.nnz == 0 or A.shape[1] == 0:  # (nothing to multiply: beta y)
        return beta * y if (y is not None and beta != 0.0) else cupy.zeros(A.shape[0], dtype=cupy.float32)
    parts = [a.astype(cupy.int32, copy=False) for a in (A.indptr, A.indices)]
    return call(named("spmv"), *parts, A.data, contiguous(x), contiguous(y), cols=A.shape[1], alpha=float(alpha),
                beta=float(beta))


def transpose(x):
    """A contiguous copy of x.T for a float32 matrix (a 0-d or 1-d x: a contiguous copy of x):
    transpose rung 5 (64x64 tiles through shared memory, 16-byte accesses)."""
    if _is_torch(x):
        ops = _torch_ops()
        return ops.transpose_matrix(x) if _untracked(x) else ops.transpose(x)
    return _transpose(x)


def stencil(u, c0: float = STENCIL_C0, c1: float = STENCIL_C1):
    """One Jacobi step of the 3-D 7-point stencil on a float32 grid u (NZ, NY, NX), zeros outside
    it: c0 u[z, y, x] + c1 (the sum of its six face neighbours). Stencil rung 4 (planes streamed by
    cp.async into a ring of shared slots) from sm_80, rung 3 before it. Differentiable for PyTorch
    tensors (the step is its own adjoint: the gradient is the same step of the output's gradient)."""
    if _is_torch(u):
        ops = _torch_ops()
        return ops.stencil_grid(u, c0, c1) if _untracked(u) else ops.stencil(u, c0, c1)
    return call(named("stencil"), contiguous(u), c0=float(c0), c1=float(c1))


def conv2d(x, weight):
    """Each float32 image of x (..., H, W) filtered by weight (D, D), D odd from 3 to 15: the
    correlation torch.nn.functional.conv2d computes, "same" size with zeros outside the image
    (F.conv2d(x.view(-1, 1, H, W), weight.view(1, 1, D, D), padding=D // 2) for one channel). Conv2d
    rung 8 (rung 6's cp.async walk, the filter staged in shared memory; the leading dimensions a
    batch in one launch). Differentiable for PyTorch tensors in x and weight."""
    if _is_torch(x):
        ops = _torch_ops()
        return ops.conv2d_images(x, weight) if _untracked(x, weight) else ops.conv2d(x, weight)
    return call(named("conv2d"), contiguous(x), contiguous(weight))


def _transpose(x):
    if getattr(x, "ndim", None) not in (0, 1, 2):
        shape = tuple(getattr(x, "shape", ()))
        raise ValueError(f"simtlab.transpose takes a matrix (x.T of a {len(shape)}-d array reverses every "
                         f"dimension); got shape {shape}")
    if x.ndim < 2:
        return x.copy()
    if 1 in x.shape:  # (a row or a column: the same bytes in the same order - a copy)
        return x.reshape(x.shape[1], x.shape[0]).copy()
    return call(named("transpose"), contiguous(x))

