"""The GEMM families' plans: what a GEMM call with given shapes, strides, types and device runs, decided once -
validation, rung and parameters, compilation, launch geometry, packed kernel parameters, tensor-
map encoders - so that a call with new operands of the same kind costs only reading their
addresses, the caller's current stream and one driver launch.

`simtlab.gemm_tc` and `simtlab.gemm` keep a plan per kind of call; `simtlab.gemm_tc_plan(...)`
and `simtlab.gemm_plan(...)` hand one to the caller, whose calls then skip even the lookup.
Nothing in a plan's call synchronizes, reads device memory on the host or allocates (except
C when none is given, and the padded copies of shapes the kernels cannot read in place, both
through the caller's own allocator), so calls can be captured in CUDA graphs."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import lru_cache

from ..arrays import ROW, TRANSPOSED, ArrayLib, layout_of
from ..compile import CompileError
from ..driver import F32, I32, PTR, ContextMismatch, PackedLaunch
from ..launch import LaunchError, build, choose_params, function_handle, prepare
from . import gemm as _gemm
from . import gemm_tc as _gemm_tc
from .gemm_tc import CLUSTER, SPLIT, TMA

__all__ = ["TcPlan", "GemmPlan", "PlanMismatch", "BoundCall"]

TC_INPUTS = ("float16", "bfloat16")
PAD_MIN_MACS = 1 << 27  # fp32 products from 512^3 up run on padded copies when K or N is not a multiple of 4
KAHAN_PARAMS = (("KAHAN", 1), ("MINB", 1))  # compensated sums need twice the accumulators: one block per SM
# float64 sums (precision="tf32x3" at short K, where writing C bounds the time): 64x64 tiles of
# 4x4 doubles a thread, two 256-thread blocks an SM, no spills (sm_80, sm_90)
F64_SUMS_PARAMS = (("BK", 16), ("BM", 64), ("BN", 64), ("KAHAN", 2), ("MINB", 2), ("WM", 16), ("WMITER", 1), ("WN", 32),
                   ("WNITER", 1))


@dataclass(frozen=True)
class _Shape:
    """An fp32 product's shape and operand layouts, as the dispatcher and rung 14 read them."""
    M: int
    N: int
    K: int
    ta: bool = False
    tb: bool = False
    batch: int = 1


class PlanMismatch(ValueError):
    """Operands that differ from those a plan was made for."""


@lru_cache(maxsize=64)
def _family(name: str):
    """The two GEMM families (the rest of the catalog is the generic plan's: simtlab.operator)."""
    return {"gemm": _gemm.FAMILY, "gemm_tc": _gemm_tc.FAMILY}[name]


def _instance(fam: str, rung_name: str, params: tuple | None, arch: str):
    return build(_family(fam).rung(rung_name), dict(params) if params else None, arch)


def _frozen(params: dict | None) -> tuple | None:
    return tuple(sorted(params.items())) if params else None


def _operand(lib: ArrayLib, x, name: str, ndim: tuple[int, ...]):
    """(dtype name, shape, element strides, device, layout) of an operand, or a clear error."""
    if not lib.owns(x):
        other = f"{type(x).__module__.split('.')[0]}.{type(x).__name__}"
        raise TypeError(f"{name} is a {other} but the first operand is a {lib.name} array: pass one library's arrays")
    dtype, shape, strides, device = lib.describe(x)
    if len(shape) not in ndim:
        raise ValueError(f"{name} must be {' or '.join(f'{n}-D' for n in ndim)}, got shape {tuple(shape)}")
    layout = layout_of(tuple(shape), tuple(strides)) if min(shape, default=1) > 0 else ROW
    return dtype, tuple(shape), tuple(strides), device, layout


def _layout_error(name: str, shape, strides) -> ValueError:
    return ValueError(f"{name} has shape {shape} and element strides {strides}: simtlab's GEMMs read row-major "
                      f"matrices (C-contiguous) or their transposed views (x.T, x.mT) - pass a contiguous copy")


class _Plan:
    """What the two GEMM plans share: the operands' library, device and expected kinds."""

    lib: ArrayLib
    device: int
    keys: tuple  # each operand's full kind (type, shape, strides, device), None for a C the plan allocates
    kinds: tuple  # each operand's type and shape: what a call checks

    def __call__(self, A, B, C=None, *args):
        """Run on new operands of the kind the plan was made for; returns C. Types and shapes are
        checked on every call (a mismatch is a PlanMismatch naming the operand); strides and the
        device are trusted to be the ones the plan was made for - `matches()` checks everything."""
        kind = self.lib.kind
        try:
            same = (kind(A), kind(B), None if C is None else kind(C)) == self.kinds
        except AttributeError:  # (another library's array)
            same = False
        if not same:
            self._mismatch(A, B, C)
        return self.run(A, B, C, *args)

    def matches(self, A, B, C=None) -> bool:
        """Whether A, B and C are of the kind the plan was made for, strides and device included."""
        return all(self._key(x) == key for x, key in zip((A, B, C), self.keys))

    def _key(self, x):
        return None if x is None else self.lib.key(x) if self.lib.owns(x) else type(x)

    def _mismatch(self, A, B, C):
        for name, x, key in zip("ABC", (A, B, C), self.keys):
            if self._key(x) != key:
                raise PlanMismatch(f"{name} differs from the {name} this plan was made for (shape, strides, type, "
                                   f"device or library; None for a C the plan allocates): make a plan for it")

    def run(self, A, B, C=None, *args):
        """(Operands already matched.) The launch goes to the current device's context: from a thread
        where another device is current it fails at once, and runs again with the plan's device made
        current."""
        try:
            return self._call(A, B, C, *args)
        except ContextMismatch:
            with self.lib.device_guard(self.device):
                return self._run(A, B, C, *args)

    def _call(self, A, B, C=None, *args):  # (a plan may bind a leaner path for its common case)
        return self._run(A, B, C, *args)

    def bind(self, A, B, C=None, *args) -> "BoundCall":
        """This plan on these very operands (and alpha, beta for `gemm_plan`): validated, addresses
        and parameters set once, so each `bound()` is one launch on the caller's current stream
        (`bound(stream)` names another). For a loop over the same buffers - a static-shape
        inference step, a benchmark - at the cost of the driver's launch alone. The bound call
        holds its operands (their memory stays allocated while it lives); C=None allocates one C
        now, reused by every call."""
        if not self.matches(A, B, C):
            self._mismatch(A, B, C)  # (raises, naming the operand)
        with self.lib.on_device(self.device):
            if C is None:
                if args[1:2] and args[1] != 0:
                    raise ValueError("beta != 0 needs an input C")
                C = self._new_c(A)
            packed = self._bound_launch(A, B, C, *args)
        return BoundCall(self, (A, B, C), args, packed)

    def _bound_launch(self, A, B, C, *args):
        """The one launch these operands need with everything set, or None where the call does more
        than one launch (copies, padding): then the bound call runs the plan."""
        return None

    def _remember(self, A, B, C) -> None:
        lib = self.lib
        self.keys = (self._key(A), self._key(B), self._key(C))
        self.kinds = (lib.kind(A), lib.kind(B), None if C is None else lib.kind(C))


class BoundCall:
    """A plan bound to its operands (see `_Plan.bind`): `bound()` launches and returns C."""

    def __init__(self, plan: _Plan, operands: tuple, args: tuple, packed: PackedLaunch | None):
        self.plan, self.operands, self.args, self.packed = plan, operands, args, packed
        self.C = operands[2]
        self.one_launch = packed is not None  # else each call runs the plan's full path
        lib, device = plan.lib, plan.device
        if packed is not None:
            stream_of, launch, C = lib.stream, packed.launch, self.C

            def call(stream: int | None = None):
                try:
                    launch(stream_of(device) if stream is None else stream)
                except ContextMismatch:  # (called where another device is current)
                    with lib.device_guard(device):
                        launch(stream_of(device) if stream is None else stream)
                return C
        else:
            def call(stream: int | None = None):
                if stream is not None:
                    raise ValueError("this bound call does more than one launch (copies or padding): it runs on "
                                     "the current stream; make that stream current instead of naming it")
                return plan.run(*operands, *args)
        self._call = call

    def __call__(self, stream: int | None = None):
        return self._call(stream)


class TcPlan(_Plan):
    """C = A @ B on the tensor cores for one kind of operands (see simtlab.gemm_tc)."""

    def __init__(self, lib: ArrayLib, A, B, C=None, out_dtype: str = "float32", rung: str | int = "best"):
        from ..device import device_info, require_gpu
        from .gemm_tc import TcProblem, tma_ready, unsupported

        ta, a_shape, a_strides, dev, la = _operand(lib, A, "A", (2, 3))  # (a host tensor named before the GPU is looked for)
        tb, b_shape, b_strides, dev_b, lb = _operand(lib, B, "B", (2, 3))
        require_gpu()
        for name, t in (("A", ta), ("B", tb)):
            if t not in TC_INPUTS:
                raise TypeError(f"{name} has dtype {t}; the tensor-core GEMM takes float16 or bfloat16 (CuPy has no "
                                "bfloat16: pass PyTorch bfloat16 tensors)")
        if tb != ta:
            raise TypeError(f"A is {ta} and B is {tb}: both operands take one type")
        if len(a_shape) != len(b_shape):
            raise ValueError(f"A and B are both 2-D (MxK, KxN) or both 3-D batches; got shapes {a_shape} and {b_shape}")
        batch = a_shape[0] if len(a_shape) == 3 else 1
        if len(a_shape) == 3 and b_shape[0] != batch:
            raise ValueError(f"A has {batch} matrices and B {b_shape[0]}")
        (M, K), (K2, N) = a_shape[-2:], b_shape[-2:]
        if K != K2:
            raise ValueError(f"inner dimensions differ: A is {a_shape}, B is {b_shape}")
        if out_dtype not in ("float32", ta):
            raise ValueError(f"out_dtype is 'float32' or the inputs' own type ({ta!r}), not {out_dtype!r}")
        if dev_b != dev:
            raise ValueError(f"A is on GPU {dev} and B on GPU {dev_b}: both operands take one GPU")
        for name, shape, strides, layout in (("A", a_shape, a_strides, la), ("B", b_shape, b_strides, lb)):
            if layout is None:
                raise _layout_error(name, shape, strides)
        self.out_shape = a_shape[:-2] + (M, N)
        if C is not None:
            tc, c_shape, c_strides, dev_c, lc = _operand(lib, C, "C", (2, 3))
            if tc != out_dtype or c_shape != self.out_shape:
                raise ValueError(f"C is {tc} {c_shape}; this product is {out_dtype} {self.out_shape}")
            if lc != ROW:
                raise ValueError(f"C has element strides {c_strides}: the kernels write a row-major, C-contiguous C")
            if dev_c != dev:
                raise ValueError(f"A, B and C must be on one GPU (A on {dev}, C on {dev_c})")
        self.problem = p = TcProblem(M, N, K, ta, batch, out_dtype, la + lb)  # (names a size < 1)
        self.lib, self.device, self.out_dtype = lib, dev, out_dtype
        self._new_c = lib.allocator(self.out_shape, out_dtype, dev)
        self._remember(A, B, C)
        info = device_info(dev)
        fam = _family("gemm_tc")
        self.choice = None  # what the dispatcher chose, and why (rung="best" on Hopper)
        if rung == "best":
            if fam.rung("wgmma_cluster").supports(info.compute_capability):
                from .gemm_dispatch import choose

                self.choice = choose(p, info)
                rung = self.choice.rung
            else:
                rung = "mma_multistage"
        r = fam.rung(rung)
        if not r.supports(info.compute_capability):
            raise ValueError(f"rung {r.id} needs {r.requirement}; this GPU is {info.arch}")
        self.rung, self.info = r, info
        self._padded = self._direct = self._pointer = self._unaligned = None
        with lib.on_device(dev):
            row_major = TcProblem(M, N, K, ta, batch, out_dtype)
            if r.can(SPLIT):  # rows of any alignment, read where they lie
                from .gemm_dispatch import split_config

                self._split_params = self.choice.params if self.choice is not None else split_config(p, info)
                self._direct = self._split(p, self._split_params)
                self._call = self._direct_path()
            elif r.can(CLUSTER):
                if tma_ready(p):  # read where the operands lie (16-byte aligned addresses: checked per call)
                    self._direct = self._cluster(p)
                    self._call = self._direct_path()
            elif unsupported(r, row_major) is not None:
                raise ValueError(f"rung {r.id} cannot run {p.label}: {unsupported(r, row_major)}")
            else:
                self._pointer = self._pointer_kernels(row_major)

    @property
    def params(self) -> dict | None:
        """The parameters of the kernel this plan launches where it reads the operands in place (rung
        6: the store's row for the shape, or the shipped ones; rung 7: the dispatcher's tile, split and
        layout); None on the other paths."""
        return dict(self._direct.params) if self._direct is not None else None

    def describe(self) -> str:
        """What a call runs and why: the rung, its parameters, the dispatcher's reason."""
        p = self.problem
        params = self.params
        what = f"{self.rung.id}" + (f" {params}" if params else "")
        path = "" if self._direct is not None else (" on padded row-major copies" if self.rung.can(CLUSTER) else "")
        why = f"; {self.choice.why}" if self.choice is not None else " (the rung asked for)"
        return f"gemm_tc {p.label}: {what}{path}{why}"

    def __repr__(self) -> str:
        return f"<TcPlan {self.describe()}>"

    # --- building -------------------------------------------------------------------------------
    def _split(self, p, params):
        """Rung 7 at `params` (the dispatcher's): one cluster launch, operands read where they lie."""
        from .split import SplitKernel

        return SplitKernel(_instance("gemm_tc", "split_k", _frozen(params), self.info.arch), p, self.info, prepare)

    def _cluster(self, p):
        """Rung 6 for these shapes, at the store's fastest verified row for them where there is one
        (what `simtlab tune gemm_tc` found), else at its shipped parameters."""
        from .gemm_tc import ClusterKernel

        def make(params):
            return ClusterKernel(_instance("gemm_tc", self.rung.name, params, self.info.arch), p, self.info, prepare)

        return _with_store_params("gemm_tc", self.rung, p, None, self.info, make)

    def _pointer_kernels(self, p):
        """Rungs 1-5 through their pointer arguments (M, N, K, A, B, C) - rungs 1-3, and a VEC
        variant where the rung has one - or through the ladder's runner for the TMA rungs 4-5."""
        params = choose_params(self.rung, p, self.info, None)
        inst = _instance("gemm_tc", self.rung.name, _frozen(params), self.info.arch)
        if self.rung.can(TMA):
            return inst
        launches = {}
        for vec in ((True, False) if self.rung.vec_variant else (None,)):
            geometry = inst.geometry(p, self.info)
            func = prepare(inst, geometry, vec, self.info)
            packed = PackedLaunch(function_handle(func), geometry.grid, geometry.block, geometry.shared,
                                  (I32, I32, I32, PTR, PTR, PTR), self.device)
            for i, v in enumerate((p.M, p.N, p.K)):
                packed.values[i].value = v
            launches[vec] = packed
        return launches

    # --- running ----------------------------------------------------------------------------------
    def _direct_path(self):
        """Every call's path where rung 6 reads the operands in place: one function with what it
        touches bound to locals - C's allocation, the addresses, the stream, the kernel's launch -
        and the general path for misaligned addresses."""
        lib, device, new_c, general, launch = self.lib, self.device, self._new_c, self._run, self._direct.launch
        ptr, stream = lib.ptr, lib.stream
        ma, mb, mc = self._direct.masks  # (address bits that must be zero: 16-byte maps, or rung 7's row alignments)

        def call(A, B, C=None):
            if C is None:
                C = new_c(A)
            pa, pb, pc = ptr(A), ptr(B), ptr(C)
            if (pa & ma) | (pb & mb) | (pc & mc):
                return general(A, B, C)
            launch(pa, pb, pc, stream(device))
            return C

        return call

    def _bound_launch(self, A, B, C):
        ptr = self.lib.ptr
        pa, pb, pc = ptr(A), ptr(B), ptr(C)
        if self._direct is not None and self._direct.aligned(pa, pb, pc):
            return self._direct.bind(pa, pb, pc)
        if isinstance(self._pointer, dict):
            vec = None
            if self.rung.vec_variant:
                vec = not (pa | pb | pc) & 15 and self.problem.K % 8 == 0 and self.problem.N % 8 == 0
            if self.problem.layout == "nn":
                packed = self._pointer[vec].clone()
                packed.values[3].value, packed.values[4].value, packed.values[5].value = pa, pb, pc
                return packed
        return None

    def _run(self, A, B, C):
        lib = self.lib
        if C is None:
            C = self._new_c(A)
        if self._direct is not None:
            ptr = lib.ptr
            pa, pb, pc = ptr(A), ptr(B), ptr(C)
            if self._direct.aligned(pa, pb, pc):
                self._direct.launch(pa, pb, pc, lib.stream(self.device))
                return C
        if self.rung.can(SPLIT):  # addresses off the rows' alignment: the build for 2-byte rows
            if self._unaligned is None:
                with lib.on_device(self.device):
                    self._unaligned = self._split(self.problem, {**self._split_params, "AV": 2, "BV": 2})
            self._unaligned.launch(lib.ptr(A), lib.ptr(B), lib.ptr(C), lib.stream(self.device))
            return C
        if self.rung.can(CLUSTER):
            self._run_padded(A, B, C)
        else:
            self._run_pointer(A, B, C)
        return C

    def _run_padded(self, A, B, C):
        """Shapes or addresses the tensor maps cannot take: zero-padded row-major copies with K and
        N rounded up to 8 (and 16-byte aligned, being new), made by the caller's library on its
        stream; the product's columns are copied back into C."""
        from .gemm_tc import TcProblem

        lib, p = self.lib, self.problem
        kp, np_ = -(-p.K // 8) * 8, -(-p.N // 8) * 8
        lead = self.out_shape[:-2]
        if self._padded is None:
            self._padded = self._cluster(TcProblem(p.M, np_, kp, p.dtype, p.batch, p.out))
        Ap = lib.zeros(lead + (p.M, kp), p.dtype, self.device) if kp != p.K else lib.empty(lead + (p.M, kp), p.dtype,
                                                                                             self.device)
        Bp = lib.zeros(lead + (kp, np_), p.dtype, self.device) if (kp, np_) != (p.K, p.N) else \
            lib.empty(lead + (kp, np_), p.dtype, self.device)
        Cp = C if np_ == p.N and not lib.ptr(C) & 15 else lib.empty(lead + (p.M, np_), p.out, self.device)
        lib.copy_into(Ap[..., :p.K], A)
        lib.copy_into(Bp[..., :p.K, :p.N], B)
        self._padded.launch(lib.ptr(Ap), lib.ptr(Bp), lib.ptr(Cp), lib.stream(self.device))
        if Cp is not C:
            lib.copy_into(C, Cp[..., :p.N])

    def _run_pointer(self, A, B, C):
        lib, p = self.lib, self.problem
        if p.layout != "nn":  # (only rung 6 reads transposed views: the others get row-major copies)
            A, B = lib.contiguous(A), lib.contiguous(B)
        if isinstance(self._pointer, dict):
            pa, pb, pc = lib.ptr(A), lib.ptr(B), lib.ptr(C)
            vec = None
            if self.rung.vec_variant:
                vec = not (pa | pb | pc) & 15 and p.K % 8 == 0 and p.N % 8 == 0
            packed = self._pointer[vec]
            packed.values[3].value, packed.values[4].value, packed.values[5].value = pa, pb, pc
            packed.launch(lib.stream(self.device))
            return
        self._run_ladder_runner(A, B, C)

    def _run_ladder_runner(self, A, B, C):
        """Rungs 4-5 (teaching rungs, reached only by naming them): the ladder's runner over CuPy
        views of the operands, on the caller's stream."""
        import cupy

        from ..launch import runner
        from .gemm_tc import TcProblem, Workspace

        p = self.problem
        views = [_cupy_view(x) for x in (A, B, C)]
        ws = Workspace.of(TcProblem(p.M, p.N, p.K, p.dtype, p.batch, p.out), *views)
        with cupy.cuda.ExternalStream(self.lib.stream(self.device)):
            runner(self._pointer, ws.p, ws, None, self.info)()


# simtlab.gemm's: fp32 FMAs on the CUDA cores, 3xTF32 on the tensor cores, or three fp16 products of
# scaled parts (rung 13, Hopper)
PRECISIONS = ("ieee", "tf32x3", "f16x3")
F16X3_RUNGS = ("f16x3", 13, "13")
# Below this depth precision="tf32x3" sums in float64 on the CUDA cores (rung 8, KAHAN 2) instead:
# three TF32 products keep ~22 bits of each product, and a short SGEMM rounds too few times to lose
# more - at K = 16 3xTF32's error is 1.4x SGEMM's (run 2026-12-04_h200_ea66d4_tf32x3_mma, Triton's
# too), at K = 256 0.7x - while float64 sums leave one rounding; such GEMMs are bound by writing C.
TF32X3_MIN_K = 64
# rung names that mean 3xTF32: rung 11 (Hopper: pre-pass, wgmma) and rung 12 (sm_80 and later)
TF32X3_HOPPER = ("tf32x3", 11, "11")
TF32X3_RUNGS = TF32X3_HOPPER + ("tf32x3_mma", 12, "12", "tf32x3_sm80")


def tf32x3_rung(rung, K: int, cc: tuple[int, int], arch: str, kahan: bool = False) -> str:
    """Which rung precision="tf32x3" runs for `rung` ("best" or one of TF32X3_RUNGS) at depth K on
    a GPU of compute capability `cc`: "warptiling" (float64 sums) below TF32X3_MIN_K, "tf32x3"
    (rung 11) on Hopper, "tf32x3_mma" (rung 12) on other GPUs from sm_80; a clear error otherwise
    (and for kahan=True, which 3xTF32 does not take)."""
    if kahan or (rung != "best" and rung not in TF32X3_RUNGS):
        raise ValueError("precision='tf32x3' is rung 11 (3xTF32 on Hopper) or 12 (its sm_80 path); it takes "
                         "no other rung and no kahan")
    if rung == "best" and K < TF32X3_MIN_K:
        return "warptiling"
    if rung in TF32X3_HOPPER or (rung == "best" and _family("gemm").rung("tf32x3").supports(cc)):
        return "tf32x3"
    if cc < (8, 0):
        raise ValueError(f"precision='tf32x3' needs the TF32 tensor cores of sm_80 or later; this GPU is {arch} - "
                         f"use precision='ieee'")
    return "tf32x3_mma"  # rung 12: sm_80 and later, the split in registers


def f16x3_rung(rung, K: int, cc: tuple[int, int], arch: str, kahan: bool = False) -> str:
    """Which rung precision="f16x3" runs for `rung` ("best" or one of F16X3_RUNGS) at depth K:
    "warptiling" (float64 sums) below TF32X3_MIN_K (three 11-bit products lose to a short SGEMM
    there, as 3xTF32 does: K = 16 / 32 9.3 / 10.5e-8 against 7.4 / 10.3e-8, run
    2026-12-05_h200_54605b_f16x3), rung 13 on Hopper; a clear error otherwise."""
    if kahan or (rung != "best" and rung not in F16X3_RUNGS):
        raise ValueError("precision='f16x3' is rung 13 (three fp16 products on Hopper); it takes no other rung "
                         "and no kahan")
    if rung == "best" and K < TF32X3_MIN_K:
        return "warptiling"
    if not _family("gemm").rung("f16x3").supports(cc):
        raise ValueError(f"precision='f16x3' runs on sm_90 (wgmma, TMA); this GPU is {arch} - use "
                         f"precision='tf32x3' (its sm_80 path) or 'ieee'")
    return "f16x3"


def gemm_choice(rung, precision: str, K: int, cc: tuple[int, int], arch: str,
                kahan: bool = False) -> tuple[str, tuple | None]:
    """The rung simtlab.gemm runs (its catalog name) and the accumulation it is built with
    (None: the rung's own; KAHAN_PARAMS; F64_SUMS_PARAMS) for `rung` and `precision` at depth K on
    a GPU of compute capability `cc`. A rung of TF32X3_RUNGS / F16X3_RUNGS sets its precision."""
    if rung in TF32X3_RUNGS:
        precision = "tf32x3"
    if rung in F16X3_RUNGS:
        precision = "f16x3"
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r}: one of {', '.join(map(repr, PRECISIONS))}")
    if precision in ("tf32x3", "f16x3"):
        name = (f16x3_rung if precision == "f16x3" else tf32x3_rung)(rung, K, cc, arch, kahan)
        # (K < TF32X3_MIN_K: the warptiling rung with one rounding in float64)
        return name, F64_SUMS_PARAMS if name == "warptiling" else None
    if kahan:
        if rung not in ("best", "warptiling", 8, "8", "warptile"):
            raise ValueError(f"kahan=True is an option of the warptiling rung (8), not of rung {rung!r}")
        return "warptiling", KAHAN_PARAMS
    if rung == "best":
        return ("tuned" if cc >= (8, 0) else "warptiling"), None
    return rung, None


class GemmPlan(_Plan):
    """C = alpha * A @ B + beta * C in fp32 for one kind of operands (see simtlab.gemm): on the
    CUDA cores (precision "ieee") or the tensor cores (3xTF32, rung 11); alpha and beta are given
    per call."""

    def __init__(self, lib: ArrayLib, A, B, C=None, rung: str | int = "best", kahan: bool = False,
                 precision: str = "ieee"):
        from ..device import device_info, require_gpu
        from .gemm import GemmProblem

        ta, a_shape, a_strides, dev, la = _operand(lib, A, "A", (2,))  # (a host tensor named before the GPU is looked for)
        tb, b_shape, b_strides, dev_b, lb = _operand(lib, B, "B", (2,))
        require_gpu()
        for name, t in (("A", ta), ("B", tb)):
            if t != "float32":
                raise TypeError(f"{name} has dtype {t}; this kernel takes float32")
        (M, K), (K2, N) = a_shape, b_shape
        if K != K2:
            raise ValueError(f"inner dimensions differ: A is {a_shape}, B is {b_shape} (need A.shape[1] == B.shape[0])")
        if dev_b != dev:
            raise ValueError(f"A is on GPU {dev} and B on GPU {dev_b}")
        if min(M, N, K) < 1:
            raise ValueError(f"GEMM sizes must be >= 1, got M={M}, N={N}, K={K}")
        for name, shape, strides, layout in (("A", a_shape, a_strides, la), ("B", b_shape, b_strides, lb)):
            if layout is None:
                raise _layout_error(name, shape, strides)
        if C is not None:
            tc, c_shape, c_strides, dev_c, lc = _operand(lib, C, "C", (2,))
            if tc != "float32":
                raise TypeError(f"C has dtype {tc}; this kernel takes float32")
            if c_shape != (M, N):
                raise ValueError(f"C has shape {c_shape}; A @ B is ({M}, {N})")
            if lc != ROW:
                raise ValueError(f"C has element strides {c_strides}: the kernels write a C-contiguous C")
            if dev_c != dev:
                raise ValueError(f"A is on GPU {dev} and C on GPU {dev_c}")
        self.lib, self.device, self.out_shape = lib, dev, (M, N)
        self._new_c = lib.allocator((M, N), "float32", dev)
        self._remember(A, B, C)
        # (transposed views are copied to row-major before the launch: the fp32 rungs read row-major
        # tiles; the copy is part of the call and of its time)
        self.copies = (la == TRANSPOSED, lb == TRANSPOSED)
        info = device_info(dev)
        name, sums = gemm_choice(rung, precision, K, info.compute_capability, info.arch, kahan)
        self.split = self.split_k = None
        self.choice = None  # what the dispatcher chose, and why (rung="best", precision "ieee")
        if rung in ("best", "split_k", 14, "14") and name in ("tuned", "warptiling", "split_k") and not kahan:
            from .gemm_dispatch import FP32, choose_fp32, split_config

            shape = _Shape(M, N, K, la == TRANSPOSED, lb == TRANSPOSED)
            if rung == "best":
                self.choice = choose_fp32(shape, info)
            if rung != "best" or self.choice.rung == "split_k":  # rung 14: views read in place, no copies
                self._split_k_params = self.choice.params if self.choice is not None else split_config(shape, info, FP32)
                self._init_split_k(shape, info)
                return
        if name in ("tf32x3", "f16x3"):
            self._init_split(M, N, K, info, name)
            return
        r = _family("gemm").rung(name)
        problem = GemmProblem(M, N, K)
        self.problem, self.rung, self.info = problem, r, info
        if r.name == "tf32x3_mma":
            self._go = self._go_mma  # (its launches are Tf32x3MmaGemm: three passes and scratch)
        # K or N not a multiple of 4 leaves only the predicated scalar path; a large product runs
        # faster on copies padded to whole 16-byte rows (zeros in the extra k add nothing)
        self.pad = None
        if r.vec_variant and (K % 4 or N % 4) and M * N * K >= PAD_MIN_MACS:
            self.pad = (-(-K // 4) * 4, -(-N // 4) * 4)
        self.launches = {}
        with lib.on_device(dev):
            if self.pad is not None:
                self.launches[True] = self._launch(r, GemmProblem(M, self.pad[1], self.pad[0]), True, sums)
            else:
                for vec in ((True, False) if r.vec_variant else (None,)):
                    if not (vec and (K % 4 or N % 4)):
                        self.launches[vec] = self._launch(r, problem, vec, sums)

    def _init_split_k(self, shape, info) -> None:
        """Rung 14 at the dispatcher's tile and split: one cluster launch on the operands as they lie."""
        self.problem, self.info, self.pad, self.copies = shape, info, None, (False, False)
        self.rung = _family("gemm").rung("split_k")
        self._split_k_shape, self._split_k_any = shape, None
        with self.lib.on_device(self.device):
            self.split_k = self._split_k_kernel(self._split_k_params)

    def _split_k_kernel(self, params):
        from .split import F32SplitKernel

        return F32SplitKernel(_instance("gemm", "split_k", _frozen(params), self.info.arch), self._split_k_shape,
                              self.info, prepare)

    def _run_split_k(self, A, B, C, alpha, beta):
        lib = self.lib
        pa, pb, pc = lib.ptr(A), lib.ptr(B), lib.ptr(C)
        kernel = self.split_k
        if not kernel.aligned(pa, pb, pc):  # (addresses off 16 bytes: the build with element loads)
            if self._split_k_any is None:
                with lib.on_device(self.device):
                    self._split_k_any = self._split_k_kernel({**self._split_k_params, "AV": 4, "BV": 4})
            kernel = self._split_k_any
        kernel.launch(pa, pb, pc, lib.stream(self.device), alpha, beta)
        return C

    def describe(self) -> str:
        """What a call runs and why: the rung, its parameters, the dispatcher's reason."""
        what = self.rung.id + (f" {dict(self.split_k.params)}" if self.split_k is not None else "")
        why = f"; {self.choice.why}" if self.choice is not None else ""
        return f"gemm {self.out_shape[0]}x{self.out_shape[1]}x{self.problem.K}: {what}{why}"

    def _init_split(self, M: int, N: int, K: int, info, name: str) -> None:
        """Rung 11 (`name` "tf32x3") or 13 ("f16x3"): the split kernels and the tensor-core main loop,
        built for this shape."""
        from .gemm import GemmProblem

        r = _family("gemm").rung(name)
        if not r.supports(info.compute_capability):
            raise ValueError(f"rung {r.stage} ({name}: wgmma and TMA) runs on sm_90; GPU {self.device} is {info.arch} "
                             f"- use precision='tf32x3' with rung 'best' (rung 12 there) or precision='ieee'")
        self.problem, self.rung, self.info, self.pad = GemmProblem(M, N, K), r, info, None
        self._split_args = (M, N, K)
        with self.lib.on_device(self.device):
            self.split = self._split_kernel(_store_params(name, self.problem, None, info))
        self._split_epi0 = None  # (built on the first C that is not on a 16-byte boundary)

    def _split_kernel(self, params):
        if self.rung.name == "f16x3":
            from .f16x3 import F16x3Gemm as kernel
        else:
            from .tf32x3 import Tf32x3Gemm as kernel

        inst = _instance("gemm", self.rung.name, params, self.info.arch)
        return kernel(inst, *self._split_args, self.info, prepare)

    def _run_split(self, A, B, C, alpha, beta):
        lib, kernel = self.lib, self.split
        pa, pb, pc = lib.ptr(A), lib.ptr(B), lib.ptr(C)
        if pc % 16 and self.problem.N % 4 == 0:  # (the TMA stores' C starts on a 16-byte boundary)
            if self._split_epi0 is None:
                with lib.on_device(self.device):
                    self._split_epi0 = self._split_kernel(tuple(sorted({**dict(_store_params(
                        self.rung.name, self.problem, None, self.info)), "EPI": 0}.items())))
            kernel = self._split_epi0
        scratch = lib.empty((kernel.parts_bytes // 4,), "float32", self.device)
        M, N, K = self._split_args
        kernel.run(pa, K, pb, N, pc, alpha, beta, lib.ptr(scratch), lib.stream(self.device))
        return C

    def _launch(self, rung, problem, vec, sums=None):
        """The rung's launch for this problem (a PackedLaunch; rung 12: its three passes,
        ops.tf32x3.Tf32x3MmaGemm); `sums` (KAHAN_PARAMS, F64_SUMS_PARAMS) overrides its
        accumulation."""
        info = self.info

        def make(params):
            if sums:
                params = tuple(sorted({**dict(params or ()), **dict(sums)}.items()))
            inst = _instance("gemm", rung.name, params, info.arch)
            if rung.name == "tf32x3_mma":
                from .tf32x3 import Tf32x3MmaGemm

                return Tf32x3MmaGemm(inst, problem, info, prepare, bool(vec))
            geometry = inst.geometry(problem, info)
            func = prepare(inst, geometry, vec, info)
            packed = PackedLaunch(function_handle(func), geometry.grid, geometry.block, geometry.shared,
                                  (I32, I32, I32, F32, PTR, PTR, F32, PTR), self.device)
            for i, v in enumerate((problem.M, problem.N, problem.K)):
                packed.values[i].value = v
            return packed

        return _with_store_params("gemm", rung, problem, vec, info, make)

    def _run(self, A, B, C, alpha: float = 1.0, beta: float = 0.0):
        lib = self.lib
        if C is None:
            if beta != 0:
                raise ValueError("beta != 0 needs an input C")
            C = self._new_c(A)
        if self.split_k is not None:
            return self._run_split_k(A, B, C, alpha, beta)
        if self.pad is not None:
            return self._run_padded(A, B, C, alpha, beta)
        if self.copies[0]:
            A = lib.contiguous(A)
        if self.copies[1]:
            B = lib.contiguous(B)
        if self.split is not None:
            return self._run_split(A, B, C, alpha, beta)
        pa, pb, pc = lib.ptr(A), lib.ptr(B), lib.ptr(C)
        vec = None
        if self.rung.vec_variant:
            vec = not (pa | pb | pc) & 15 and True in self.launches
        self._go(self.launches[vec], alpha, pa, pb, beta, pc)
        return C

    def _bound_launch(self, A, B, C, alpha: float = 1.0, beta: float = 0.0):
        if self.split_k is not None:
            pa, pb, pc = self.lib.ptr(A), self.lib.ptr(B), self.lib.ptr(C)
            return self.split_k.bind(pa, pb, pc, float(alpha), float(beta)) if self.split_k.aligned(pa, pb, pc) else None
        if self.pad is not None or any(self.copies) or self.split is not None or self.rung.name == "tf32x3_mma":
            return None
        pa, pb, pc = self.lib.ptr(A), self.lib.ptr(B), self.lib.ptr(C)
        vec = (not (pa | pb | pc) & 15 and True in self.launches) if self.rung.vec_variant else None
        packed = self.launches[vec].clone()
        v = packed.values
        v[3].value, v[4].value, v[5].value, v[6].value, v[7].value = float(alpha), pa, pb, float(beta), pc
        return packed

    def _go(self, packed: PackedLaunch, alpha, pa, pb, beta, pc) -> None:
        v = packed.values
        v[3].value, v[4].value, v[5].value, v[6].value, v[7].value = alpha, pa, pb, beta, pc
        packed.launch(self.lib.stream(self.device))

    def _go_mma(self, kernel, alpha, pa, pb, beta, pc) -> None:
        """_go for rung 12 (ops.tf32x3.Tf32x3MmaGemm): its flag and exponents allocated on the caller's stream."""
        scratch = self.lib.empty((kernel.scratch_bytes // 4,), "float32", self.device)
        kernel.run(pa, pb, pc, alpha, beta, self.lib.ptr(scratch), self.lib.stream(self.device))

    def _run_padded(self, A, B, C, alpha, beta):
        """Copies of A (M x Kp), B (Kp x Np) and C (M x Np) with K and N rounded up to 4, their
        extra rows and columns zero, made on the caller's stream; the 16-byte path on them; C's
        columns copied back. Part of the call and of its time (~2% at 4097x4095x4093)."""
        lib, (M, N, K), (kp, np_) = self.lib, self.out_shape + (self.problem.K,), self.pad
        Ap, Bp = lib.empty((M, kp), "float32", self.device), lib.empty((kp, np_), "float32", self.device)
        Cp = lib.empty((M, np_), "float32", self.device)
        lib.copy_into(Ap[:, :K], A)
        lib.copy_into(Bp[:K, :N], B)
        for extra in (Ap[:, K:], Bp[K:], Bp[:K, N:]):
            lib.fill_zero(extra)
        if beta != 0:
            lib.copy_into(Cp[:, :N], C)
        self._go(self.launches[True], alpha, lib.ptr(Ap), lib.ptr(Bp), beta, lib.ptr(Cp))
        lib.copy_into(C, Cp[:, :N])
        return C


@lru_cache(maxsize=256)
def _store_params(rung_name: str, problem, vec: bool | None, device, fam: str = "gemm") -> tuple | None:
    """Launch parameters for a problem: the results store's best (rungs that read it), else size
    defaults (cached per shape)."""
    from ..store import Store, default_path

    rung = _family(fam).rung(rung_name)
    store = None
    if rung.from_store and default_path().exists():
        try:
            store = Store(default_path(), readonly=True)
        except Exception:  # an unreadable store must not stop a matrix product
            store = None
    params = choose_params(rung, problem, device, vec, store)
    if store is not None:
        store.close()
    return _frozen(params)


def _with_store_params(fam: str, rung, problem, vec: bool | None, device, make):
    """`make(params)` at the parameters `_store_params` chooses; where the store's row no longer
    builds or launches (its kernel changed since it was measured), a warning and the shipped ones -
    a stale row must not stop a matrix product."""
    chosen = _store_params(rung.name, problem, vec, device, fam)
    try:
        return make(chosen)
    except (CompileError, LaunchError, ValueError) as exc:
        shipped = _frozen(choose_params(rung, problem, device, vec))
        if chosen == shipped:
            raise
        warnings.warn(f"{rung.id} at {problem.label}: the results store's fastest row ({dict(chosen or ())}) does not "
                      f"run now ({str(exc).splitlines()[0]}); using the shipped parameters", RuntimeWarning, stacklevel=2)
        return make(shipped)


def _cupy_view(x):
    """A CuPy view of a PyTorch tensor or CuPy array (bfloat16 as its 16-bit bits), for the teaching
    rungs' CuPy runners."""
    import cupy

    if isinstance(x, cupy.ndarray):
        return x
    import torch

    return cupy.asarray(x.view(torch.int16) if x.dtype == torch.bfloat16 else x)
