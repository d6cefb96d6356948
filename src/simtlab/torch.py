"""simtlab's tensor-core GEMM as a PyTorch operator: `simtlab.torch.matmul(a, b)`.

Registered with torch.library as `simtlab::matmul` - a custom operator with a fake (meta)
implementation, so `torch.compile(fullgraph=True)` traces it as one node without a graph break,
and with autograd, whose backward runs the same operator on transposed views (dA = dC @ B^T,
dB = A^T @ dC: rung 6 reads them with no copy). The product is written in the inputs' type, as
torch.mm does (fp32 sums, rounded once at the end).

    import simtlab.torch
    y = simtlab.torch.matmul(x, w)          # x: (..., K) bf16 / fp16 CUDA, w: (K, N); or two (B, M, K), (B, K, N)
"""

from __future__ import annotations

import torch

from .api import gemm_tc
from .arrays import layout_of

__all__ = ["matmul"]

_TYPES = {torch.float16: "float16", torch.bfloat16: "bfloat16"}


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


@torch.library.custom_op("simtlab::matmul", mutates_args=())
def _matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    _check(a, b)
    if a.dim() > b.dim():  # (..., K) @ (K, N): the leading dimensions as rows of one product (a linear layer)
        rows = _readable(a.reshape(-1, a.shape[-1]))
        return gemm_tc(rows, _readable(b), out_dtype=_TYPES[a.dtype]).view(*a.shape[:-1], b.shape[-1])
    return gemm_tc(_readable(a), _readable(b), out_dtype=_TYPES[a.dtype])


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


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b on simtlab's tensor-core GEMM (float16 / bfloat16): two matrices, two 3-D batches, or
    any leading dimensions of a against one matrix b; differentiable and traceable by torch.compile."""
    return torch.ops.simtlab.matmul(a, b)
