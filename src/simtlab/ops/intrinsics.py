"""Fast-math intrinsics against their accurate spellings, one operation at a time:
exp (expf vs __expf), division by a run-time value (a / d vs a * (1/d)), and int / and % by a
run-time power of two (vs >> and &). Each element is written as f(x) once (the accuracy check)
and f is then applied REPS more times in four register chains per thread (the timing): the table
puts operations per second beside the measured error in ulps."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from ..family import Family, Rung, frozen
from ..launch import Launch
from ..verify import UNIT_ROUNDOFF
from .base import Reference, parse_int
from .base import make_runner, unsupported  # noqa: F401 (FamilyOps' default hooks)

DTYPE = "float32"
OPS = ("exp", "div", "int")
DIVISOR = 3.0  # the run-time float divisor (1/3 is inexact: the reciprocal trick shows its error)
INT_DIVISOR = 1024  # the run-time power of two
SENTINEL = 0x7FBAD000  # no chain reaches it: a NaN payload as a float, above 2^30 as an int
DEFAULT_REPS = 64


@dataclass(frozen=True)
class IntrinsicProblem:
    op: str
    n: int
    reps: int = DEFAULT_REPS
    dtype: str = "float32"

    def __post_init__(self):
        if self.op not in OPS:
            raise ValueError(f"intrinsics operation must be one of {', '.join(OPS)}, got {self.op!r}")
        if int(self.n) < 1:
            raise ValueError(f"intrinsics length must be >= 1, got {self.n}")
        if not 0 <= int(self.reps) <= 4096:
            raise ValueError(f"intrinsics chain length must be 0..4096, got {self.reps}")

    @property
    def label(self) -> str:
        return f"{self.op}:{self.n}" + ("" if self.reps == DEFAULT_REPS else f":r{self.reps}")

    @property
    def operations(self) -> int:
        return self.n * (1 + 4 * self.reps)

    @property
    def flops(self) -> int:  # the ladder's rate column: operations (exp, division, int div+mod) per second
        return self.operations

    @property
    def bytes(self) -> int:
        return 8 * self.n


def parse_size(text: str, **_) -> IntrinsicProblem:
    """'exp:2^24', 'div:2^24', 'int:2^24', optionally ':r64' for the chain length."""
    parts = str(text).lower().split(":")
    if len(parts) not in (2, 3) or parts[0] not in OPS:
        raise ValueError(f"intrinsics size {text!r}: use OP:N or OP:N:rREPS with OP one of {', '.join(OPS)}")
    reps = DEFAULT_REPS
    if len(parts) == 3:
        if not parts[2].startswith("r"):
            raise ValueError(f"intrinsics size {text!r}: give the chain length as ':r64'")
        reps = int(parts[2][1:]) if parts[2][1:].isdigit() else -1
    return IntrinsicProblem(parts[0], parse_int(parts[1], f"intrinsics length in {text!r}"), reps)


def op_params(p: IntrinsicProblem, device=None, vec=None) -> dict:
    return {"OP": OPS.index(p.op), "REPS": p.reps}


def tolerance(p: IntrinsicProblem, ws=None) -> float:
    """Relative error (norm-wise) both rungs must meet: __expf on [-80, 80] is off by up to about
    2 + 1.2|x| ulp, a * (1/d) by under 2; int results must be exact."""
    return {"exp": 256, "div": 4, "int": 0}[p.op] * UNIT_ROUNDOFF["float32"]


def geometry(params, p: IntrinsicProblem, device=None) -> Launch:
    return Launch((-(-p.n // 256), 1, 1), (256, 1, 1))


def requested_bytes(params, p: IntrinsicProblem) -> int:
    return p.bytes


class Workspace:
    def __init__(self, p: IntrinsicProblem, seed: int):
        import cupy

        self.p = p
        rng = cupy.random.default_rng(seed)
        if p.op == "exp":
            self.x = rng.random(p.n, dtype=cupy.float32) * 160 - 80
        elif p.op == "div":
            self.x = rng.random(p.n, dtype=cupy.float32) * 2000 - 1000
        else:
            self.x = rng.integers(0, 2**30, p.n, dtype=cupy.int32).view(cupy.float32)
        self.y = cupy.empty_like(self.x)

    def poison(self) -> None:
        self.y.view(np.int32).fill(0x7FC00000)  # NaN as a float, and an int no rung produces (>= 2^30)

    def args(self) -> tuple:
        return (self.x, self.y, np.int32(self.p.n), np.float32(DIVISOR), np.int32(INT_DIVISOR),
                np.int32(INT_DIVISOR.bit_length() - 1), np.int32(SENTINEL))

    def expected(self):
        import cupy

        if self.p.op == "exp":
            return cupy.exp(self.x.astype(cupy.float64))
        if self.p.op == "div":
            return self.x.astype(cupy.float64) / DIVISOR
        v = self.x.view(cupy.int32).astype(cupy.int64)
        return (v // INT_DIVISOR + v % INT_DIVISOR).astype(cupy.float64)

    def output(self):
        import cupy

        return self.y.view(cupy.int32).astype(cupy.float64) if self.p.op == "int" else self.y


def workspace(p: IntrinsicProblem, seed: int) -> Workspace:
    return Workspace(p, seed)


def float32_ulp(ref):
    """The spacing of float32 numbers at each (float64) value: 2^(e-24) for |ref| in [2^(e-1), 2^e),
    never below the smallest subnormal 2^-149."""
    import cupy

    xp = cupy.get_array_module(ref)  # NumPy or CuPy, as given
    _, e = xp.frexp(xp.abs(ref))
    e = xp.where(ref == 0, -149 + 24, e)  # frexp(0) has exponent 0; zero's neighbours are subnormal
    return xp.ldexp(xp.ones_like(ref, dtype=xp.float64), xp.maximum(e - 24, -149))


def ulp_error(ws: Workspace) -> dict:
    """Error of the rung's single application, in units in the last place of the float32 result:
    max and mean over all elements (int: the number of wrong results)."""
    import cupy

    out, ref = ws.output(), ws.expected()
    if ws.p.op == "int":
        return {"max_ulp": None, "mean_ulp": None, "wrong": int((out != ref).sum())}
    err = cupy.abs(out.astype(cupy.float64) - ref) / float32_ulp(ref)
    return {"max_ulp": float(err.max()), "mean_ulp": float(err.mean()), "wrong": None}


def references() -> list[Reference]:
    """None in the ladder's sense: the two rungs are each other's reference for speed, float64 is the
    reference for accuracy (benchmarks/intrinsics_table.py prints them side by side)."""
    return []


# --- the family: its rungs, one per kernel file -------------------------------------------------

FAMILY = Family(
    name="intrinsics",
    title="fast-math intrinsics vs accurate spellings: exp, division by a run-time value, int / and % by 2^k",
    ops=sys.modules[__name__],
    reference="float64 (accuracy); the rungs against each other (speed)",
    default_sizes=("exp:2^24", "div:2^24", "int:2^24"),
    rungs=(
        Rung("intrinsics", 1, "precise", "intrinsics/01_precise.cu", "intrinsics_precise", ("OP", "REPS"),
             frozen({"OP": 0, "REPS": 64}),
             "expf, IEEE a / d, int / and % by a run-time divisor: accurate, several instructions each",
             geometry, size_defaults=op_params, sass_expect=("MUFU",)),
        Rung("intrinsics", 2, "fast", "intrinsics/02_fast.cu", "intrinsics_fast", ("OP", "REPS"),
             frozen({"OP": 0, "REPS": 64}),
             "__expf, a * (1/d), >> and &: one or two instructions each, for a measured loss of accuracy",
             geometry, size_defaults=op_params, sass_expect=("MUFU",)),
    ),
    metric="tflops",
    check_size="exp:1000003:r4",
)
