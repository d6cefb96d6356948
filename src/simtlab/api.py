"""Python entry points for using the kernels directly: `gemm` (fp32, CUDA cores) and `gemm_tc`
(fp16 / bf16, tensor cores), and their prepared plans.

A call costs a lookup of the plan for its kind of operands (made on the first call of that kind:
see simtlab.ops.gemm_plans), then the operands' addresses, the caller's current stream (PyTorch's for
tensors, CuPy's for CuPy arrays) and one driver launch."""

from __future__ import annotations

from .arrays import array_lib
from .ops.gemm_plans import KAHAN_PARAMS, GemmPlan, TcPlan

__all__ = ["gemm", "gemm_tc", "gemm_plan", "gemm_tc_plan", "KAHAN_PARAMS"]

PLANS_KEPT = 512  # plans kept per function; the oldest half is dropped past this

_LIBS: dict = {}  # type of the first operand -> its ArrayLib
_TC_PLANS: dict = {}
_GEMM_PLANS: dict = {}


def _lib(A):
    lib = _LIBS.get(type(A))
    if lib is None:
        lib = _LIBS[type(A)] = array_lib(A)
    return lib


def _keep(plans: dict, key, plan):
    if len(plans) >= PLANS_KEPT:
        for old in list(plans)[: PLANS_KEPT // 2]:
            del plans[old]
    plans[key] = plan
    return plan


def _plan(plans: dict, make, A, B, C, *options):
    """The plan kept for this kind of call - each operand's type, shape, strides and device, and
    the options - made (validated, compiled) on its first call. Operands of another library than
    the first one's have no key: the plan's validation then names the problem."""
    lib = _lib(A)
    try:
        key = (lib.key(A), lib.key(B), None if C is None else lib.key(C), *options)
    except AttributeError:
        return make(lib, A, B, C, *options)
    plan = plans.get(key)
    if plan is None:
        plan = _keep(plans, key, make(lib, A, B, C, *options))
    return plan


def gemm_tc(A, B, C=None, out_dtype: str = "float32", rung: str | int = "best"):
    """C = A @ B on the tensor cores: fp16 or bf16 inputs, fp32 sums, C in fp32 or the inputs' type.

    A (MxK) and B (KxN), or batches of them (BATCHxMxK, BATCHxKxN): PyTorch float16 / bfloat16
    CUDA tensors or CuPy float16 arrays, both of one type, used where they lie. Each is row-major
    (C-contiguous) or the transposed view of a row-major matrix (`x.T`, `x.mT`): rung 6 reads
    transposed views with no copy (TMA boxes and wgmma's transpose modes). C is allocated when
    None (by the inputs' library), else written in place (row-major); `out_dtype` is "float32" or
    the inputs' own type ("float16", "bfloat16": the sums rounded to nearest).

    The work goes on the caller's current stream (`torch.cuda.current_stream()`, or CuPy's) of
    the operands' device; nothing synchronizes, so calls can be captured in CUDA graphs.
    `rung="best"` takes rung 6 (Hopper clusters, sm_90) where it runs, else rung 3 (mma.sync,
    sm_80+); any rung name or stage works too. Shapes whose rows are not whole 16-byte units (K or
    N not multiples of 8, for row-major operands) and misaligned addresses run on padded copies.
    """
    return _plan(_TC_PLANS, TcPlan, A, B, C, out_dtype, rung).run(A, B, C)


def gemm_tc_plan(A, B, C=None, out_dtype: str = "float32", rung: str | int = "best") -> TcPlan:
    """A prepared `gemm_tc` for operands like A, B (and C, or None to allocate one per call):
    validated and compiled once; `plan(A2, B2, C2)` then checks its operands' kinds and launches.
    A different kind of operand raises simtlab.ops.gemm_plans.PlanMismatch."""
    return TcPlan(_lib(A), A, B, C, out_dtype, rung)


def gemm(A, B, C=None, alpha: float = 1.0, beta: float = 0.0, rung: str | int = "best", kahan: bool = False,
         precision: str = "ieee"):
    """C = alpha * A @ B + beta * C in fp32 with one of simtlab's GEMM rungs.

    A (MxK), B (KxN) and C (MxN) are float32 GPU arrays: PyTorch CUDA tensors or CuPy arrays, used
    where they lie. A and B are row-major or transposed views of row-major matrices (`x.T`); the
    fp32 rungs read row-major tiles, so a transposed view is first copied to row-major on the
    caller's stream (part of the call and of its time). C is row-major; with C=None a new one is
    allocated (beta must then be 0). Returns C. The work goes on the caller's current stream.
    `rung="best"` picks the tuned rung where cp.async exists (sm_80+), else the warp-tiled one;
    any rung name or stage number works too. `kahan=True` accumulates with Kahan compensation (the
    warp-tiled rung's KAHAN option): an error that stays near one rounding however long K is, for
    ~3x the time.

    `precision="tf32x3"` multiplies on the tensor cores instead: each operand is split into two
    TF32 parts and three products are summed (3xTF32) - on Hopper rung 11 (sm_90: about twice cuBLAS
    SGEMM's speed at large sizes with an error no larger than SGEMM's on the benchmark's accuracy
    table, benchmarks/tf32x3_table.py), on sm_80 and later GPUs rung 12 (mma.sync, the split in
    registers; `rung="tf32x3_mma"` picks it on Hopper too). Below K = 64 (gemm_plans.TF32X3_MIN_K) the
    three products cannot match a short SGEMM's error and the product is bound by writing C, so
    there "tf32x3" sums in float64 on the CUDA cores (rung 8, one rounding in all); rows of A and
    columns of B near the smallest normal are rescaled by powers of two inside the call. The
    default stays "ieee" (fp32 FMAs, SGEMM's own arithmetic): off Hopper 3xTF32 runs at about half
    SGEMM's speed, and it differs from SGEMM where an infinity meets an infinity in one product
    (NaN where SGEMM gives an infinity).

    `precision="f16x3"` (Hopper, rung 13) is the same idea with fp16 parts: each row of A and
    column of B scaled by a power of two into fp16's range (undone exactly on the way out), the
    small parts stored times 2^11; fp16 keeps TF32's 11 bits at twice its tensor-core rate, so the
    three products cost what 1.5 TF32 products do - rung 13 as a kernel call ran at 3.0-3.25x
    SGEMM's speed at 4096^3 and 8192^3 on an H200 (run 2026-12-05_h200_54605b_f16x3), this call at
    2.9-3.2x on an H100 (run 2026-12-05_h100_da020e_f16x3), with an error at or under SGEMM's on
    every row of the accuracy table (from K = 64; below, float64 sums as "tf32x3"). A row
    whose values span more than 2^27 keeps its smallest ones to an absolute 2^-49 of its largest
    rather than to their own 24 bits. Not the default, for the reasons above.
    """
    return _plan(_GEMM_PLANS, GemmPlan, A, B, C, rung, kahan, precision).run(A, B, C, float(alpha), float(beta))


def gemm_plan(A, B, C=None, rung: str | int = "best", kahan: bool = False, precision: str = "ieee") -> GemmPlan:
    """A prepared `gemm` for operands like A, B (and C): `plan(A2, B2, C2, alpha, beta)`."""
    return GemmPlan(_lib(A), A, B, C, rung, kahan, precision)
