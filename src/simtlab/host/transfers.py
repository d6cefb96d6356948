"""Host <-> device copies: pageable against pinned bandwidth, and a chunked pipeline that overlaps
host-to-device copies, a kernel and device-to-host copies on several streams against the same work
done serially. Copies are timed with CUDA events; the multi-stream pipeline by wall clock around a
full synchronisation (it spans several streams), median of REPS runs."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field

import numpy as np

from . import function, wall_ms

WORK = ("host/pipeline_work.cu", "pipeline_work")


@dataclass
class Measured:
    name: str
    ms: float
    gbs: float | None = None
    note: str = ""
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def _events_ms(fn, reps: int) -> float:
    import cupy

    stream = cupy.cuda.get_current_stream()
    fn()  # warm-up: first-touch, driver staging buffers
    times = []
    for _ in range(reps):
        a, b = cupy.cuda.Event(), cupy.cuda.Event()
        a.record(stream)
        fn()
        b.record(stream)
        b.synchronize()
        times.append(cupy.cuda.get_elapsed_time(a, b))
    return statistics.median(times)


def copy_bandwidth(nbytes: int, reps: int = 10) -> list[Measured]:
    """H2D and D2H of `nbytes` from pageable (NumPy) and from pinned (page-locked) host memory."""
    import cupy
    import cupyx

    n = nbytes // 4
    pageable = np.random.default_rng(0).random(n, dtype=np.float32)  # written: every page is resident
    pinned = cupyx.empty_pinned((n,), np.float32)
    pinned[...] = pageable
    dev = cupy.empty(n, np.float32)
    rows = []
    for name, fn in (("H2D pageable", lambda: dev.set(pageable)), ("H2D pinned", lambda: dev.set(pinned)),
                     ("D2H pageable", lambda: dev.get(out=pageable)), ("D2H pinned", lambda: dev.get(out=pinned))):
        ms = _events_ms(fn, reps)
        rows.append(Measured(name, ms, nbytes / (ms * 1e-3) / 1e9))
    if not np.array_equal(pageable, pinned):
        raise AssertionError("the copies disagree: pageable and pinned round trips differ")
    return rows


def _grid(n: int) -> tuple[int, int, int]:
    from ..device import device_info

    return (max(1, min(-(-n // 256), device_info().sms * 8)), 1, 1)


def _launch_work(x, y, n: int, iters: int) -> None:
    fn = function(*WORK)
    fn(_grid(n), (256, 1, 1), (x, y, np.int64(n), np.int32(iters)))


def reference(x: np.ndarray, iters: int) -> np.ndarray:
    """float64 value of the kernel's recurrence acc = 0.999 acc + x, acc0 = x."""
    v = x.astype(np.float64)
    acc = v.copy()
    for _ in range(iters):
        acc = acc * np.float64(np.float32(0.999)) + v
    return acc


def calibrate_iters(n: int, target_ms: float) -> int:
    """FMAs per element that make the kernel take about `target_ms` on the whole array (measured at
    a chain long enough to be compute-bound, where time grows linearly with it)."""
    import cupy

    x, y = cupy.ones(n, np.float32), cupy.empty(n, np.float32)
    probe = 2048
    ms = _events_ms(lambda: _launch_work(x, y, n, probe), 3)
    return int(max(1, min(100000, round(probe * target_ms / max(ms, 1e-3)))))


def _copy_async(dst: int, src: int, nbytes: int, kind: int, stream) -> None:
    """cudaMemcpyAsync on raw pointers: truly asynchronous from pinned memory, whatever the array
    wrapper would decide for a slice of it."""
    import cupy

    cupy.cuda.runtime.memcpyAsync(dst, src, nbytes, kind, stream.ptr)


def pipeline(nbytes: int, chunks: int = 8, streams: int = 4, iters: int | None = None, reps: int = 5) -> dict:
    """Serial (copy in, compute, copy out on one stream) against `chunks` chunks spread round-robin
    over `streams` streams. Returns the measured stages, both schedules and the share of the shorter
    of copy and compute that the overlap hid; raises if the two schedules' outputs differ."""
    import cupy
    import cupyx

    if chunks < 1 or streams < 1:
        raise ValueError(f"chunks and streams must be >= 1, got {chunks} and {streams}")
    n = nbytes // 4
    if n < chunks:
        raise ValueError(f"{nbytes} bytes cannot be cut into {chunks} chunks")
    rng = np.random.default_rng(1)
    x_host = cupyx.empty_pinned((n,), np.float32)
    x_host[...] = rng.random(n, dtype=np.float32)
    y_host = cupyx.empty_pinned((n,), np.float32)
    x_dev, y_dev = cupy.empty(n, np.float32), cupy.empty(n, np.float32)
    h2d = _events_ms(lambda: x_dev.set(x_host), reps)
    d2h = _events_ms(lambda: y_dev.get(out=y_host), reps)
    if iters is None:
        iters = calibrate_iters(n, h2d)
    compute = _events_ms(lambda: _launch_work(x_dev, y_dev, n, iters), reps)
    s0 = cupy.cuda.Stream(non_blocking=True)
    pool = [cupy.cuda.Stream(non_blocking=True) for _ in range(streams)]
    bounds = np.linspace(0, n, chunks + 1).astype(np.int64)

    h2d_kind, d2h_kind = cupy.cuda.runtime.memcpyHostToDevice, cupy.cuda.runtime.memcpyDeviceToHost
    xh, yh = x_host.ctypes.data, y_host.ctypes.data

    def stage(a: int, b: int, stream) -> None:  # copy in, compute, copy out elements [a, b) on one stream
        off, size = 4 * a, 4 * (b - a)
        _copy_async(x_dev.data.ptr + off, xh + off, size, h2d_kind, stream)
        with stream:
            _launch_work(x_dev[a:b], y_dev[a:b], b - a, iters)
        _copy_async(yh + off, y_dev.data.ptr + off, size, d2h_kind, stream)

    def serial():
        stage(0, n, s0)

    def overlapped():
        for c in range(chunks):
            stage(int(bounds[c]), int(bounds[c + 1]), pool[c % streams])

    t_serial = wall_ms(serial, reps)
    y_serial = np.array(y_host)
    y_host[...] = np.nan
    t_overlap = wall_ms(overlapped, reps)
    if not np.array_equal(y_serial, y_host):
        raise AssertionError("the overlapped pipeline's output differs from the serial one")
    sample = np.random.default_rng(2).integers(0, n, 1000)
    ref = reference(np.asarray(x_host)[sample], iters)
    err = float(np.linalg.norm(y_serial[sample] - ref) / np.linalg.norm(ref))
    if not err < 1e-3:  # ~iters roundings, damped by the 0.999 contraction
        raise AssertionError(f"pipeline output off the float64 recurrence: relative error {err:.2e}")
    copy = h2d + d2h
    hidden = t_serial - t_overlap
    return {"bytes": nbytes, "chunks": chunks, "streams": streams, "iters": iters, "h2d_ms": h2d, "d2h_ms": d2h,
            "compute_ms": compute, "serial_ms": t_serial, "overlapped_ms": t_overlap, "hidden_ms": hidden,
            "hidden_share": hidden / min(copy, compute), "speedup": t_serial / t_overlap, "rel_error": err}
