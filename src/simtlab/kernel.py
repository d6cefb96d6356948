"""Your own kernel in three lines:

    k = simtlab.Kernel("saxpy.cu", "saxpy", grid=lambda x, y, a, n: (-(-int(n) // 256),), block=(256,))
    k.verify(lambda x, y, a, n: a * x + y, x, y, a, n, outputs=[1])   # fresh-from-you inputs, poisoned output
    k.time(x, y, a, n); k.explain()

The source is a path to a .cu file or CUDA C++ text; `template_args` instantiate a
template. Arguments are CuPy arrays, PyTorch CUDA tensors (zero-copy) or scalars;
everything a caller can get wrong is reported in terms of the kernel: argument
count, host or non-contiguous arrays, block too large, shared memory over the limit.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from .hw.occupancy import SMEM_WITHOUT_OPT_IN
from .hw.resources import KernelResources, param_sizes_from_cubin
from .compile import COMMENTS, Cubin, compile_source, normalise_arch
from .launch import Launch, check_launch

__all__ = ["Kernel"]

Geometry = Callable[..., "tuple | int"]


MAX_BLOCK_THREADS = 1024  # every architecture simtlab builds for


def _dim3(v, what: str = "a launch dimension") -> tuple[int, int, int]:
    """(x, y, z) of a grid or block given as an int or 1-3 ints, each >= 1, or a clear error."""
    parts = (v,) if isinstance(v, (int, np.integer)) else v
    if isinstance(parts, (str, bytes)) or not isinstance(parts, (tuple, list)):
        raise TypeError(f"{what} is an int or 1 to 3 ints, got {v!r}")
    if not 1 <= len(parts) <= 3 or any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) for x in parts):
        raise TypeError(f"{what} is an int or 1 to 3 ints, got {v!r}")
    if any(x < 1 for x in parts):
        raise ValueError(f"{what} must be at least 1 in every dimension, got {v!r}")
    return tuple(int(x) for x in parts) + (1,) * (3 - len(parts))


def _block(v) -> tuple[int, int, int]:
    b = _dim3(v, "block")
    if b[0] * b[1] * b[2] > MAX_BLOCK_THREADS:
        raise ValueError(f"block {v!r} has {b[0] * b[1] * b[2]} threads; a block holds at most {MAX_BLOCK_THREADS}")
    return b


class Kernel:
    def __init__(self, source: str | Path, name: str, template_args: Sequence | None = None, *,
                 grid: Geometry | Sequence[int] | int | None = None, block: Geometry | Sequence[int] | int | None = None,
                 shared: Geometry | int = 0, options: dict | None = None, include_dirs: Iterable[Path] = ()):
        text = str(source)
        if "__global__" in text:
            self.source, self.filename, here = text, f"{name}.cu", ()
        else:
            path = Path(source)
            if not path.is_file():
                raise FileNotFoundError(f"no CUDA source at {path} (pass a .cu path or source text)")
            self.source, self.filename, here = path.read_text(), path.name, (path.parent,)
        if not re.search(rf"\b{re.escape(name)}\b", COMMENTS.sub(" ", self.source)):
            raise ValueError(f"{name!r} does not appear in the source (outside its comments)")
        if not callable(shared) and not (isinstance(shared, int) and shared >= 0):
            raise ValueError(f"shared={shared!r}: dynamic shared memory is a count of bytes >= 0 (or a function of "
                             "the arguments)")
        if grid is not None and not callable(grid):  # (fixed geometry: checked now, not at the first launch)
            _dim3(grid, "grid")
        if block is not None and not callable(block):
            _block(block)
        self.name = name
        self.template_args = list(template_args or [])
        self.expression = f"{name}<{', '.join(str(a) for a in self.template_args)}>" if self.template_args else name
        self.grid, self.block, self.shared = grid, block, shared
        self.options = dict(options or {})
        self.include_dirs = tuple(here) + tuple(Path(d) for d in include_dirs)
        self._cubins: dict[str, Cubin] = {}
        self._functions: dict = {}

    # --- compile-time facts (no GPU) -------------------------------------------------------------
    def compile(self, arch: str | None = None) -> Cubin:
        """The source through NVRTC as nvcc would take it (simtlab.compile.user_source: the short type
        names of the host headers, and <cstdio>, <cstdint>, <cmath> ... resolving to their device
        parts); a failure names its line in the user's file and what to do about a host-only header."""
        from .compile import COMPAT_DIR, user_source

        arch = normalise_arch(arch)
        if arch not in self._cubins:
            self._cubins[arch] = compile_source(user_source(self.source, self.filename), self.filename,
                                                [self.expression], arch, self.options,
                                                self.include_dirs + (COMPAT_DIR,))
        return self._cubins[arch]

    def _mangled(self, cubin: Cubin) -> str:
        return cubin.mangled(self.expression)  # NVRTC resolves plain names and template instances alike

    def resources(self, arch: str | None = None) -> KernelResources:
        cubin = self.compile(arch)
        return cubin.resources()[self._mangled(cubin)]

    def param_sizes(self, arch: str | None = None) -> list[int]:
        cubin = self.compile(arch)
        return param_sizes_from_cubin(cubin.data())[self._mangled(cubin)]

    def explain(self, *args, arch: str | None = None) -> dict:
        """Resources, SASS summary and (given arguments, or a fixed block) occupancy."""
        from .hw.occupancy import max_threads_per_block, occupancy
        from .analyze.sass import SassUnavailable, parse_sass, summarize, disassemble

        arch = normalise_arch(arch)
        res = self.resources(arch)
        out = {**res.as_dict(), "kernel": self.expression, "mangled": res.as_dict().get("kernel"), "arch": arch,
               "max_threads_per_block": max_threads_per_block(arch, res.registers, res.max_threads_declared),
               "param_sizes": self.param_sizes(arch)}
        launch = None
        if args:
            launch = self._launch(args)
        elif self.block is not None and not callable(self.block):
            launch = Launch((1, 1, 1), _block(self.block), 0 if callable(self.shared) else int(self.shared))
        if launch is not None:
            occ = occupancy(arch, launch.threads, res.registers, res.shared_static, launch.shared)
            out.update(block=launch.block, occupancy=occ.occupancy, limiter=occ.limiter,
                       blocks_per_sm=occ.blocks_per_sm)
        try:
            cubin = self.compile(arch)
            mangled = self._mangled(cubin)
            out["sass"] = summarize(self.expression, parse_sass(disassemble(cubin.path, mangled))[mangled]).as_dict()
        except SassUnavailable:
            pass
        return out

    # --- launching (GPU) -------------------------------------------------------------------------
    def _launch(self, args: Sequence) -> Launch:
        def resolve(v, what):
            if v is None:
                raise ValueError(f"no {what} given: pass {what}= to Kernel() or to the call")
            return v(*args) if callable(v) else v

        grid = _dim3(resolve(self.grid, "grid"), "grid")
        block = _block(resolve(self.block, "block"))
        shared = int(self.shared(*args) if callable(self.shared) else self.shared)
        return Launch(grid, block, shared)

    def _arguments(self, args: Sequence, sizes: list[int]) -> tuple:
        import cupy

        if len(args) != len(sizes):
            raise TypeError(f"{self.expression} takes {len(sizes)} arguments, got {len(args)}")
        out = []
        for i, (a, size) in enumerate(zip(args, sizes)):
            what = f"argument {i} of {self.expression}"
            if isinstance(a, np.ndarray) and a.ndim > 0:
                raise TypeError(f"{what} is a host (NumPy) array: pass a CuPy array or a CUDA tensor")
            if hasattr(a, "__cuda_array_interface__") or isinstance(a, cupy.ndarray):
                arr = cupy.asarray(a)
                if size != 8:
                    raise TypeError(f"{what} is an array but the kernel takes {size} bytes there (not a pointer)")
                if not arr.flags.c_contiguous:
                    raise ValueError(f"{what} is not contiguous (strides {arr.strides}): pass a contiguous copy")
                if arr.device.id != cupy.cuda.Device().id:
                    raise ValueError(f"{what} is on GPU {arr.device.id}, the current device is {cupy.cuda.Device().id}")
                out.append(arr)
            elif isinstance(a, (np.generic, np.ndarray)):
                if a.itemsize != size:
                    raise TypeError(f"{what} is {a.dtype} ({a.itemsize} bytes); the kernel takes {size} bytes")
                out.append(a)
            elif isinstance(a, bool) or not isinstance(a, (int, float)):
                raise TypeError(f"{what} has type {type(a).__name__}: pass an array or a number")
            elif isinstance(a, int):
                out.append({4: np.int32, 8: np.int64}.get(size, np.int32)(a) if size in (4, 8) else
                           _bad_size(what, size))
            else:
                out.append({4: np.float32, 8: np.float64}[size](a) if size in (4, 8) else _bad_size(what, size))
        return tuple(out)

    def _function(self, arch: str):
        if arch not in self._functions:
            import cupy

            cubin = self.compile(arch)
            self._functions[arch] = cupy.RawModule(path=str(cubin.path)).get_function(self._mangled(cubin))
        return self._functions[arch]

    def __call__(self, *args, grid=None, block=None, shared=None) -> None:
        from .device import device_info

        dev = device_info()
        kernel_args = self._arguments(args, self.param_sizes(dev.arch))  # count and types before any callable sees them
        saved = (self.grid, self.block, self.shared)
        try:
            self.grid = grid if grid is not None else self.grid
            self.block = block if block is not None else self.block
            self.shared = shared if shared is not None else self.shared
            launch = self._launch(args)
        finally:
            self.grid, self.block, self.shared = saved
        check_launch(self.resources(dev.arch), launch, dev.arch, dev)
        func = self._function(dev.arch)
        if launch.shared > SMEM_WITHOUT_OPT_IN:
            func.max_dynamic_shared_size_bytes = launch.shared
        func(launch.grid, launch.block, kernel_args, shared_mem=launch.shared)

    def verify(self, reference: Callable, *args, outputs: Sequence[int] = (), inouts: Sequence[int] = (),
               tol: float | None = None):
        """Run once and compare each written argument with `reference(*args)` computed in float64 (a
        CuPy/NumPy expression of the inputs; one array, or one per output, `outputs` then `inouts`).
        `outputs`: arguments the kernel only writes - poisoned (NaN) before the launch. `inouts`:
        arguments it reads and writes (C = alpha*A@B + beta*C) - their contents kept, handed to the
        reference as they were, and restored before each launch. Where an output holds NaN the
        reference has not, a second launch with a finite poison tells elements never written from
        NaN the kernel computed."""
        import cupy

        from .verify import compare, elementwise_tolerance, finite_poison, strays_explained

        if not outputs and not inouts:
            raise ValueError("say which arguments the kernel writes: outputs=[index, ...] (written only) and/or "
                             "inouts=[index, ...] (read and written)")
        both = sorted(set(outputs) & set(inouts))
        if both:
            raise ValueError(f"argument(s) {both} are in outputs and inouts: an argument is written only, or read "
                             "and written")
        written = list(outputs) + list(inouts)
        for i in written:
            if not isinstance(args[i], cupy.ndarray) and not hasattr(args[i], "__cuda_array_interface__"):
                raise TypeError(f"argument {i} is written by the kernel but is not a GPU array")
        initial = {i: cupy.asarray(args[i]).copy() for i in inouts}
        wide = [a.astype(cupy.float64) if isinstance(a, cupy.ndarray) and a.dtype.kind == "f" else a for a in args]
        expected = reference(*wide)
        expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
        if len(expected) != len(written):
            raise ValueError(f"the reference returned {len(expected)} arrays for {len(written)} written arguments "
                             "(outputs, then inouts)")
        refs = [cupy.asarray(ref).reshape(args[i].shape) for i, ref in zip(written, expected)]

        def launch(poison) -> list:
            for i in outputs:
                args[i].fill(poison(args[i]))
            for i, data in initial.items():
                cupy.asarray(args[i])[...] = data
            self(*args)
            cupy.cuda.get_current_stream().synchronize()
            return [cupy.asarray(args[i]).copy() for i in written]

        first = launch(lambda a: np.nan if a.dtype.kind == "f" else 0)
        verdicts = []
        for i, out, ref in zip(written, first, refs):
            t = tol if tol is not None else elementwise_tolerance(args[i].dtype.name)
            verdicts.append(compare(out, ref, t))
        if any(not v.ok and "non-finite" in v.reason for v in verdicts):  # never written, or NaN computed?
            second = launch(finite_poison)
            for k, (i, v) in enumerate(zip(written, verdicts)):
                if not v.ok and "non-finite" in v.reason:
                    why = strays_explained(first[k], second[k], refs[k], finite_poison(args[i]),
                                           read_first=i in initial)
                    verdicts[k] = type(v)(False, v.rel_error, v.tolerance, why)
        return verdicts[0] if len(verdicts) == 1 else verdicts

    def time(self, *args, **kw):
        """Median time of a launch (CUDA events, warm-up, L2 flushed between repetitions)."""
        from .bench import time_gpu
        from .device import require_gpu

        require_gpu()  # (NoGpuError, as verify raises, rather than the runtime's own error)
        return time_gpu(lambda: self(*args), **kw)

    def variant(self, template_args: Sequence | None = None, **launch) -> "Kernel":
        """The same source with other template arguments and/or launch geometry."""
        k = Kernel.__new__(Kernel)
        k.__dict__.update(self.__dict__)
        k.template_args = list(template_args if template_args is not None else self.template_args)
        k.expression = f"{self.name}<{', '.join(str(a) for a in k.template_args)}>" if k.template_args else self.name
        for key in ("grid", "block", "shared"):
            if key in launch:
                setattr(k, key, launch[key])
        k._cubins, k._functions = {}, {}
        return k

    def tune(self, space, *args, template: Callable | None = None, launch: Callable | None = None,
             reference: Callable | None = None, outputs: Sequence[int] = (), inouts: Sequence[int] = (),
             strategy: str | None = None, budget: int = 20, seed: int = 0, target_ms: float = 100.0):
        """Search `space` (a simtlab.tune.Space): `template(config)` gives template arguments and
        `launch(config)` a dict of grid/block/shared for each point; with a `reference`, every
        point is verified first (`outputs` and `inouts` as for `verify`) and a wrong one is recorded
        as a failure, never as a speed. The strategy is `simtlab tune`'s default (the gradient-boosted
        cost model, "model") unless named ("tpe", "random", "brute"). Returns a
        simtlab.tune.TuneResult (its `.best` is the fastest verified point)."""
        from .tune import tune
        from .tune.strategies import DEFAULT_STRATEGY

        strategy = strategy or DEFAULT_STRATEGY

        def objective(config):
            k = self.variant(template(config) if template else None, **(launch(config) if launch else {}))
            if reference is not None:
                verdicts = k.verify(reference, *args, outputs=outputs, inouts=inouts)
                for v in verdicts if isinstance(verdicts, list) else [verdicts]:
                    if not v.ok:
                        raise ValueError(f"wrong result: {v.reason}")
            return k.time(*args, target_ms=target_ms).median_ms

        return tune(space.valid(), objective, strategy, budget, seed)


def _bad_size(what: str, size: int):
    raise TypeError(f"{what} is a Python number but the kernel takes a {size}-byte value there: pass a NumPy scalar")
