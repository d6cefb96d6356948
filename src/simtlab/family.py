"""A kernel family as data: its rungs (one per kernel file, with their parameters, launch geometry
and capabilities) and the operations its rungs share (problem sizes, inputs, references,
tolerances, FLOP and byte counts), which live in the family's `simtlab.ops.<family>` module.

Each ops module declares its family at its end (`FAMILY = Family(...)`), naming its own functions;
`simtlab.catalog` only gathers them. Nothing is looked up by name: a rung holds its geometry and
size-default functions, and its family's operations (`rung.ops`), whose optional hooks have
defaults in `simtlab.ops.base` (see `FamilyOps`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from types import MappingProxyType, ModuleType
from typing import Any, Callable, Mapping, Protocol, runtime_checkable

from .hw.arch import Arch

__all__ = ["Rung", "Family", "FamilyOps", "frozen", "Operator", "Step", "Declared", "IN", "OUT", "SCRATCH", "CONST"]


def frozen(d: Mapping | None = None) -> Mapping:
    """A read-only copy of a parameter mapping (rungs are shared, immutable data)."""
    return MappingProxyType(dict(d or {}))


@runtime_checkable
class FamilyOps(Protocol):
    """What every family's ops module provides. The last two are hooks whose defaults
    (`simtlab.ops.base`) a module imports where it has nothing of its own to say."""

    DTYPE: str

    def parse_size(self, text: str, **options) -> Any: ...  # "4096" -> the family's problem
    def workspace(self, problem, seed: int) -> Any: ...  # fresh random inputs, the output, the expected result
    def references(self) -> list: ...  # what every rung is compared with (ops.base.Reference)
    def tolerance(self, problem, ws=None) -> float: ...  # relative error a correct result stays under
    def requested_bytes(self, params, problem) -> int: ...  # bytes a rung asks of memory (its `traffic` aside)
    def unsupported(self, rung, problem) -> str | None: ...  # why a rung cannot take a problem (None: it can)
    def make_runner(self, instance, problem, ws, device, vec, prepare): ...  # several launches etc. (None: one)


@dataclass(frozen=True)
class Rung:
    family: str
    stage: int
    name: str
    source: str  # path under simtlab/kernels/
    kernel: str  # __global__ template name
    template_params: tuple[str, ...]  # template arguments, in order
    defaults: Mapping[str, int]
    lesson: str
    geometry: Callable  # (params, problem, device=None) -> Launch
    vec_variant: bool = False  # trailing `bool VEC` template argument: 128-bit path vs predicated scalar path
    arch_defaults: Mapping[str, Mapping[str, int]] = field(default_factory=frozen)  # per-arch overrides
    tunable: tuple[str, ...] = ()
    min_cc: tuple[int, int] = (7, 0)  # cp.async needs (8, 0)
    from_store: bool = False  # take parameters from the best verified result in the store, when there is one
    size_defaults: Callable | None = None  # (problem, device=None, vec=None) -> params, when the store has none
    sass_expect: tuple[str, ...] = ()  # opcodes (base, base.width, or A|B) the lesson must put in the SASS
    aliases: tuple[str, ...] = ()  # other names the CLI accepts (e.g. "warptile")
    arch_specific: bool = False  # built for min_cc's "a" target (wgmma, setmaxnreg): runs on exactly that capability
    capabilities: frozenset[str] = frozenset()  # what the rung can do beyond its family's basics (family-defined)
    space: Callable[[int], Any] | None = None  # (opt-in shared memory per block) -> its search space (simtlab.space)
    features: Callable[[Mapping[str, int]], list[float]] | None = None  # what a cost model sees of a configuration
    traffic: Callable[[Mapping[str, int], Any], int] | None = None  # (params, problem) -> bytes, where not the family's
    work: Callable[[Mapping[str, int], Any, int], tuple[int, int]] | None = None  # persistent: (units, slots) on sms
    builds_on: int | None = None  # the stage it changes (its header's "what changed from rung N"), where not stage - 1
    ops: Any = field(default=None, compare=False, repr=False)  # its family's operations (set by Family)

    @property
    def id(self) -> str:
        return f"{self.family}/{self.stage:02d}_{self.name}"

    @property
    def base_stage(self) -> int:
        """The stage of the rung this one changes: what `explain` compares it with."""
        return self.builds_on if self.builds_on is not None else self.stage - 1

    def params(self, arch: str | None = None, overrides: Mapping[str, int] | None = None) -> dict[str, int]:
        p = dict(self.defaults)
        if arch is not None:
            p.update(self.arch_defaults.get(Arch(arch).base, {}))
        for k, v in (overrides or {}).items():
            if k not in p:
                raise ValueError(f"{self.id} has no parameter {k!r}; it has {', '.join(p)}")
            p[k] = int(v)
        return p

    def name_expression(self, params: Mapping[str, int], vec: bool | None = None) -> str:
        args = [str(int(params[k])) for k in self.template_params]
        if self.vec_variant:
            args.append("true" if (vec is None or vec) else "false")
        return f"{self.kernel}<{', '.join(args)}>"

    @property
    def widest_vec(self) -> bool | None:
        """The `vec` of a build no workspace chose (static reports, the tuner's builds, the shipped
        point): the 128-bit path where the rung has one."""
        return True if self.vec_variant else None

    def name_expressions(self, params: Mapping[str, int]) -> tuple[str, ...]:
        if self.vec_variant:
            return (self.name_expression(params, True), self.name_expression(params, False))
        return (self.name_expression(params),)

    def requested_bytes(self, params: Mapping[str, int], problem) -> int:
        """Global bytes the rung's threads ask for (caches aside): its own `traffic` where it
        declares one, else its family's count."""
        return self.traffic(params, problem) if self.traffic else self.ops.requested_bytes(params, problem)

    def work_units(self, params: Mapping[str, int], problem, sms: int) -> tuple[int, int] | None:
        """A persistent rung's units of work and the slots that run them at once on `sms` SMs, for
        wave quantization; None where the grid's blocks are the units."""
        return self.work(params, problem, sms) if self.work else None

    def can(self, capability: str) -> bool:
        return capability in self.capabilities

    def supports(self, cc: tuple[int, int]) -> bool:
        return tuple(cc) == self.min_cc if self.arch_specific else tuple(cc) >= self.min_cc

    @property
    def requirement(self) -> str:
        """What the rung needs, in words: 'compute capability 8.0+' or 'exactly 9.0 (sm_90a)'."""
        cc = f"{self.min_cc[0]}.{self.min_cc[1]}"
        if self.arch_specific:
            return f"compute capability exactly {cc} (sm_{self.min_cc[0]}{self.min_cc[1]}a)"
        return f"compute capability {cc}+"

    def build_arch(self, arch: str) -> str:
        """The target a cubin is built for: the "a" variant for architecture-specific rungs."""
        return Arch(arch).specific if self.arch_specific else Arch(arch)


# --- public operators: what a family declares of a call, which simtlab.operator plans and runs ------

# an argument slot of a Step: the call's operand i, output i, scratch buffer i or constant array i,
# or tensor map i of the declaration's `maps` (a 128-byte kernel parameter, passed by value)
IN, OUT, SCRATCH, CONST, MAP = "in", "out", "scratch", "const", "map"


@dataclass(frozen=True)
class TensorMapArg:
    """A TMA tensor map over one of a call's arrays (`slot`: (IN, i) or (OUT, i)), as
    cuTensorMapEncodeTiled takes it: element type code, extents innermost first, byte strides of
    the outer dimensions, the box a copy moves, the swizzle. A kernel takes it by value
    (`const __grid_constant__`), so a launch carries it and nothing is copied to the device."""

    slot: tuple
    type_code: int
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    swizzle: int


@dataclass(frozen=True)
class Step:
    """One launch of a call: a rung at parameters, its geometry, and its arguments in order - each a
    slot (kind, index) for an array or a NumPy int32 / float32 scalar fixed for the kind of call."""

    rung: Rung
    params: Mapping[str, int]
    launch: Any  # simtlab.launch.Launch
    args: tuple
    function: str | None = None  # another (extern "C") kernel of the rung's module, where not the rung's own


@dataclass(frozen=True)
class Declared:
    """What a call of one kind runs: the outputs it returns and the scratch it uses, allocated per
    call through the caller's allocator (shape, dtype), constant arrays made once per plan (shape,
    dtype, fill value: an absent weight's ones), the launches, and how the description reads.
    `vec` is whether the launches take the rungs' 128-bit path, which needs every array's address
    a multiple of `align` bytes (checked on each call: the other build runs otherwise). `cleared`:
    the scratch arrays zeroed on the caller's stream before the launches (a look-back's flags).
    `maps`: the tensor maps the steps' (MAP, i) arguments stand for (TensorMapArg), encoded per
    address on the call's arrays."""

    outputs: tuple
    steps: tuple[Step, ...]
    what: str
    scratch: tuple = ()
    constants: tuple = ()
    vec: bool = True
    align: int = 16
    cleared: tuple[int, ...] = ()
    maps: tuple = ()


@dataclass(frozen=True)
class Operator:
    """A family's public operator: `simtlab.<name>` on PyTorch tensors and CuPy arrays.

    `operands` name the arrays a call takes, in order (those in `optional` may be None); `dtypes`
    the storage types it computes in (all operands of one); `declare(shapes, dtype, options, device,
    vec, build)` says what a call runs - `shapes` each operand's shape (None for one absent),
    `options` the call's other arguments, `device` the GPU's DeviceInfo, `vec` whether the 128-bit
    build may be declared, `build(rung, params)` the compiled rung (for its occupancy) - raising
    ValueError, in one line, for a call it cannot run. `typed` names operands of a fixed type of
    their own, outside that rule (a sparse matrix's int32 offsets beside its float32 values)."""

    name: str
    operands: tuple[str, ...]
    dtypes: tuple[str, ...]
    declare: Callable
    optional: frozenset = frozenset()
    typed: Mapping[str, str] = field(default_factory=frozen)


@dataclass(frozen=True)
class Family:
    name: str
    title: str
    ops: ModuleType  # the family's ops module (FamilyOps)
    reference: str  # what every rung is compared with, timed in the same run
    default_sizes: tuple[str, ...]
    rungs: tuple[Rung, ...]
    metric: str = "tflops"  # headline figure: "tflops" (compute-bound) or "gbs" (memory-bound)
    check_size: str = "1000003"  # a small odd problem for sanitizers and quick checks
    operators: tuple[Operator, ...] = ()  # its public operators (simtlab.operator runs them)

    def __post_init__(self):
        for r in self.rungs:
            if r.family != self.name:
                raise ValueError(f"rung {r.id} is listed in family {self.name!r}")
        # each rung carries its family's operations (launch and the analyses reach them through it)
        object.__setattr__(self, "rungs", tuple(dataclasses.replace(r, ops=self.ops) for r in self.rungs))

    def op(self) -> ModuleType:
        return self.ops

    def rung(self, key: str | int) -> Rung:
        """By name ('naive'), stage (3, '3', '03') or id ('gemm/03_smem_tiling')."""
        text = str(key).split("/")[-1]
        for r in self.rungs:
            if text in (r.name, f"{r.stage:02d}_{r.name}", *r.aliases) or (text.isdigit() and int(text) == r.stage):
                return r
        raise KeyError(f"family {self.name!r} has no rung {key!r}; rungs: {', '.join(r.name for r in self.rungs)}")
