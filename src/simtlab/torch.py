"""simtlab's tensor-core GEMM as a PyTorch operator: `simtlab.torch.matmul(a, b)`.

Registered with torch.library as `simtlab::matmul` - a custom operator with a fake (meta)
implementation, so `torch.compile(fullgraph=True)` traces it as one node without a graph break,
and with autograd, whose backward runs the same operator on transposed views (dA = dC @ B^T,
dB = A^T @ dC: rung 6 reads them with no copy). The product is written in the inputs' type, as
torch.mm does (fp32 sums, rounded once at the end).

    import simtlab.torch
    y = simtlab.torch.matmul(x, w)          # x: (..., M, K) bf16 / fp16 CUDA, w: (K, N) or batched
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
    if a.dim() not in (2, 3) or b.dim() != a.dim():
        raise ValueError(f"simtlab.torch.matmul takes two matrices or two batches of them, got shapes "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[-1] != b.shape[-2] or (a.dim() == 3 and a.shape[0] != b.shape[0]):
        raise ValueError(f"simtlab.torch.matmul: shapes {tuple(a.shape)} and {tuple(b.shape)} do not multiply")


@torch.library.custom_op("simtlab::matmul", mutates_args=())
def _matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    _check(a, b)
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
    grad_b = matmul(a.mT, grad) if ctx.needs_input_grad[1] else None
    return grad_a, grad_b


_matmul.register_autograd(_backward, setup_context=_setup_context)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b on simtlab's tensor-core GEMM (float16 / bfloat16, 2-D or batched 3-D), differentiable
    and traceable by torch.compile."""
    return torch.ops.simtlab.matmul(a, b)
