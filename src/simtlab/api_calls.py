"""The public functions as rows of their ladders: `simtlab.gemm` (at each precision), `simtlab.gemm_tc`,
the row operators (`simtlab.softmax`, `log_softmax`, `layer_norm`, `rms_norm` and the backwards autograd
runs), `simtlab.sum` / `amax`, `simtlab.cumsum`, `simtlab.transpose`, `simtlab.attention` and its
gradient timed exactly as a user calls them (plan lookup, output allocation and launch inside the
timed call), beside the libraries and the rungs. They sit above both the ops (which know nothing of the API) and the API (which runs on the
ops' kernels); the ladder asks here for a family's extra rows."""

from __future__ import annotations

from .ops.attention_backward import backward_of
from .ops.base import Reference

__all__ = ["api_references", "GEMM_CALL", "GEMM_TC_CALL", "GEMM_TF32X3_CALL", "GEMM_F16X3_CALL", "ROWS_CALL",
           "ARRAY_CALL"]

GEMM_CALL = "simtlab.gemm (API call)"
GEMM_TF32X3_CALL = "simtlab.gemm tf32x3 (API call)"
GEMM_F16X3_CALL = "simtlab.gemm f16x3 (API call)"
GEMM_TC_CALL = "simtlab.gemm_tc (API call)"


def _gemm(precision: str = "ieee"):
    def make(ws):
        """simtlab.gemm on the workspace's arrays, alpha and beta from the problem, at `precision`."""
        from .api import gemm

        p = ws.p
        return lambda: gemm(ws.A, ws.B, ws.C, p.alpha, p.beta, precision=precision)

    return make


def _runs(rung: str):
    """Whether gemm rung `rung` (the one a precision runs on) runs on a compute capability."""
    def supports(cc) -> bool:
        from .catalog import family

        return family("gemm").rung(rung).supports(cc)

    return supports


def _gemm_tc(ws):
    """simtlab.gemm_tc on PyTorch tensors over the workspace's arrays where an operand or C is bf16
    (CuPy has no bfloat16 type), else on the CuPy arrays."""
    from .api import gemm_tc

    p = ws.p
    A, B, C = ws.A, ws.B, ws.C
    if "bfloat16" in (p.dtype, p.out):
        import torch

        A, B, C = (torch.from_dlpack(x).view(torch.bfloat16) if x.dtype.kind == "u" else torch.from_dlpack(x)
                   for x in (A, B, C))
    return lambda: gemm_tc(A, B, C, out_dtype=p.out)


ROWS_CALL = "simtlab API call (torch tensors)"


def _rows(ws):
    """The row operator of the workspace's problem as a PyTorch user calls it (the forward through
    simtlab.<op>, a backward through the torch operator autograd runs), on tensors over the
    workspace's arrays; its values are checked in tests/test_rows_api_gpu.py."""
    import torch

    import simtlab
    import simtlab.torch  # noqa: F401 (the simtlab:: operators)
    from .ops.rows import torch_view

    p, dt = ws.p, ws.p.dtype
    x = torch_view(ws.x, dt)
    if p.op in ("softmax", "log_softmax"):
        f = getattr(simtlab, p.op)
        return lambda: f(x)
    if p.op.startswith("log_softmax") or p.op.startswith("softmax"):
        dy, log = torch_view(ws.dy, dt), p.op.startswith("log")
        return lambda: torch.ops.simtlab.softmax_backward(x, dy, -1, log)
    from .ops.layernorm import EPS

    w, b = torch_view(ws.w, dt), torch_view(ws.b, dt)
    if p.op == "layer_norm":
        return lambda: simtlab.layer_norm(x, w, b, EPS)
    if p.op == "rms_norm":
        return lambda: simtlab.rms_norm(x, w, EPS)
    dy = torch_view(ws.dy, dt)
    return lambda: torch.ops.simtlab.norm_backward(x, w, dy, EPS, p.rms)


ARRAY_CALL = "simtlab API call (CuPy arrays)"


def _array_call(name: str):
    """simtlab.<name> on the workspace's CuPy input as a user calls it (a new output each call; the
    values are checked in tests/test_reduce_api_gpu.py). The reduction's problem picks sum or amax."""
    def make(ws):
        import simtlab

        if name == "reduce":
            f = simtlab.sum if ws.p.op == "sum" else simtlab.amax
            return lambda: f(ws.x)
        f = getattr(simtlab, name)
        return lambda: f(ws.x)

    return make


def _attention(ws):
    """simtlab.attention on (1, bh, s, d) tensors over the workspace's arrays, as an SDPA user calls it."""
    import simtlab
    from .ops.rows import torch_view

    q, k, v = (torch_view(a, ws.p.dtype).unsqueeze(0) for a in (ws.q, ws.k, ws.v))
    causal = ws.p.causal
    return lambda: simtlab.attention(q, k, v, causal=causal)


def _simtlab_attention(q, k, v, causal: bool):
    import simtlab

    return simtlab.attention(q, k, v, causal=causal)


def _stencil(ws):
    """simtlab.stencil on the workspace's CuPy grid as a user calls it (a new output each call)."""
    import simtlab

    from .ops.stencil import C0, C1

    return lambda: simtlab.stencil(ws.u, C0, C1)


def _conv2d(ws):
    """simtlab.conv2d on the workspace's CuPy image and filter as a user calls it (a new output each call)."""
    import simtlab

    return lambda: simtlab.conv2d(ws.img, ws.filt)


def _spmv(ws):
    """simtlab.spmv on the workspace's CuPy csr_matrix as a user calls it (the merge path: no setup)."""
    import simtlab

    A, p = ws.matrix(), ws.p
    return lambda: simtlab.spmv(A, ws.x, p.alpha, p.beta, ws.y0)


PLAN_CALL = "simtlab.spmv_plan call (CuPy arrays)"


def _spmv_plan(ws):
    """A plan's call as a user makes it after simtlab.spmv_plan(A) (made here, outside the timed call,
    as the ladder makes rung 6's layout)."""
    import simtlab

    plan, p = simtlab.spmv_plan(ws.matrix()), ws.p
    return lambda: plan(ws.x, p.alpha, p.beta, ws.y0)


def _sort(ws):
    """simtlab.sort on the workspace's keys (with its values for pairs) as a user calls it."""
    import simtlab

    keys, vals = ws.typed_keys, ws.vals
    return (lambda: simtlab.sort(keys, vals)) if vals is not None else (lambda: simtlab.sort(keys))


def _torch_present(cc) -> bool:
    try:
        import torch  # noqa: F401
    except Exception:
        return False
    return True


_CALLS = {
    "gemm": [Reference(GEMM_CALL, _gemm()),  # fp32 on the CUDA cores; then on the tensor cores, three products
             Reference(GEMM_TF32X3_CALL, _gemm("tf32x3"), supports=_runs("tf32x3_mma")),  # (rung 12 off Hopper)
             Reference(GEMM_F16X3_CALL, _gemm("f16x3"), supports=_runs("f16x3"))],
    "gemm_tc": [Reference(GEMM_TC_CALL, _gemm_tc, applies=lambda p: p.dtype != "float32")],  # (16-bit inputs)
    "softmax": [Reference(ROWS_CALL, _rows, verifiable=False, supports=_torch_present)],
    "layernorm": [Reference(ROWS_CALL, _rows, verifiable=False, supports=_torch_present)],
    "reduction": [Reference(ARRAY_CALL, _array_call("reduce"), verifiable=False)],
    "scan": [Reference(ARRAY_CALL, _array_call("cumsum"), verifiable=False)],
    "transpose": [Reference(ARRAY_CALL, _array_call("transpose"), verifiable=False)],
    "stencil": [Reference(ARRAY_CALL, _stencil, verifiable=False)],
    "conv2d": [Reference(ARRAY_CALL, _conv2d, verifiable=False, supports=lambda cc: tuple(cc) >= (8, 0))],
    "spmv": [Reference(ARRAY_CALL, _spmv, verifiable=False), Reference(PLAN_CALL, _spmv_plan, verifiable=False)],
    "sort": [Reference(ARRAY_CALL, _sort, verifiable=False)],
    "attention": [Reference(ROWS_CALL, _attention, verifiable=False, supports=_torch_present,
                            applies=lambda p: p.d in (64, 128))],
    # (the gradients of simtlab.attention as a training step asks for them: the backward operator's launches)
    "attention_backward": [Reference(ROWS_CALL, backward_of(_simtlab_attention), verifiable=False,
                                     supports=_torch_present,
                                     applies=lambda p: p.d in (64, 128))],
}


def api_references(family: str) -> list[Reference]:
    """The public calls timed as rows of `family`'s ladder (none for most families)."""
    return list(_CALLS.get(family, ()))
