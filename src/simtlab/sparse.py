"""A sparse matrix prepared once for many products: `simtlab.spmv_plan(A)`.

`simtlab.spmv(A, x)` takes a CSR matrix as it is (the merge path: no setup, so a one-off product
costs one call). A matrix multiplied again and again - an iterative solver's, a graph's adjacency
in every layer - pays for a better layout once: SpMV rung 6 cuts the rows into blocks of equal
work, stores each block's nonzeros in column order (neighbouring lanes then gather neighbouring
entries of x, and a sector of x serves every nonzero of the block in it) and leaves rows of more
than LONG nonzeros to pieces of their own. The plan makes that copy of A on the GPU (a few sorts of
the nonzeros; it synchronizes when it is made), checks one product against the merge path's, keeps
it, and each call is two launches on the caller's stream, captured by CUDA graphs like any other
simtlab call.

The plan holds a copy of A as it was when made: a matrix changed afterwards needs a new plan.
"""

from __future__ import annotations

from .functional import _torch_ops
from .operator import call, contiguous, named

__all__ = ["SpmvPlan", "spmv_plan", "check_prepared"]


class SpmvPlan:
    """A CSR matrix (rows x cols, float32) prepared for y = alpha A x + beta y (see the module).

    Call it as `plan(x, alpha=1.0, beta=0.0, y=None)`: a new vector of A's rows (y is read, not
    written), in x's library (a PyTorch tensor - differentiable in x and y - or a CuPy array)."""

    def __init__(self, arrays: dict, shape: tuple[int, int], nnz: int, chunks: int, rows_bound: int, torch_like: bool,
                 device: int, what: str):
        self._arrays, self.shape, self.nnz, self.device, self._what = arrays, shape, nnz, device, what
        self.chunks, self.rows_bound, self._torch = chunks, rows_bound, torch_like  # (the operator's options)

    def describe(self) -> str:
        """What a call runs: the layout A was prepared in."""
        return self._what

    def __repr__(self) -> str:
        return f"<SpmvPlan {self.describe()}>"

    def layout(self) -> tuple:
        """The prepared arrays in the order the spmv_prepared operator takes them (absent ones None)."""
        from .ops.spmv import PREPARED

        return tuple(self._arrays[name] for name in PREPARED)

    def __call__(self, x, alpha: float = 1.0, beta: float = 0.0, y=None):
        if self._torch:  # (checked and routed with torch's own calls: torch.compile traces them)
            return _torch_ops().spmv_plan_call(self, x, float(alpha), float(beta), y)
        if type(x).__module__.startswith("torch"):
            raise TypeError("simtlab.spmv_plan: the plan was made from a CuPy array's matrix; x is a torch tensor")
        self.check(x, y, str(x.dtype), None if y is None else str(y.dtype))
        if self.nnz == 0:  # (nothing to multiply: beta y; no launch reads an empty layout)
            import cupy

            if beta != 0.0 and y is not None:
                return beta * y
            with cupy.cuda.Device(self.device):
                return cupy.zeros(self.shape[0], dtype=cupy.float32)
        return run_prepared(self.layout(), contiguous(x), contiguous(y), self.shape[1], self.chunks, self.rows_bound,
                            float(alpha), float(beta))

    def check(self, x, y, x_type: str, y_type: str | None) -> None:
        """x of A's columns, y (if any) of its rows, both float32: else one line naming the problem."""
        rows, cols = self.shape
        if tuple(x.shape) != (cols,):
            raise ValueError(f"simtlab.spmv_plan: x has shape {tuple(x.shape)} but A has {cols} columns")
        if y is not None and tuple(y.shape) != (rows,):
            raise ValueError(f"simtlab.spmv_plan: y has shape {tuple(y.shape)} but A has {rows} rows")
        for name, t in (("x", x_type), ("y", y_type)):
            if t is not None and t.removeprefix("torch.") != "float32":
                raise TypeError(f"simtlab.spmv_plan takes float32 x and y; {name} is {t.removeprefix('torch.')}")


def run_prepared(layout: tuple, x, y, cols: int, chunks: int, rows_bound: int, alpha: float, beta: float):
    """The spmv_prepared operator on a plan's arrays (x and y contiguous)."""
    return call(named("spmv_prepared"), *layout, x, y, cols=cols, chunks=chunks, rows=rows_bound, alpha=alpha,
                beta=beta)


def _csr_of(A):
    """(offsets, columns, values, shape, torch_like, device) of a torch sparse CSR tensor or a
    cupyx.scipy.sparse.csr_matrix; a TypeError or ValueError naming what else was given."""
    if type(A).__module__.startswith("torch"):
        from .torch import _csr_parts

        crow, col, val = _csr_parts(A, "spmv_plan")
        if not val.is_cuda:
            raise TypeError(f"simtlab.spmv_plan: A is on {val.device}; simtlab's kernels take CUDA tensors")
        return crow, col, val, tuple(A.shape), True, val.get_device()
    if getattr(A, "format", None) != "csr" or not type(A).__module__.startswith("cupyx"):
        raise TypeError(f"simtlab.spmv_plan takes a torch sparse CSR tensor or a cupyx.scipy.sparse.csr_matrix, got "
                        f"{type(A).__module__.split('.')[0]}.{type(A).__name__}")
    return A.indptr, A.indices, A.data, tuple(A.shape), False, A.data.data.device_id


def check_prepared(layout: tuple, row_ptr, col_idx, values, cols: int, chunks: int, rows_bound: int) -> None:
    """The prepared product of a random x (CuPy arrays) against the merge path's (rung 4: no layout),
    row by row within twice the worst-case rounding of a float32 dot product of the row's k terms,
    2 gamma_k (|A| x)_i for x >= 0 - a bound no correct pair of products exceeds - so a layout or
    launch that is wrong for this matrix is refused in one line instead of answering wrongly later."""
    import cupy

    x = cupy.random.default_rng(20261206).random(cols, dtype=cupy.float32)
    ours = run_prepared(layout, x, None, cols, chunks, rows_bound, 1.0, 0.0)
    ref = call(named("spmv"), row_ptr, col_idx, values, x, None, cols=cols, alpha=1.0, beta=0.0)
    scale = call(named("spmv"), row_ptr, col_idx, cupy.abs(values), x, None, cols=cols, alpha=1.0, beta=0.0)
    ku = cupy.diff(row_ptr).astype(cupy.float64) * 2.0**-24
    gamma = cupy.where(ku < 0.5, ku / (1 - ku), cupy.inf)  # (Higham's gamma_k: a k-term dot product's bound)
    bound = 2 * gamma / (1 - cupy.minimum(gamma, 0.5)) * scale.astype(cupy.float64)  # (scale's own rounding)
    err = cupy.abs(ours.astype(cupy.float64) - ref.astype(cupy.float64))
    finite = cupy.isfinite(ref) & cupy.isfinite(scale)
    bad = cupy.nonzero((finite & ~(err <= bound)) | (~cupy.isfinite(ref) & cupy.isfinite(ours)))[0]
    if bad.size:
        r = int(bad[0])
        raise RuntimeError(f"simtlab.spmv_plan: the prepared layout's product differs from the merge path's on "
                           f"{bad.size} of {ref.size} rows (row {r}: {float(ours[r])!r} against {float(ref[r])!r}); "
                           "simtlab.spmv(A, x) computes it without the layout")


def spmv_plan(A, check: bool = True) -> SpmvPlan:
    """A prepared for repeated y = alpha A x + beta y (see the module): A a torch sparse CSR tensor
    (A.to_sparse_csr(); int32 or int64 indices) or a cupyx.scipy.sparse.csr_matrix, float32 values,
    at most 2^31 rows plus nonzeros. The copy is made on the caller's current stream. `check`: one
    product of a random x is compared with the merge path's when the plan is made (check_prepared;
    three SpMVs, beside the layout's sorts)."""
    import cupy

    from .device import device_info
    from .launch import Launch, build
    from .ops import spmv as ops

    crow, col, val, shape, torch_like, device = _csr_of(A)  # (before the GPU is looked for)
    rows, cols = shape
    if str(val.dtype).removeprefix("torch.") != "float32":
        raise TypeError(f"simtlab.spmv_plan takes float32 values, got {str(val.dtype).removeprefix('torch.')}")
    nnz = int(val.shape[0])
    if rows + nnz >= 2**31:
        raise ValueError(f"simtlab.spmv_plan: {rows} rows and {nnz} nonzeros; the layout counts them in 32 bits")
    info = device_info(device)
    params = ops.prepared_params(info.arch)
    if torch_like:
        import torch

        stream = cupy.cuda.ExternalStream(torch.cuda.current_stream(device).cuda_stream, device)
    else:
        stream = cupy.cuda.get_current_stream(device)
    arrays = dict.fromkeys(ops.PREPARED)
    chunks, what = 1, f"{rows}x{cols}, no nonzeros: nothing to launch"
    with cupy.cuda.Device(device), stream:
        if nnz and rows and cols:
            # (copies: the plan holds A as it was; a tensor read through its CUDA array interface)
            row_ptr, col_idx, values = (cupy.asarray(a).astype(t, copy=True) for a, t in
                                        ((crow, cupy.int32), (col, cupy.int32), (val, cupy.float32)))
            inst = build(ops.FAMILY.rung(6), params, info.arch)
            shared = ops.block_y_bytes(params["ROWS"], rows)
            fit = inst.occupancy(Launch((1, 1, 1), (params["BLOCK"], 1, 1), shared), None).blocks_per_sm
            slots = ops.slot_count(fit, info.sms, nnz, params["BLOCK"])
            arrays, chunks = ops.prepared_layout(row_ptr, col_idx, values, cols, params["ROWS"], params["LONG"], slots)
            if check:
                check_prepared(tuple(arrays.values()), row_ptr, col_idx, values, cols, chunks, params["ROWS"])
            pieces = 0 if arrays["piece_row"] is None else arrays["piece_row"].size
            what = (f"{rows}x{cols}, {nnz} nonzeros: spmv rung 6 ({slots} blocks of threads, "
                    f"{arrays['blk_row'].size - 1} row blocks of at most {params['ROWS']} rows, {pieces} pieces of "
                    f"rows over {params['LONG']} nonzeros)")
    if torch_like:
        import torch

        arrays = {k: (None if a is None else torch.from_dlpack(a)) for k, a in arrays.items()}
    return SpmvPlan(arrays, (rows, cols), nnz if rows and cols else 0, chunks, params["ROWS"], torch_like, device,
                    what)
