"""The CUDA driver calls on the hot path of a library call, through ctypes with their argument
types declared once: a kernel launch with its parameters packed in advance, and the encoding of
a TMA tensor map. A call of `simtlab.gemm_tc` costs a few of these (a few microseconds), where
building CuPy arrays and argument tuples for every call cost hundreds."""

from __future__ import annotations

import ctypes
from functools import cache, partial
from dataclasses import dataclass
from typing import Callable, Sequence

__all__ = ["DriverError", "ContextMismatch", "libcuda", "error_name", "memset32", "PackedLaunch", "TensorMapEncoder",
           "AddressField", "MapSlot", "learn_address_field"]

_u32, _u64, _int, _vp = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int, ctypes.c_void_p
CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_HANDLE = 201, 400


class DriverError(RuntimeError):
    """A driver call that returned an error: its name and what was being done."""


class ContextMismatch(DriverError):
    """A launch from a thread whose current device is not the one the kernel was loaded on: the
    caller retries under a guard that makes that device current."""


@cache
def libcuda() -> ctypes.CDLL:
    """libcuda with the signatures of the calls made here (loaded once)."""
    from .device import NoGpuError

    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise NoGpuError(f"the CUDA driver (libcuda.so.1) is not installed on this machine: {exc}") from None
    lib.cuLaunchKernel.argtypes = [_vp, _u32, _u32, _u32, _u32, _u32, _u32, _u32, _vp, _vp, _vp]
    lib.cuLaunchKernel.restype = _int
    lib.cuLaunchKernelEx.argtypes = [_vp, _vp, _vp, _vp]
    lib.cuLaunchKernelEx.restype = _int
    lib.cuFuncSetAttribute.argtypes = [_vp, _int, _int]
    lib.cuFuncSetAttribute.restype = _int
    lib.cuTensorMapEncodeTiled.argtypes = [_vp, _int, _u32, _vp, _vp, _vp, _vp, _vp, _int, _int, _int, _int]
    lib.cuTensorMapEncodeTiled.restype = _int
    lib.cuMemsetD32Async.argtypes = [_u64, _u32, ctypes.c_size_t, _vp]
    lib.cuMemsetD32Async.restype = _int
    lib.cuOccupancyMaxActiveClusters.argtypes = [ctypes.POINTER(_int), _vp, _vp]
    lib.cuOccupancyMaxActiveClusters.restype = _int
    lib.cuGetErrorName.argtypes = [_int, ctypes.POINTER(ctypes.c_char_p)]
    lib.cuGetErrorName.restype = _int
    return lib


def error_name(code: int) -> str:
    name = ctypes.c_char_p()
    if libcuda().cuGetErrorName(code, ctypes.byref(name)) == 0 and name.value:
        return name.value.decode()
    return f"CUresult {code}"


def memset32(address: int, value: int, count: int, stream: int) -> None:
    """`count` 32-bit words at `address` set to `value`, in order on `stream` (a memset node when
    the stream is being captured)."""
    err = libcuda().cuMemsetD32Async(address, value, count, stream)
    if err:
        raise DriverError(f"cuMemsetD32Async of {count} words at {address:#x}: {error_name(err)}")


class _LaunchAttribute(ctypes.Structure):
    """CUlaunchAttribute: an id, padding to 8 bytes, a 64-byte value (here a cluster's x, y, z)."""
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", _u32 * 16)]


class _LaunchConfig(ctypes.Structure):
    """CUlaunchConfig (cuda.h): grid, block, shared bytes, stream, attributes."""
    _fields_ = [("grid", _u32 * 3), ("block", _u32 * 3), ("shared", _u32), ("stream", _vp),
                ("attrs", ctypes.POINTER(_LaunchAttribute)), ("num_attrs", _u32)]


CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 4, 14
PORTABLE_CLUSTER = 8  # blocks a cluster may have on any GPU with clusters; 16 after an opt-in (Hopper)


def max_active_clusters(function: int, block: Sequence[int], shared: int, cluster: int) -> int:
    """How many clusters of a kernel whose cluster shape is compiled in (`cluster` blocks along x)
    run at once on the current device: the GPCs' shape counts, not only each SM's occupancy."""
    count = _int()
    config = _LaunchConfig((_u32 * 3)(cluster, 1, 1), (_u32 * 3)(*block), int(shared), None, None, 0)
    err = libcuda().cuOccupancyMaxActiveClusters(ctypes.byref(count), _vp(function), ctypes.byref(config))
    if err:
        raise DriverError(f"cuOccupancyMaxActiveClusters (clusters of {cluster} blocks of {tuple(block)} threads, "
                          f"{shared} bytes of shared memory): {error_name(err)}")
    return count.value


# A kernel parameter's kind: 32- or 64-bit int, 32-bit float, 64-bit pointer, or a 128-byte tensor map
# passed by value (read where the encoder left it, never copied).
I32, I64, F32, PTR, MAP = "i32", "i64", "f32", "ptr", "map"
_CTYPE = {I32: ctypes.c_int32, I64: ctypes.c_int64, F32: ctypes.c_float, PTR: ctypes.c_uint64}


class PackedLaunch:
    """One kernel's launch with its parameter block built once: `values[i]` holds parameter i
    (ctypes scalars: set `.value`), `point_map(i, address)` (or `params[i] = address`) makes a
    tensor-map parameter read the 128 bytes at `address`, and `launch(stream)` is one
    cuLaunchKernel - or, for a kernel launched in clusters of a shape chosen at launch (`cluster`,
    blocks along x, y, z), one cuLaunchKernelEx with its configuration built once."""

    def __init__(self, function: int, grid: Sequence[int], block: Sequence[int], shared: int, kinds: Sequence[str],
                 device: int = 0, cluster: Sequence[int] | None = None):
        self.function, self.device = _vp(function), device
        self.grid, self.block, self.shared = tuple(grid), tuple(block), int(shared)
        self.cluster = tuple(cluster) if cluster is not None and tuple(cluster) != (1, 1, 1) else None
        self.kinds = tuple(kinds)
        self.values = [(_CTYPE[k]() if k != MAP else None) for k in self.kinds]
        self.params = (_vp * len(self.kinds))()
        for i, v in enumerate(self.values):
            if v is not None:
                self.params[i] = ctypes.addressof(v)
        # Every argument made a ctypes object once and bound: a launch converts nothing. `bound()` is
        # the driver call itself, on the stream in `stream_value` (a caller's hot path may use both).
        self.stream_value = _vp(0)
        if self.cluster is None:
            self.bound = partial(libcuda().cuLaunchKernel, self.function, *(_u32(x) for x in (*self.grid, *self.block)),
                                 _u32(self.shared), self.stream_value, self.params, None)
        else:
            self.bound = self._cluster_launch()

    def _cluster_launch(self):
        """cuLaunchKernelEx with the cluster shape as a launch attribute: the configuration (grid,
        block, shared bytes, attribute) built once; a call sets its stream. Clusters over 8 blocks
        (Hopper's non-portable sizes) are allowed on the function first."""
        lib = libcuda()
        if self.cluster[0] * self.cluster[1] * self.cluster[2] > PORTABLE_CLUSTER:
            err = lib.cuFuncSetAttribute(self.function, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)
            if err:
                raise DriverError(f"clusters of {self.cluster} blocks: cuFuncSetAttribute failed: {error_name(err)}")
        attr = _LaunchAttribute(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
        attr.value[0], attr.value[1], attr.value[2] = self.cluster
        config = _LaunchConfig((_u32 * 3)(*self.grid), (_u32 * 3)(*self.block), self.shared, None,
                               ctypes.pointer(attr), 1)
        self._config, self._attr = config, attr  # (kept alive with the launch)
        launch_ex, function, params, stream = lib.cuLaunchKernelEx, self.function, self.params, self.stream_value
        config_ref = ctypes.byref(config)

        def bound() -> int:
            config.stream = stream.value
            return launch_ex(config_ref, function, params, None)

        return bound

    def clone(self) -> "PackedLaunch":
        """The same launch with its own parameter block (values copied): one that is set once and
        kept, beside this one that every call rewrites."""
        twin = PackedLaunch(self.function.value, self.grid, self.block, self.shared, self.kinds, self.device,
                            self.cluster)
        for i, (mine, theirs) in enumerate(zip(self.values, twin.values)):
            if mine is not None:
                theirs.value = mine.value
            else:  # (a tensor map: the same 128 bytes)
                twin.params[i] = self.params[i]
        return twin

    def point_map(self, index: int, address: int) -> None:
        self.params[index] = address

    def launch(self, stream: int) -> None:
        self.stream_value.value = stream
        err = self.bound()
        if err:
            self.failed(err)

    def failed(self, err: int) -> None:
        """After a launch returned `err`: retry in a thread that had no CUDA context yet (binding the
        kernel's device), else raise - ContextMismatch where another device is current."""
        if err == CUDA_ERROR_INVALID_CONTEXT:
            import cupy

            cupy.cuda.runtime.setDevice(self.device)
            err = self.bound()
            if not err:
                return
        if err == CUDA_ERROR_INVALID_HANDLE:
            raise ContextMismatch(f"the kernel was loaded on GPU {self.device}, which is not the current device")
        cluster = f", clusters of {self.cluster}" if self.cluster else ""
        raise DriverError(f"cuLaunchKernel (grid {self.grid}, block {self.block}, {self.shared} bytes of shared "
                          f"memory{cluster}) failed: {error_name(err)}")


# cuTensorMapEncodeTiled's enum values (cuda.h; checked against cuda.bindings in the tests)
TMA_INTERLEAVE_NONE, TMA_L2_256B, TMA_OOB_ZERO = 0, 3, 0
_UNLEARNED = object()
_ALL_BITS = (1 << 64) - 1


def _map_storage() -> tuple[ctypes.Array, int]:
    """Room for one 128-byte tensor map on a 64-byte boundary (as the driver wants it): the storage
    to keep alive, and the map's address in it."""
    raw = (ctypes.c_uint8 * 192)()
    return raw, ctypes.addressof(raw) + (-ctypes.addressof(raw) % 64)


class TensorMapEncoder:
    """Encodes tensor maps of one shape, stride and box over any base address: the argument
    arrays are built once, so an encoding is one driver call. Maps are kept per address (a
    caller's allocator hands the same few buffers back again and again); each is 128 bytes,
    64-byte aligned, and stays where it is while kept, so a launch can point at it."""

    KEEP = 64  # maps kept per encoder before the oldest are dropped

    def __init__(self, type_code: int, dims: Sequence[int], strides: Sequence[int], box: Sequence[int], swizzle: int):
        rank = len(dims)
        self._args = (_int(type_code), _u32(rank), (_u64 * rank)(*dims), (_u64 * (rank - 1))(*strides),
                      (_u32 * rank)(*box), (_u32 * rank)(*([1] * rank)), _int(TMA_INTERLEAVE_NONE), _int(swizzle),
                      _int(TMA_L2_256B), _int(TMA_OOB_ZERO))
        self.describe = f"dims {tuple(dims)}, byte strides {tuple(strides)}, box {tuple(box)}"
        self._maps: dict[int, ctypes.Array] = {}  # buffer address -> its map's storage
        self.addresses: dict[int, int] = {}  # buffer address -> its map's host address (a hot path reads this)
        self._encode = libcuda().cuTensorMapEncodeTiled
        self._field = _UNLEARNED  # where the maps hold the address (slot(): learned once)

    def address(self, ptr: int) -> int:
        """The host address of the 128-byte map over the buffer at `ptr` (encoded on first use)."""
        kept = self.addresses.get(ptr)
        if kept is not None:
            return kept
        if len(self._maps) >= self.KEEP:  # (dicts keep insertion order: drop the oldest half)
            for key in list(self._maps)[: self.KEEP // 2]:
                del self._maps[key], self.addresses[key]
        raw, addr = _map_storage()
        t, rank, dims, strides, box, ones, interleave, swizzle, l2, oob = self._args
        err = self._encode(addr, t, rank, ptr, dims, strides, box, ones, interleave, swizzle, l2, oob)
        if err:
            raise DriverError(f"cuTensorMapEncodeTiled ({self.describe}, address {ptr:#x}) failed: {error_name(err)}")
        self._maps[ptr], self.addresses[ptr] = raw, addr
        return addr

    def keep(self, ptr: int) -> tuple[int, ctypes.Array]:
        """The map over `ptr` and its storage, for a holder that outlives this encoder's eviction of
        old maps (a bound launch keeps the storage while it points at it)."""
        addr = self.address(ptr)
        return addr, self._maps[ptr]

    def encode(self, ptr: int) -> bytes:
        """The map's 128 bytes (for a copy into device memory, as rungs 4-5 and conv2d take them)."""
        return ctypes.string_at(self.address(ptr), 128)

    def _fresh(self, ptr: int) -> bytes | None:
        """The driver's encoding over `ptr`, uncached (None where it refuses the address)."""
        raw, addr = _map_storage()
        if self._encode(addr, *self._args[:2], ptr, *self._args[2:]):
            return None
        return ctypes.string_at(addr, 128)

    def slot(self, ptr: int) -> "MapSlot | None":
        """A map over `ptr` in storage of its own that one 64-bit write re-points at any other
        buffer (MapSlot), where the driver's own encodings show where the address lies
        (learn_address_field, once per encoder); None where they do not."""
        if self._field is _UNLEARNED:
            self._field = learn_address_field(self._fresh, ptr)
        template = self._fresh(ptr) if self._field is not None else None
        return MapSlot(template, self._field) if template is not None else None


@dataclass(frozen=True)
class AddressField:
    """Where a tensor map holds its buffer's address: bits 4..top-1 of the address (TMA needs 16-
    byte alignment, so bits 0-3 are zero) stored as plain bits of one 64-bit word, from `shift`.
    Addresses with bits outside 4..top-1 (`outside`) must be encoded by the driver."""

    word: int
    shift: int
    top: int

    @property
    def mask(self) -> int:
        return ((1 << (self.top - 4)) - 1) << self.shift

    @property
    def outside(self) -> int:
        return (_ALL_BITS ^ ((1 << self.top) - 1)) | 15

    def place(self, template: bytes, ptr: int) -> bytes:
        """`template` (a map over any address) re-pointed at `ptr`."""
        at = 8 * self.word
        word = int.from_bytes(template[at:at + 8], "little") & ~self.mask | (ptr >> 4) << self.shift
        return template[:at] + word.to_bytes(8, "little") + template[at + 8:]


def learn_address_field(encode: Callable[[int], bytes | None], ptr: int, probes: int = 8) -> AddressField | None:
    """Where the driver's encoding keeps the address, learned from the driver itself: the map over
    `ptr` and over `ptr` with each address bit flipped in turn (from bit 4 up, until the driver
    refuses an address or ignores the bit) must differ in exactly one bit each, those bits consecutive within one
    64-bit word; then maps placed by that rule must equal the driver's at `probes` addresses whose
    bits are all mixed. Anything else (a checksum, a split or scrambled field, a format that
    changes) answers None, and the caller encodes every address. The CUtensorMap layout is not
    documented, so the rule is never assumed - it is read from, and checked against, the driver
    in use (about 60 encodings once)."""
    if ptr & 15 or ptr <= 0:
        return None
    base = encode(ptr)
    if base is None:
        return None
    b0 = int.from_bytes(base, "little")
    positions = []
    for bit in range(4, 64):
        got = encode(ptr ^ (1 << bit))
        diff = b0 ^ int.from_bytes(got, "little") if got is not None else 0
        if not diff:  # (refused, or a bit the map does not keep: addresses from here up are encoded)
            break
        if diff & (diff - 1):
            return None
        positions.append(diff.bit_length() - 1)
    top = 4 + len(positions)
    if top < 40 or ptr >> top:  # (an address space this small is not one we can trust a rule over)
        return None
    first = positions[0]
    if positions != list(range(first, first + len(positions))) or first // 64 != positions[-1] // 64:
        return None
    field = AddressField(first // 64, first % 64, top)
    span = (1 << (top - 4)) - 1
    for i in range(probes):  # (a fixed scramble of every bit: alternating patterns and odd multipliers)
        q = (((0x9E3779B97F4A7C15 * (i + 1)) ^ (0x5555555555555555 if i % 2 else 0xAAAAAAAAAAAAAAAA)) & span) << 4
        got = encode(q or 16)
        if got is None or field.place(base, q or 16) != got:
            return None
    return field


class MapSlot:
    """A tensor map in storage of its own (128 bytes, 64-byte aligned, at `address`) that a launch
    re-points at a buffer by one write: `word.value = base | (ptr >> 4) << shift`. A kernel's
    parameters are copied when it is launched (or captured), so the next call may re-point the
    same slot at once. `outside`: address bits the rule cannot place (the caller encodes those)."""

    def __init__(self, template: bytes, field: AddressField):
        self._raw, self.address = _map_storage()
        ctypes.memmove(self.address, template, 128)
        self.word = ctypes.c_uint64.from_address(self.address + 8 * field.word)
        self.base = self.word.value & ~field.mask & _ALL_BITS
        self.shift, self.outside = field.shift, field.outside

    @classmethod
    def fixed(cls, address: int) -> "MapSlot":
        """A map parameter the kernel never reads, at `address`: re-pointing it writes a word
        of the slot's own that nothing reads, and any address is fine."""
        slot = cls.__new__(cls)
        slot._raw, slot.address, slot.word = None, address, ctypes.c_uint64()
        slot.base, slot.shift, slot.outside = 0, 0, 0
        return slot
