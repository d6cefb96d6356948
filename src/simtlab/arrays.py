"""A caller's GPU arrays as the library calls read them: PyTorch tensors and CuPy arrays, each
read straight from its own attributes (pointer, shape, strides, type, device) - no wrapping of
one library's array in the other's - and each library's current stream, device and allocator.

An `ArrayLib` is chosen once per call from the type of the first operand; everything a call
does to arrays (reading, allocating, copying) then goes through it, on that library's current
stream, so a call orders itself after the caller's earlier work and can be captured in the
library's CUDA graphs."""

from __future__ import annotations

from contextlib import nullcontext
from functools import cache
from typing import Any

__all__ = ["ArrayLib", "array_lib", "layout_of", "ROW", "TRANSPOSED"]

_ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}


def _out_of_memory(shape: tuple, dtype: str, device: int) -> MemoryError:
    """An allocator's out-of-memory failure, named: the array's shape, type and size against what
    the GPU has free."""
    import cupy

    free, total = cupy.cuda.Device(device).mem_info
    size = _ITEMSIZE[dtype]
    for n in shape:
        size *= n
    return MemoryError(f"C ({'x'.join(map(str, shape))} {dtype}, {size / 2**30:.2f} GiB) does not fit on GPU "
                       f"{device} ({free / 2**30:.1f} of {total / 2**30:.1f} GiB free): pass a C or split the product")

ROW, TRANSPOSED = "n", "t"  # a matrix's layout: row-major, or the transposed view of a row-major matrix


def layout_of(shape: tuple[int, ...], strides: tuple[int, ...]) -> str | None:
    """'n' when the last two dimensions are row-major and matrices lie back to back, 't' when they
    are the transposed view of such a batch (x.T, x.mT, x.transpose(-1, -2)), None otherwise.
    Strides are in elements; a dimension of extent 1 may have any stride."""
    *lead, rows, cols = shape
    *lead_s, s_rows, s_cols = strides
    matrix = rows * cols
    for extent, stride in zip(lead, lead_s):
        if extent != 1 and stride != matrix:
            return None
        matrix *= extent
    if (cols == 1 or s_cols == 1) and (rows == 1 or s_rows == cols):
        return ROW
    if (rows == 1 or s_rows == 1) and (cols == 1 or s_cols == rows):
        return TRANSPOSED
    return None


class ArrayLib:
    """What a library call needs from the array library of its operands."""

    name = ""

    def owns(self, x) -> bool: ...
    def key(self, x) -> tuple: ...  # type, shape, strides, device: what a plan depends on
    def kind(self, x) -> tuple: ...  # type and shape: what a prepared plan checks on every call
    def ptr(self, x) -> int: ...
    def describe(self, x) -> tuple[str, tuple, tuple, int]: ...  # (dtype name, shape, element strides, device)
    def stream(self, device: int) -> int: ...
    def current_device(self) -> int: ...
    def device_guard(self, device: int): ...
    def allocator(self, shape: tuple, dtype: str, device: int): ...  # f(A): a new array on A's device, each call
    # (an out-of-memory failure raised as a MemoryError naming the size and the free memory)
    def empty(self, shape: tuple, dtype: str, device: int): ...
    def zeros(self, shape: tuple, dtype: str, device: int): ...
    def full(self, shape: tuple, dtype: str, device: int, value: float): ...
    def arange(self, n: int, dtype: str, device: int): ...  # 0, 1, ..., n-1
    def copy_into(self, dst, src) -> None: ...  # dst[...] = src (a view of dst may be passed)
    def fill_zero(self, x) -> None: ...  # x[...] = 0 (a view)
    def contiguous(self, x): ...

    def on_device(self, device: int):
        """A context in which `device` is current: nothing to do where it already is (the common case,
        no guard's cost), else the library's device guard."""
        return nullcontext() if self.current_device() == device else self.device_guard(device)


class TorchArrays(ArrayLib):
    name = "torch"

    def __init__(self):
        import torch

        self.torch = torch
        self.tensor = torch.Tensor
        self.dtypes = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
                       torch.float64: "float64", torch.int32: "int32", torch.int64: "int64"}
        if hasattr(torch, "uint32"):  # (PyTorch 2.3 on)
            self.dtypes[torch.uint32] = "uint32"
        self.by_name = {v: k for k, v in self.dtypes.items()}
        get_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # (what torch's own launches read)
        self.stream = get_stream if get_stream is not None else self._public_stream
        get_device = getattr(torch._C, "_cuda_getDevice", None)
        self.current_device = get_device if get_device is not None else torch.cuda.current_device
        self.ptr = torch.Tensor.data_ptr  # (the method itself: one call less on every launch)

    def owns(self, x) -> bool:
        return isinstance(x, self.tensor)

    def key(self, x) -> tuple:
        return (x.dtype, x.shape, x.stride(), x.get_device())

    def kind(self, x) -> tuple:
        return (x.dtype, x.shape)

    def describe(self, x):
        if not x.is_cuda:
            raise TypeError(f"a PyTorch tensor on {x.device} was given: simtlab's kernels take CUDA tensors")
        return self.dtypes.get(x.dtype, str(x.dtype).removeprefix("torch.")), tuple(x.shape), tuple(x.stride()), \
            x.get_device()

    def _public_stream(self, device: int) -> int:
        return self.torch.cuda.current_stream(device).cuda_stream

    def device_guard(self, device: int):
        return self.torch.cuda.device(device)

    def allocator(self, shape, dtype, device):
        # (A.new_empty: on A's device, through the caching allocator - a microsecond less than torch.empty)
        dt, oom = self.by_name[dtype], self.torch.cuda.OutOfMemoryError

        def new(A):
            try:
                return A.new_empty(shape) if A.dtype == dt else A.new_empty(shape, dtype=dt)
            except oom:
                raise _out_of_memory(shape, dtype, device) from None
        return new

    def empty(self, shape, dtype, device):
        return self.torch.empty(shape, dtype=self.by_name[dtype], device=self.torch.device("cuda", device))

    def zeros(self, shape, dtype, device):
        return self.torch.zeros(shape, dtype=self.by_name[dtype], device=self.torch.device("cuda", device))

    def full(self, shape, dtype, device, value):
        return self.torch.full(shape, value, dtype=self.by_name[dtype], device=self.torch.device("cuda", device))

    def arange(self, n, dtype, device):
        return self.torch.arange(n, dtype=self.by_name[dtype], device=self.torch.device("cuda", device))

    def copy_into(self, dst, src) -> None:
        dst.copy_(src)

    def fill_zero(self, x) -> None:
        x.zero_()

    def contiguous(self, x):
        return x.contiguous()


class CupyArrays(ArrayLib):
    name = "cupy"

    def __init__(self):
        import cupy

        self.cupy = cupy
        self.ndarray = cupy.ndarray
        self.get_stream = cupy.cuda.get_current_stream
        self.get_device = cupy.cuda.runtime.getDevice

    def owns(self, x) -> bool:
        return isinstance(x, self.ndarray)

    def key(self, x) -> tuple:
        return (x.dtype, x.shape, x.strides, x.data.device_id)

    def kind(self, x) -> tuple:
        return (x.dtype, x.shape)

    def ptr(self, x) -> int:
        return x.data.ptr

    def describe(self, x):
        size = x.itemsize
        if any(s % size for s in x.strides):
            raise ValueError(f"an array with strides {x.strides} (bytes) that are not whole elements of {size} bytes")
        return x.dtype.name, x.shape, tuple(s // size for s in x.strides), x.data.device_id

    def stream(self, device: int) -> int:
        return self.get_stream(device).ptr

    def current_device(self) -> int:
        return self.get_device()

    def device_guard(self, device: int):
        return self.cupy.cuda.Device(device)

    def allocator(self, shape, dtype, device):
        empty, oom = self.cupy.empty, self.cupy.cuda.memory.OutOfMemoryError

        def new(A):
            with A.device:  # (C on A's device, whichever is current)
                try:
                    return empty(shape, dtype=dtype)
                except oom:
                    raise _out_of_memory(shape, dtype, device) from None
        return new

    def empty(self, shape, dtype, device):
        with self.cupy.cuda.Device(device):
            return self.cupy.empty(shape, dtype=dtype)

    def zeros(self, shape, dtype, device):
        with self.cupy.cuda.Device(device):
            return self.cupy.zeros(shape, dtype=dtype)

    def full(self, shape, dtype, device, value):
        with self.cupy.cuda.Device(device):
            return self.cupy.full(shape, value, dtype=dtype)

    def arange(self, n, dtype, device):
        with self.cupy.cuda.Device(device):
            return self.cupy.arange(n, dtype=dtype)

    def copy_into(self, dst, src) -> None:
        dst[...] = src

    def fill_zero(self, x) -> None:
        x.fill(0)

    def contiguous(self, x):
        return self.cupy.ascontiguousarray(x)


@cache
def _torch() -> TorchArrays | None:
    try:
        import torch  # noqa: F401
    except Exception:
        return None
    return TorchArrays()


@cache
def _cupy() -> CupyArrays:
    return CupyArrays()


def array_lib(x: Any) -> ArrayLib:
    """The array library of `x`, or a TypeError naming what was given."""
    mod = type(x).__module__
    if mod.startswith("torch"):
        lib = _torch()
        if lib is not None and lib.owns(x):
            return lib
    elif mod.startswith("cupy"):
        return _cupy()
    kind = f"{mod.split('.')[0]}.{type(x).__name__}"
    if hasattr(x, "__cuda_array_interface__"):
        raise TypeError(f"a {kind} was given: simtlab's library calls take PyTorch CUDA tensors or CuPy arrays "
                        "(wrap other device arrays with cupy.asarray, which copies nothing)")
    raise TypeError(f"a GPU array (CuPy array, or PyTorch CUDA tensor) was expected, got {kind} on the host")
