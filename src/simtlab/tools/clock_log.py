"""The SM clock and board power, sampled through NVML while kernels are timed.

Two kernels at the same speed per clock can differ in time by the clock the card picks under its
power limit; a table that shows the clock and the power beside each time says which it was.

    with ClockLog() as log:
        t0 = time.time(); ...time something...; t1 = time.time()
        log.summary(t0, t1)  # {"sm_mhz": 1545.0, "watts": 690.2, "power_capped": 1.0, "samples": 18}

Where NVML is missing (no driver, no nvidia-ml-py) the log stays empty and the summaries say so.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass

__all__ = ["Sample", "ClockLog", "sustained"]

SUSTAINED_MS = 200.0  # GPU time a timing must add up to for the power and clock sampled over it to be its own


def sustained(reps: int | None, median_ms: float | None) -> bool:
    """Whether a timing kept the GPU busy long enough for the power and clock sampled over it to be
    the kernel's: 200 repetitions of a 0.2 ms kernel are 40 ms of work in a window mostly spent idle
    (between repetitions, verifying, compiling), whose mean power says little and whose clock
    samples read the idle boost clock. Tables show neither for such a timing."""
    return bool(reps and median_ms and reps * median_ms >= SUSTAINED_MS)


_SW_POWER_CAP = 0x4  # nvmlClocksEventReasonSwPowerCap


@dataclass(frozen=True)
class Sample:
    time: float  # time.time() when taken
    sm_mhz: int
    watts: float
    power_capped: bool  # the driver held the clock down to stay within the power limit


_VALUE_FIELDS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


def _power_reader(pynvml, handle):
    """("instant", read) where NVML has the instantaneous power field, else ("1 s average", read):
    the average lags a kernel timed for less than a second (it reads the idle before it)."""
    try:
        field = pynvml.NVML_FI_DEV_POWER_INSTANT

        def instant() -> float:
            v = pynvml.nvmlDeviceGetFieldValues(handle, [field])[0]
            if v.nvmlReturn != 0:
                raise RuntimeError(f"NVML field {field}: return {v.nvmlReturn}")
            return getattr(v.value, _VALUE_FIELDS[v.valueType]) / 1e3

        instant()
        return "instant", instant
    except Exception:
        return "1 s average", lambda: pynvml.nvmlDeviceGetPowerUsage(handle) / 1e3


def _nvml_handle(pynvml):
    """The NVML device of the current CUDA device (matched by PCI bus id: the two numberings
    differ under CUDA_VISIBLE_DEVICES)."""
    import cupy

    return pynvml.nvmlDeviceGetHandleByPciBusId(cupy.cuda.Device().pci_bus_id)


class ClockLog:
    """Samples every `period_ms` in a background thread for the life of the block."""

    def __init__(self, period_ms: float = 20.0):
        self.period_s = period_ms / 1e3
        self.samples: list[Sample] = []
        self.unavailable: str | None = None  # why nothing is sampled
        self.power_source: str | None = None  # "instant" or "1 s average"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> ClockLog:
        try:
            import pynvml

            pynvml.nvmlInit()
        except Exception as exc:  # no NVML: the timings stand without clocks
            self.unavailable = f"{type(exc).__name__}: {exc}"
            return self
        try:
            handle = _nvml_handle(pynvml)
        except Exception as exc:  # no CUDA device to match
            self.unavailable = f"{type(exc).__name__}: {exc}"
            pynvml.nvmlShutdown()
            return self
        self.power_source, power = _power_reader(pynvml, handle)
        self._thread = threading.Thread(target=self._sample, args=(pynvml, handle, power), daemon=True)
        self._thread.start()
        return self

    def _sample(self, pynvml, handle, power) -> None:
        try:
            while True:
                mhz = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
                watts = power()
                reasons = pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle)
                self.samples.append(Sample(time.time(), int(mhz), watts, bool(reasons & _SW_POWER_CAP)))
                if self._stop.wait(self.period_s):
                    return
        except Exception as exc:
            self.unavailable = f"{type(exc).__name__}: {exc}"
        finally:
            pynvml.nvmlShutdown()

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=5)

    def summary(self, start: float, end: float) -> dict:
        """Median SM clock, mean power and the share of power-capped samples between `start`
        and `end` (time.time() values), widened by one sampling period each side so that a
        timing shorter than the period still gets the samples next to it."""
        lo, hi = start - self.period_s, end + self.period_s
        inside = [s for s in list(self.samples) if lo <= s.time <= hi]
        if not inside:
            return {"sm_mhz": None, "watts": None, "power_capped": None, "samples": 0}
        return {"sm_mhz": statistics.median(s.sm_mhz for s in inside),
                "watts": round(statistics.fmean(s.watts for s in inside), 1),
                "power_capped": round(sum(s.power_capped for s in inside) / len(inside), 2),
                "samples": len(inside)}
