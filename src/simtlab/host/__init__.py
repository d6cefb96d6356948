"""Beyond one kernel: host-device transfers and stream overlap, launch overhead and CUDA graphs."""

from __future__ import annotations

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
