"""Compiled rungs -> callable launches on the current device (through CuPy).

`build()` compiles a rung at given parameters (both VEC variants in one
module); `Launch` is the geometry; `check_launch()` turns every resource limit
a launch could hit into a clear `LaunchError` before the driver sees it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .compile import Cubin, compile_file, source_digest
from .family import Rung
from .hw.arch import Arch
from .hw.occupancy import SMEM_WITHOUT_OPT_IN, Occupancy, arch_limits, occupancy
from .hw.resources import KernelResources

__all__ = ["Launch", "LaunchError", "RungInstance", "build", "check_launch"]



class LaunchError(RuntimeError):
    """A launch that cannot run as asked (resources, geometry, architecture)."""


class UnsupportedArchError(LaunchError):
    """A rung asked for an architecture older than the instructions it is built on."""


def arch_capability(arch: str) -> tuple[int, int]:
    """'sm_90a' -> (9, 0), 'sm_120' -> (12, 0)."""
    return Arch(arch).capability


@dataclass(frozen=True)
class Launch:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int = 0  # dynamic shared memory, bytes

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def grid2(cols: int, rows: int, bx: int, by: int) -> tuple[int, int, int]:
    return (_ceil(cols, bx), _ceil(rows, by), 1)


_MODULES: dict[tuple[Path, int], Any] = {}


@dataclass
class RungInstance:
    """A rung compiled at concrete parameters for one architecture."""

    rung: Rung
    params: dict[str, int]
    cubin: Cubin
    _functions: dict = field(default_factory=dict, repr=False)

    @property
    def arch(self) -> str:
        return self.cubin.arch

    def expression(self, vec: bool | None = True) -> str:
        return self.rung.name_expression(self.params, vec)

    def resources(self, vec: bool | None = True) -> KernelResources:
        return self.cubin.resources(self.expression(vec))

    def geometry(self, problem, device=None) -> Launch:
        return self.rung.geometry(self.params, problem, device)

    def occupancy(self, launch: Launch, vec: bool | None = True) -> Occupancy:
        r = self.resources(vec)
        return occupancy(self.arch, launch.threads, r.registers, r.shared_static, launch.shared)

    def module(self):
        """The CuPy module of this cubin loaded on the current device (needs a GPU): its functions
        and its __constant__ data. A module belongs to one device's context: each device loads its own."""
        import cupy

        key = (self.cubin.path, cupy.cuda.runtime.getDevice())
        module = _MODULES.get(key)
        if module is None:
            module = _MODULES[key] = cupy.RawModule(path=str(self.cubin.path))
        return module

    def function(self, vec: bool | None = True):
        """The loaded CUDA function on the current device (needs a GPU)."""
        import cupy

        key = (self.expression(vec), cupy.cuda.runtime.getDevice())
        if key not in self._functions:
            self._functions[key] = self.module().get_function(self.cubin.mangled(key[0]))
        return self._functions[key]


def build(rung: Rung, params: Mapping[str, int] | None = None, arch: str | None = None) -> RungInstance:
    """Compile `rung` (cached on disk). `params` override the rung's defaults for `arch`."""
    from .compile import normalise_arch

    arch = normalise_arch(arch)
    if not rung.supports(arch_capability(arch)):
        raise UnsupportedArchError(f"{rung.id} needs {rung.requirement}; {arch} does not have it")
    p = rung.params(arch, params)
    cubin = compile_file(rung.source, rung.name_expressions(p), arch=rung.build_arch(arch))
    return RungInstance(rung, p, cubin)


def rung_source(rung: Rung) -> str:
    """The digest of a rung's kernel source as it stands: stored with every row it measures, so
    a row from another version of the source is known as such."""
    return source_digest(rung.source)


def choose_params(rung: Rung, problem, device, vec: bool | None, store=None,
                  explicit: Mapping[str, int] | None = None) -> dict[str, int] | None:
    """Parameter overrides for one launch: explicit ones, else the store's best verified result
    for this device and problem (rungs with `from_store`) among rows that set exactly this rung's
    parameters - measured on the current source where there is one - else the rung's
    size-dependent defaults; None keeps the rung's (per-arch) defaults."""
    import json

    if explicit:  # over the size defaults, which may carry what the problem fixes (operator, dtype)
        base = rung.size_defaults(problem, device, vec) if rung.size_defaults else {}
        return {**base, **explicit}
    if rung.from_store and store is not None and device is not None:
        # (a row with a knob since removed, or without one since added, measured another kernel)
        best = store.best(rung.family, rung.id, problem.label, device.name, names=rung.template_params,
                          source=rung_source(rung))
        if best and best.get("params"):
            return json.loads(best["params"])
    if rung.size_defaults:
        return rung.size_defaults(problem, device, vec)
    return None


def function_handle(func) -> int:
    """The driver's CUfunction handle of a loaded kernel (a CuPy RawKernel keeps it in its
    `kernel`), for driver queries such as occupancy."""
    return int(getattr(func, "kernel", func).ptr)


def check_launch(res: KernelResources, launch: Launch, arch: str, device=None) -> None:
    """Raise LaunchError naming the limit a launch would break."""
    lim = arch_limits(arch)
    max_block = device.max_threads_per_block if device else lim.max_threads_per_block
    if launch.threads < 1 or launch.threads > max_block:
        raise LaunchError(f"{launch.threads} threads per block: the device allows 1..{max_block}")
    if res.max_threads_declared and launch.threads > res.max_threads_declared:
        raise LaunchError(
            f"{launch.threads} threads per block exceed the kernel's __launch_bounds__ ({res.max_threads_declared})"
        )
    occ = occupancy(arch, launch.threads, res.registers, res.shared_static, launch.shared)
    if occ.blocks_per_sm == 0:
        raise LaunchError(
            f"block of {launch.threads} threads, {res.registers} registers/thread, "
            f"{res.shared_static + launch.shared} bytes shared memory cannot fit on an SM: {occ.limiter}"
        )
    optin = device.smem_per_block_optin if device else lim.smem_per_block_optin
    if res.shared_static + launch.shared > optin:
        raise LaunchError(f"{res.shared_static + launch.shared} bytes of shared memory per block: limit {optin}")
    check_grid(launch)


def check_grid(launch: Launch) -> None:
    """Raise LaunchError when the grid is outside what CUDA can launch."""
    if launch.grid[0] > 2**31 - 1 or launch.grid[1] > 65535 or launch.grid[2] > 65535 or min(launch.grid) < 1:
        raise LaunchError(f"grid {launch.grid} is outside CUDA's limits (x < 2^31, y and z <= 65535, all >= 1)")


def prepare(instance: RungInstance, launch: Launch, vec: bool | None, device=None):
    """Check limits, opt in to large dynamic shared memory, return the CUDA function."""
    check_launch(instance.resources(vec), launch, instance.arch, device)
    func = instance.function(vec)
    if launch.shared > SMEM_WITHOUT_OPT_IN:
        func.max_dynamic_shared_size_bytes = launch.shared
    return func


def unsupported_reason(rung: Rung, problem) -> str | None:
    """Why a rung cannot take this problem at all (e.g. an input type it has no form for), from its
    family's `unsupported(rung, problem)` hook; None when it can."""
    return rung.ops.unsupported(rung, problem)


def runner(instance: RungInstance, problem, ws, vec: bool | None, device=None):
    """A zero-argument callable that runs the rung once on the workspace: the family's own
    `make_runner` where it has one (several launches, __constant__ data, per-rung arguments; it may
    return None for a rung it leaves to the default), else one launch with `ws.args()`."""
    reason = unsupported_reason(instance.rung, problem)
    if reason:
        raise LaunchError(f"{instance.rung.id} cannot run {problem.label}: {reason}")
    run = instance.rung.ops.make_runner(instance, problem, ws, device, vec, prepare)
    if run is not None:
        return run
    launch = instance.geometry(problem, device)
    func = prepare(instance, launch, vec, device)
    args = ws.args()

    def run_once():
        func(launch.grid, launch.block, args, shared_mem=launch.shared)

    return run_once
