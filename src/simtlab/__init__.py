"""simtlab: compile hand-written CUDA kernels from Python, prove them correct,
time them honestly, explain and tune them."""

from .compile import CompileError, compile_file, compile_source
from .kernel import Kernel
from .version import __version__


_LAZY = ("gemm", "gemm_tc", "gemm_plan", "gemm_tc_plan")  # simtlab.api's, imported on first use


def __getattr__(name: str):
    """`simtlab.gemm`, `gemm_tc`, `gemm_plan`, `gemm_tc_plan` (see simtlab.api), imported on first
    use so `import simtlab` needs no GPU libraries, then bound here so later calls go straight to them."""
    if name in _LAZY:
        from . import api

        value = globals()[name] = getattr(api, name)
        return value
    raise AttributeError(f"module 'simtlab' has no attribute {name!r}")


__all__ = ["__version__", "CompileError", "Kernel", "compile_file", "compile_source", "gemm", "gemm_tc", "gemm_plan",
           "gemm_tc_plan"]
