"""Pieces shared by the family op modules."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Reference", "LengthProblem", "one_thread_per_element", "parse_int", "require_cupy_array", "device_copy",
           "to_bf16_bits", "bf16_bits_to_float32", "ITEMSIZE", "torch_reference"]

ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2}
MAX_DIM = 2**31 - 1  # a matrix dimension the kernels' int arguments can hold
MAX_ELEMENTS = 2**40  # a 1-D problem's length: beyond any GPU's memory (the kernels index with 64 bits)
DEFAULT_SMS = 132  # an H200's SMs: what size-dependent choices assume when no device is given (plans, CPU tests)


def sm_count(device=None) -> int:
    """The device's SM count, or DEFAULT_SMS without a device."""
    return device.sms if device is not None else DEFAULT_SMS


def to_bf16_bits(x):
    """float32 CuPy array -> bfloat16 held as its uint16 bit pattern (CuPy has no bfloat16 type;
    kernels see a pointer), rounded to nearest even like __float2bfloat16_rn; NaN stays NaN."""
    import cupy

    bits = x.astype(cupy.float32, copy=False).view(cupy.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(cupy.uint16)
    return cupy.where(cupy.isnan(x), cupy.uint16(0x7FC0), rounded)


def bf16_bits_to_float32(x):
    """The exact float32 value of each bfloat16 bit pattern."""
    import cupy

    return (x.astype(cupy.uint32) << 16).view(cupy.float32)


@dataclass(frozen=True)
class Reference:
    """Something every rung is compared with in the same run.

    `make(ws)` returns a zero-argument callable that runs the reference on the
    workspace's inputs (writing the workspace output when `verifiable`).
    """

    name: str
    make: Callable[[Any], Callable[[], None]]
    verifiable: bool = True
    applies: Callable[[Any], bool] | None = None  # problem -> whether this reference takes it (None: all)
    supports: Callable[[tuple[int, int]], bool] | None = None  # compute capability -> whether it runs there


@dataclass(frozen=True)
class LengthProblem:
    """A problem sized by one element count n; subclasses give its FLOP and byte counts."""

    n: int
    dtype: str = "float32"
    what = "length"  # how errors name n

    def __post_init__(self):
        if int(self.n) < 1:
            raise ValueError(f"{self.what} must be >= 1, got {self.n}")

    @property
    def label(self) -> str:
        return str(self.n)

    @classmethod
    def parse(cls, text: str, **_):
        return cls(parse_int(text, cls.what))


def one_thread_per_element(params, p: LengthProblem, device=None):
    """Launch geometry of the kernels that give each element its own thread."""
    from ..launch import Launch

    return Launch((-(-p.n // params["BLOCK"]), 1, 1), (params["BLOCK"], 1, 1))


_INT = re.compile(r"^\s*(\d+)\s*(?:(\^|\*\*)\s*(\d+))?\s*$")


def parse_int(text: str, what: str) -> int:
    """'4096', '2^28', '2**28' or '1e6' -> int >= 1, with a clear error otherwise."""
    s = str(text).strip().lower()
    m = _INT.match(s)
    if m:
        value = int(m.group(1)) ** int(m.group(3)) if m.group(2) else int(m.group(1))
    else:
        try:
            f = float(s)
        except ValueError:
            raise ValueError(f"{what}: {text!r} is not a size (use e.g. 4096, 2^28 or 1e6)") from None
        if not f.is_integer():
            raise ValueError(f"{what}: {text!r} is not a whole number")
        value = int(f)
    if value < 1:
        raise ValueError(f"{what} must be >= 1, got {value}")
    if value > MAX_ELEMENTS:
        raise ValueError(f"{what}: {text} is over 2^40 (4 TiB of fp32): no GPU holds it")
    return value


def require_cupy_array(x, name: str, dtype=None, ndim: int | None = None):
    """A clear error for host arrays, wrong dtype, rank or layout; returns the CuPy array."""
    import cupy

    if isinstance(x, cupy.ndarray):
        arr = x
    elif hasattr(x, "__cuda_array_interface__") or (hasattr(x, "__dlpack__") and getattr(x, "is_cuda", False)):
        arr = cupy.asarray(x)  # zero-copy view of a PyTorch/Numba/... device array
    else:
        kind = type(x).__module__.split(".")[0] + "." + type(x).__name__
        raise TypeError(f"{name} must be a GPU array (CuPy, or PyTorch CUDA tensor), got {kind} on the host")
    if dtype is not None and arr.dtype != dtype:
        raise TypeError(f"{name} has dtype {arr.dtype}; this kernel takes {cupy.dtype(dtype).name}")
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {arr.shape}")
    if not arr.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous (row-major, unit stride); got strides {arr.strides} — "
                         f"pass an ascontiguousarray() copy")
    if arr.device.id != cupy.cuda.Device().id:
        raise ValueError(f"{name} is on GPU {arr.device.id} but the current device is {cupy.cuda.Device().id}")
    return arr


def torch_reference(name: str, make: Callable[[Any], Callable[[], None]], verifiable: bool = False) -> list[Reference]:
    """[the PyTorch reference] where PyTorch is installed, else []: it is optional, a second bar
    where a Python user would have it."""
    try:
        import torch  # noqa: F401
    except Exception:
        return []
    return [Reference(name, make, verifiable)]


def device_copy(nbytes: int):
    """A runner for cudaMemcpy device-to-device of `nbytes` (moving 2 x nbytes: read + write),
    the bandwidth ceiling memory-bound rungs are measured against."""
    import cupy

    nbytes = max(int(nbytes), 1)
    src = cupy.ones(nbytes, dtype=cupy.uint8)
    dst = cupy.empty(nbytes, dtype=cupy.uint8)

    def run():
        dst.data.copy_from_device_async(src.data, nbytes)

    return run


# --- the optional hooks of FamilyOps (simtlab.family), as their defaults: an ops module imports the
# ones it has nothing of its own to say about --------------------------------------------------------

def unsupported(rung, problem) -> str | None:
    """Default: every rung of the family takes every problem it can parse."""
    return None


def make_runner(instance, problem, ws, device, vec, prepare):
    """Default: None, one launch of the rung's geometry with the workspace's arguments."""
    return None

