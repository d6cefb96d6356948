"""simtlab: compile hand-written CUDA kernels from Python, prove them correct,
time them honestly, explain and tune them."""

__version__ = "0.1.0"

from .compile import CompileError, compile_file, compile_source  # noqa: E402
from .kernel import Kernel  # noqa: E402


def gemm(*args, **kwargs):
    """See `simtlab.api.gemm` (imported lazily so `import simtlab` needs no GPU libraries)."""
    from .api import gemm as _gemm

    return _gemm(*args, **kwargs)


def gemm_tc(*args, **kwargs):
    """See `simtlab.api.gemm_tc`: fp16 / bf16 GEMM on the tensor cores (imported lazily)."""
    from .api import gemm_tc as _gemm_tc

    return _gemm_tc(*args, **kwargs)


__all__ = ["__version__", "CompileError", "Kernel", "compile_file", "compile_source", "gemm", "gemm_tc"]
