"""Correctness checks: relative error against a trusted reference, NaN-strict.

Policy (documented in the README):
* fresh random inputs for every check, never zeros;
* the output is poisoned (NaN) before the launch, so an element the kernel
  never wrote shows up as NaN and fails;
* a NaN or Inf in the output fails unless the reference has the same value at
  the same place;
* error = ||out - ref||_F / ||ref||_F over the finite entries, in float64;
* tolerances scale with the unit roundoff u of the precision: a dot product of
  length K in fp32 may drift by u*(8*sqrt(K) + 16) (random-walk growth of the
  rounding error with a 5-8x margin), an elementwise op by 2u. TF32 (u = 2^-11)
  lands far above the fp32 bound, so an accidental TF32 path fails.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Verdict", "UNIT_ROUNDOFF", "dot_tolerance", "elementwise_tolerance", "relative_error", "compare"]

UNIT_ROUNDOFF = {
    "float64": 2.0**-53,
    "float32": 2.0**-24,
    "tf32": 2.0**-11,
    "float16": 2.0**-11,
    "bfloat16": 2.0**-8,
}


def _u(dtype: str) -> float:
    try:
        return UNIT_ROUNDOFF[str(dtype)]
    except KeyError:
        raise ValueError(f"no tolerance policy for dtype {dtype!r}; known: {', '.join(UNIT_ROUNDOFF)}") from None


def dot_tolerance(dtype: str, k: int) -> float:
    """Relative-error bound for a sum of k products accumulated in `dtype`."""
    if k < 1:
        raise ValueError(f"reduction length must be >= 1, got {k}")
    return _u(dtype) * (8.0 * math.sqrt(k) + 16.0)


def elementwise_tolerance(dtype: str) -> float:
    return 2.0 * _u(dtype)


@dataclass(frozen=True)
class Verdict:
    ok: bool
    rel_error: float
    tolerance: float
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok


def _xp(a):
    try:
        import cupy

        return cupy.get_array_module(a)
    except Exception:
        return np


def relative_error(out, ref) -> float:
    """||out - ref|| / ||ref|| in float64 over the entries where ref is finite."""
    xp = _xp(ref)
    o, r = out.astype(xp.float64, copy=False), ref.astype(xp.float64, copy=False)
    mask = xp.isfinite(r)
    r_fin = xp.where(mask, r, 0.0)
    diff = xp.where(mask, o, 0.0) - r_fin  # masked before subtracting: no inf - inf
    ref_norm = float(xp.linalg.norm(r_fin.ravel()))
    diff_norm = float(xp.linalg.norm(diff.ravel()))
    if ref_norm == 0.0:
        return diff_norm
    return diff_norm / ref_norm


def _first(xp, mask) -> tuple:
    idx = int(xp.argmax(mask.ravel()))
    return tuple(int(i) for i in np.unravel_index(idx, mask.shape))


def compare(out, ref, tolerance: float) -> Verdict:
    """Check `out` against `ref` (same shape; NumPy or CuPy arrays)."""
    if tuple(out.shape) != tuple(ref.shape):
        return Verdict(False, math.inf, tolerance, f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}")
    xp = _xp(ref)
    o, r = out.astype(xp.float64, copy=False), ref.astype(xp.float64, copy=False)
    ref_finite = xp.isfinite(r)
    stray = ~xp.isfinite(o) & ref_finite
    n_stray = int(stray.sum())
    if n_stray:
        nan = int((xp.isnan(o) & ref_finite).sum())
        return Verdict(
            False, math.inf, tolerance,
            f"{n_stray} non-finite outputs where the reference is finite ({nan} NaN: never written, or computed), "
            f"first at {_first(xp, stray)}",
        )
    special = ~ref_finite
    if bool(special.any()):
        same = (xp.isnan(r) & xp.isnan(o)) | (o == r)
        wrong = special & ~same
        if bool(wrong.any()):
            return Verdict(False, math.inf, tolerance,
                           f"{int(wrong.sum())} outputs differ where the reference is NaN/Inf, first at {_first(xp, wrong)}")
    err = relative_error(o, r)
    if not math.isfinite(err) or err > tolerance:
        return Verdict(False, err, tolerance, f"relative error {err:.3e} > tolerance {tolerance:.3e}")
    return Verdict(True, err, tolerance)


def finite_poison(a):
    """A second poison, finite and far from any result a kernel computes: the type's most negative
    finite value (floats), or its largest value (integers)."""
    import numpy

    dt = numpy.dtype(a.dtype)
    return float(numpy.finfo(dt).min) if dt.kind == "f" else int(numpy.iinfo(dt).max)


def strays_explained(first, second, ref, poison, read_first: bool = False) -> str:
    """Why an output holds values that are not finite where the reference is: elements the finite
    poison of a second launch still holds were never written; the others are NaN or Inf the kernel
    computed (for an argument it also reads: possibly from its own initial contents)."""
    xp = _xp(ref)
    r = ref.astype(xp.float64, copy=False)
    stray = ~xp.isfinite(first.astype(xp.float64, copy=False)) & xp.isfinite(r)
    never = stray & (second.astype(xp.float64, copy=False) == float(poison))
    computed = stray & ~never
    parts = []
    if bool(never.any()):
        parts.append(f"{int(never.sum())} elements never written (the poison stays), first at {_first(xp, never)}")
    if bool(computed.any()):
        where = "from the kernel's arithmetic or the argument's own contents" if read_first else \
            "by the kernel's arithmetic"
        parts.append(f"{int(computed.sum())} NaN/Inf computed {where} where the reference is finite, first at "
                     f"{_first(xp, computed)}")
    return "; ".join(parts)
