"""Timing on the GPU: CUDA events around each launch, warm-up first, L2
flushed before every repetition, median and spread of many repetitions.

The repetition count adapts to the kernel: enough runs to fill `target_ms`
of measured time, at least `min_reps` and at most `max_reps`, so a 20 us
kernel gets many samples and a 2 s naive kernel does not eat the lease.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable

__all__ = ["Timing", "time_gpu", "flush_l2"]


@dataclass(frozen=True)
class Timing:
    median_ms: float
    min_ms: float
    p20_ms: float
    p80_ms: float
    reps: int

    @property
    def spread(self) -> float:
        """Inter-quintile range relative to the median: the noise a comparison must beat."""
        return (self.p80_ms - self.p20_ms) / self.median_ms if self.median_ms > 0 else 0.0

    def as_dict(self) -> dict:
        return {"median_ms": self.median_ms, "min_ms": self.min_ms, "p20_ms": self.p20_ms,
                "p80_ms": self.p80_ms, "reps": self.reps, "spread": self.spread}


_FLUSH = {}


def flush_l2() -> None:
    """Overwrite a buffer twice the L2 size so no input survives in cache between repetitions."""
    import cupy

    from .device import device_info

    dev = device_info().index
    buf = _FLUSH.get(dev)
    if buf is None:
        size = max(2 * device_info().l2_bytes, 8 << 20)
        buf = _FLUSH[dev] = cupy.empty(size // 4, dtype=cupy.int32)
    buf.fill(dev + 1)


def _quantile(sorted_xs: list[float], q: float) -> float:
    if len(sorted_xs) == 1:
        return sorted_xs[0]
    pos = q * (len(sorted_xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def time_gpu(fn: Callable[[], None], *, warmup: int = 2, min_reps: int = 5, max_reps: int = 200,
             target_ms: float = 400.0, flush: bool = True) -> Timing:
    """Time `fn` (which only enqueues GPU work on the current stream)."""
    import math

    import cupy

    if not (isinstance(target_ms, (int, float)) and math.isfinite(target_ms) and target_ms > 0):
        raise ValueError(f"target_ms={target_ms!r}: give a positive number of milliseconds to spend timing")
    if not (warmup >= 0 and 1 <= min_reps <= max_reps):
        raise ValueError(f"warmup={warmup}, min_reps={min_reps}, max_reps={max_reps}: need warmup >= 0 and "
                         "1 <= min_reps <= max_reps")

    stream = cupy.cuda.get_current_stream()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    # First call outside the measurement: module load, autotuning, handle creation.
    fn()
    start.record(stream)
    fn()
    end.record(stream)
    end.synchronize()
    estimate = max(cupy.cuda.get_elapsed_time(start, end), 1e-3)
    for _ in range(max(warmup - 1, 0)):
        if estimate * warmup > target_ms:
            break
        fn()
    floor = 3 if estimate > 500.0 else min_reps  # a half-second kernel: three samples, not a minute
    reps = int(min(max(target_ms / estimate, floor), max_reps))
    pairs = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(reps)]
    for s, e in pairs:
        if flush:
            flush_l2()
        s.record(stream)
        fn()
        e.record(stream)
    pairs[-1][1].synchronize()
    times = sorted(cupy.cuda.get_elapsed_time(s, e) for s, e in pairs)
    return Timing(statistics.median(times), times[0], _quantile(times, 0.2), _quantile(times, 0.8), reps)
