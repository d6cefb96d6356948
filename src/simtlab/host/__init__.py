"""Beyond one kernel: host-device transfers and stream overlap, launch overhead and CUDA graphs."""

from __future__ import annotations

import statistics
import time
from functools import lru_cache

KERNEL_FILES = ("host/pipeline_work.cu", "host/chain_step.cu")


@lru_cache(maxsize=None)
def function(path: str, name: str):
    """A plain (extern "C") kernel of a host-experiment .cu file, compiled for this GPU and loaded."""
    import cupy

    from ..compile import compile_file
    from ..device import device_info

    cubin = compile_file(path, arch=device_info().arch)
    return cupy.RawModule(path=str(cubin.path)).get_function(name)


def wall_ms(fn, reps: int, sync=None) -> float:
    """Median wall-clock milliseconds of `fn` followed by `sync` (default: the whole device), after
    one untimed call: for work spread over several streams, or where the launch path itself is what
    is measured."""
    if sync is None:
        import cupy

        sync = cupy.cuda.Device().synchronize
    fn()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)
