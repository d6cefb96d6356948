"""Distributed C = A @ B over the ranks of a communicator (see comm.py), each rank computing its
tiles with a local GEMM: simtlab's own best rung on GPUs (`simtlab.gemm`, fp32 on the CUDA cores,
or `simtlab.gemm_tc`, fp16 / bf16 inputs with fp32 sums and C on the tensor cores), NumPy's on
CPUs (tests). A, B and C are given as each rank's own blocks, laid out as partition.RowPanels or
partition.Summa say. A local GEMM is `accumulate(a, b, c, beta)`: c = a @ b + beta * c, beta 0
for a block's first panel (nothing to clear or read back) and 1 after it."""

from __future__ import annotations

from typing import Callable

from .partition import RowPanels, Summa


def numpy_accumulate(a, b, c, beta: float) -> None:
    if beta:
        c += a @ b
    else:
        c[...] = a @ b


def simtlab_accumulate(a, b, c, beta: float) -> None:
    """c = a @ b + beta c with simtlab's tuned fp32 rung (CuPy arrays on this rank's GPU)."""
    import simtlab

    simtlab.gemm(a, b, c, alpha=1.0, beta=beta)


def tensor_core_accumulate(a, b, c, beta: float) -> None:
    """c = a @ b + beta c with simtlab's tensor-core rung: a, b fp16 / bf16 PyTorch tensors, c fp32.
    The tensor-core kernels write C without reading it, so a later panel's product goes through a
    temporary that is then added (one read and write of the block per panel after the first)."""
    import simtlab

    if beta:
        c += simtlab.gemm_tc(a, b)
    else:
        simtlab.gemm_tc(a, b, C=c)


class TorchArrays:
    """The few NumPy-style calls the schedules make (empty, ascontiguousarray, concatenate), for
    PyTorch tensors on one device: bf16 blocks live as PyTorch tensors, CuPy having no bfloat16."""

    def __init__(self, device):
        self.device = device

    def empty(self, shape, dtype):
        import torch

        return torch.empty(shape, dtype=dtype, device=self.device)

    @staticmethod
    def ascontiguousarray(x):
        return x.contiguous()

    @staticmethod
    def concatenate(parts, axis: int = 0):
        import torch

        return torch.cat(parts, dim=axis)


def row_panels(plan: RowPanels, comm, a_panel, b_rows, c_panel, xp, accumulate: Callable = numpy_accumulate) -> None:
    """1D: all-gather B's row blocks into the whole B, then C_panel = A_panel @ B."""
    parts = [xp.empty((k1 - k0, plan.N), dtype=b_rows.dtype) for k0, k1 in plan.b_rows]
    comm.all_gather(parts, b_rows)
    b = xp.concatenate(parts, axis=0) if len(parts) > 1 else parts[0]
    if a_panel.shape[0] and plan.K:
        accumulate(a_panel, b, c_panel, 0.0)
    else:  # (no rows, or K = 0: C = 0)
        c_panel[...] = 0


def summa(plan: Summa, comm, a_blk, b_blk, c_blk, xp, accumulate: Callable = numpy_accumulate,
          lookahead: bool = True) -> None:
    """2D SUMMA. With `lookahead`, the broadcasts of panel p+1 are issued (asynchronously, where the
    backend allows) before panel p's local GEMM, so communication overlaps computation."""
    rank = comm.rank
    i, j = plan.coords(rank)
    pr, pc = plan.grid
    row_group = tuple(plan.rank(i, jj) for jj in range(pc))
    col_group = tuple(plan.rank(ii, j) for ii in range(pr))
    (r0, r1), (ka0, _) = plan.blocks(rank)["A"]
    (kb0, _), (c0, c1) = plan.blocks(rank)["B"]
    panels = plan.panels()

    def start(p: int):
        k0, k1, col, row = panels[p]
        a = xp.ascontiguousarray(a_blk[:, k0 - ka0:k1 - ka0]) if j == col else \
            xp.empty((r1 - r0, k1 - k0), dtype=a_blk.dtype)
        b = xp.ascontiguousarray(b_blk[k0 - kb0:k1 - kb0, :]) if i == row else \
            xp.empty((k1 - k0, c1 - c0), dtype=b_blk.dtype)
        ha = comm.broadcast(a, plan.rank(i, col), row_group, async_op=lookahead)
        hb = comm.broadcast(b, plan.rank(row, j), col_group, async_op=lookahead)
        return a, b, ha, hb

    if not panels:  # K = 0
        c_blk[...] = 0
    pending = start(0) if panels else None
    for p in range(len(panels)):
        a, b, ha, hb = pending
        ha.wait()
        hb.wait()
        pending = start(p + 1) if p + 1 < len(panels) else None
        if a.shape[0] and b.shape[1]:  # (a panel is never empty along K)
            accumulate(a, b, c_blk, 1.0 if p else 0.0)


def scatter_blocks(plan, A, B):
    """Each rank's blocks of full matrices (for tests and single-host drivers): list per rank of
    (A block, B block) as the plan lays them out."""
    out = []
    for r in range(plan.world):
        if isinstance(plan, RowPanels):
            (m0, m1), (k0, k1) = plan.rows[r], plan.b_rows[r]
            out.append((A[m0:m1], B[k0:k1]))
        else:
            blocks = plan.blocks(r)
            (ar, ac), (br, bc) = blocks["A"], blocks["B"]
            out.append((A[ar[0]:ar[1], ac[0]:ac[1]], B[br[0]:br[1], bc[0]:bc[1]]))
    return out
