"""The GPU this process sees: presence, architecture and the properties that
matter for kernels. Everything here degrades to a clear `NoGpuError` on a
machine with no GPU or driver."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import cache

from .hw.arch import Arch

__all__ = ["NoGpuError", "gpu_count", "require_gpu", "current_arch", "DeviceInfo", "device_info"]

NO_GPU_HINT = "static reports still work here: `simtlab compile FAMILY --arch sm_90`"  # (the command line's words)


class NoGpuError(RuntimeError):
    """No CUDA GPU (or no driver) is visible to this process."""


@cache
def _probe() -> tuple[int, str]:
    import ctypes

    try:  # (asked first: without a driver the runtime's answer is "driver version is insufficient")
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0, "no NVIDIA driver is installed (libcuda.so.1 not found)"
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount(), ""
    except Exception as exc:  # an old driver, CUDA_VISIBLE_DEVICES="" ...
        return 0, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def gpu_count() -> int:
    return _probe()[0]


def require_gpu() -> None:
    count, why = _probe()
    if count == 0:
        detail = f" ({why})" if why else ""
        raise NoGpuError(f"no CUDA GPU is visible on this machine{detail}")


@dataclass(frozen=True)
class DeviceInfo:
    index: int
    name: str
    compute_capability: tuple[int, int]
    sms: int
    regs_per_sm: int
    regs_per_block: int
    smem_per_sm: int
    smem_per_block: int
    smem_per_block_optin: int
    smem_reserved_per_block: int
    max_threads_per_sm: int
    max_threads_per_block: int
    max_blocks_per_sm: int
    l2_bytes: int
    memory_bytes: int
    memory_bus_bits: int
    sm_clock_mhz: int  # maximum (boost) clock
    memory_clock_mhz: int
    driver_version: int
    runtime_version: int

    @property
    def arch(self) -> Arch:
        return Arch.of(self.compute_capability)

    @property
    def datasheet_bandwidth_gbs(self) -> float:
        """2 transfers per memory clock x bus width (HBM/GDDR double data rate)."""
        return 2 * self.memory_clock_mhz * 1e6 * self.memory_bus_bits / 8 / 1e9

    @property
    def fp32_lanes_per_sm(self) -> int:
        return {(7, 0): 64, (7, 5): 64, (8, 0): 64}.get(self.compute_capability, 128)

    @property
    def peak_fp32_tflops(self) -> float:
        return self.sms * self.fp32_lanes_per_sm * 2 * self.sm_clock_mhz * 1e6 / 1e12

    def as_dict(self) -> dict:
        d = asdict(self)
        d.update(arch=self.arch, datasheet_bandwidth_gbs=round(self.datasheet_bandwidth_gbs, 1),
                 peak_fp32_tflops=round(self.peak_fp32_tflops, 1))
        return d


# cudaDeviceAttr values (stable across CUDA versions; the clock fields left cudaDeviceProp in CUDA 13).
_ATTR_CLOCK_RATE = 13
_ATTR_MEMORY_CLOCK_RATE = 36


@cache
def device_info(index: int | None = None) -> DeviceInfo:
    require_gpu()
    import cupy

    rt = cupy.cuda.runtime
    idx = cupy.cuda.Device().id if index is None else index
    p = rt.getDeviceProperties(idx)

    def attr(code: int, fallback_key: str) -> int:
        try:
            return int(rt.deviceGetAttribute(code, idx))
        except Exception:
            return int(p.get(fallback_key, 0))

    name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
    return DeviceInfo(
        index=idx,
        name=name,
        compute_capability=(int(p["major"]), int(p["minor"])),
        sms=int(p["multiProcessorCount"]),
        regs_per_sm=int(p["regsPerMultiprocessor"]),
        regs_per_block=int(p["regsPerBlock"]),
        smem_per_sm=int(p["sharedMemPerMultiprocessor"]),
        smem_per_block=int(p["sharedMemPerBlock"]),
        smem_per_block_optin=int(p.get("sharedMemPerBlockOptin", p["sharedMemPerBlock"])),
        smem_reserved_per_block=int(p.get("reservedSharedMemPerBlock", 0)),
        max_threads_per_sm=int(p["maxThreadsPerMultiProcessor"]),
        max_threads_per_block=int(p["maxThreadsPerBlock"]),
        max_blocks_per_sm=int(p.get("maxBlocksPerMultiProcessor", 0)),
        l2_bytes=int(p["l2CacheSize"]),
        memory_bytes=int(p["totalGlobalMem"]),
        memory_bus_bits=int(p["memoryBusWidth"]),
        sm_clock_mhz=attr(_ATTR_CLOCK_RATE, "clockRate") // 1000,
        memory_clock_mhz=attr(_ATTR_MEMORY_CLOCK_RATE, "memoryClockRate") // 1000,
        driver_version=int(rt.driverGetVersion()),
        runtime_version=int(rt.runtimeGetVersion()),
    )


def current_arch() -> Arch:
    return device_info().arch


def current_sm_clock_mhz() -> int | None:
    """The SM clock right now (NVML), or None where NVML is unavailable."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(device_info().index)
        return int(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
    except Exception:
        return None
