"""simtlab: compile hand-written CUDA kernels from Python, prove them correct,
time them honestly, explain and tune them."""

from .version import __version__

# what each public name is imported from on first use: `import simtlab` then needs no GPU library
# and takes milliseconds (the command line's start, where Ctrl-C must stay one line)
_LAZY = {"gemm": "api", "gemm_tc": "api", "gemm_plan": "api", "gemm_tc_plan": "api", "Kernel": "kernel",
         "CompileError": "compile", "compile_file": "compile", "compile_source": "compile",
         "softmax": "functional", "log_softmax": "functional", "layer_norm": "functional", "rms_norm": "functional",
         "sum": "functional", "amax": "functional", "cumsum": "functional",
         "transpose": "functional", "sort": "functional", "argsort": "functional",
         "attention": "functional", "attention_backward": "functional", "spmv": "functional",
         "stencil": "functional", "conv2d": "functional", "spmv_plan": "sparse", "SpmvPlan": "sparse"}


def __getattr__(name: str):
    """The public names (simtlab.api's calls, Kernel, the compile functions), imported on first use,
    then bound here so later lookups go straight to them."""
    if name in _LAZY:
        import importlib

        value = globals()[name] = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        return value
    raise AttributeError(f"module 'simtlab' has no attribute {name!r}")


__all__ = ["__version__", "CompileError", "Kernel", "compile_file", "compile_source", "gemm", "gemm_tc", "gemm_plan",
           "gemm_tc_plan", "softmax", "log_softmax", "layer_norm", "rms_norm", "sum", "amax", "cumsum", "transpose",
           "sort", "argsort", "attention", "attention_backward", "spmv", "spmv_plan", "SpmvPlan", "stencil", "conv2d"]
