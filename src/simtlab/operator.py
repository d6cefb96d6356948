"""Every family's public operators through one generic plan.

A family declares its operators (`simtlab.family.Operator`: the operands, the storage types, and
what a call of one kind runs - rungs, parameters, launches, argument slots, outputs, scratch).
`OperatorPlan` does the rest once per kind of call (each operand's type, shape, strides and
device, and the options): it validates the operands, compiles the rungs, checks every launch's
resources and packs its parameters. A call then costs reading the operands' addresses, allocating
the outputs (and scratch) through the caller's own allocator, the caller's current stream and one
driver launch a step: nothing synchronizes, reads device memory on the host or allocates beyond
that, so calls are captured by CUDA graphs like the library's own ops.

`call(operator, *operands, **options)` is what `simtlab.softmax` and the other public functions
run; `plan(...)` hands a plan to a caller who wants the lookup skipped too."""

from __future__ import annotations

import threading

import numpy as np

from .arrays import ArrayLib, array_lib
from .driver import F32, I32, I64, MAP as MAP_PARAM, PTR, ContextMismatch, PackedLaunch, TensorMapEncoder
from .family import CONST, IN, MAP, OUT, SCRATCH, Declared, Operator
from .launch import build, function_handle, prepare

__all__ = ["OperatorPlan", "call", "plan", "named", "call_along", "reduce_along", "contiguous", "PLANS_KEPT"]

PLANS_KEPT = 512  # plans kept per operator; the oldest half is dropped past this
_PLANS: dict = {}
_LIBS: dict = {}
_SLOT_KINDS = (IN, OUT, SCRATCH, CONST)


_INSTANCES: dict = {}  # (rung id, parameters, arch) -> its build


def _instance(rung, params: dict, arch: str):
    key = (rung.id, tuple(sorted(params.items())), arch)
    inst = _INSTANCES.get(key)
    if inst is None:
        inst = _INSTANCES[key] = build(rung, params, arch)
    return inst


def _lib(x, op: Operator) -> ArrayLib:
    lib = _LIBS.get(type(x))
    if lib is None:
        try:
            lib = _LIBS[type(x)] = array_lib(x)
        except TypeError as exc:
            raise TypeError(f"simtlab.{op.name}: {op.operands[0]}: {exc}") from None
    return lib


_SCALARS = ((np.int32, I32), (np.int64, I64), (np.float32, F32))


def _kind(step, index: int, arg) -> str:
    """A step argument's parameter kind: a slot is a pointer (a map slot, a tensor map by value);
    scalars are NumPy int32, int64, float32."""
    if isinstance(arg, tuple):
        return MAP_PARAM if arg[0] == MAP else PTR
    for scalar, kind in _SCALARS:
        if isinstance(arg, scalar):
            return kind
    raise TypeError(f"{step.rung.id}: argument {index} is a {type(arg).__name__}; a step passes slots (kind, index) "
                    "and NumPy int32, int64 or float32 scalars")


def _contiguous(shape: tuple, strides: tuple) -> bool:
    """C-contiguous in elements (a dimension of extent 1 may have any stride; an empty array is)."""
    if 0 in shape:
        return True
    expected = 1
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent != 1 and stride != expected:
            return False
        expected *= extent
    return True


class OperatorPlan:
    """One operator for one kind of call: validated, compiled and packed once (see the module)."""

    def __init__(self, op: Operator, lib: ArrayLib, operands: tuple, options: dict):
        from .device import device_info, require_gpu

        self.op, self.lib, self.options = op, lib, dict(options)
        if len(operands) != len(op.operands):
            raise TypeError(f"simtlab.{op.name} takes {len(op.operands)} arrays ({', '.join(op.operands)}), "
                            f"got {len(operands)}")
        shapes, dtype, device, first_typed = [], None, None, None
        for name, x in zip(op.operands, operands):
            if x is None:
                if name not in op.optional:
                    raise TypeError(f"simtlab.{op.name}: {name} is required")
                shapes.append(None)
                continue
            if not lib.owns(x):
                other = f"{type(x).__module__.split('.')[0]}.{type(x).__name__}"
                raise TypeError(f"simtlab.{op.name}: {name} is a {other} but {op.operands[0]} is a {lib.name} array: "
                                "pass one library's arrays")
            try:  # (a host tensor is named here, before the GPU is looked for)
                t, shape, strides, dev = lib.describe(x)
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"simtlab.{op.name}: {name}: {exc}") from None
            fixed = op.typed.get(name)
            if fixed is not None:
                if t != fixed:
                    raise TypeError(f"simtlab.{op.name}: {name} has dtype {t}; it takes {fixed}")
            elif t not in op.dtypes:
                raise TypeError(f"simtlab.{op.name}: {name} has dtype {t}; it takes {', '.join(op.dtypes)}")
            elif dtype is not None and t != dtype:
                raise TypeError(f"simtlab.{op.name}: {name} is {t} but {first_typed} is {dtype}: one type for all")
            if device is not None and dev != device:
                raise ValueError(f"simtlab.{op.name}: {name} is on GPU {dev} but {op.operands[0]} on GPU {device}")
            if not _contiguous(shape, strides):
                raise ValueError(f"simtlab.{op.name}: {name} has shape {shape} and element strides {strides}; the "
                                 "kernels read contiguous rows - pass a contiguous copy")
            if fixed is None and dtype is None:
                dtype, first_typed = t, name
            device = dev
            shapes.append(tuple(shape))
        require_gpu()
        self.device, self.dtype, self.shapes = device, dtype, tuple(shapes)
        self.info = device_info(device)
        self.keys = tuple(None if x is None else lib.key(x) for x in operands)
        with lib.on_device(device):
            self._variants = {True: self._prepare(True)}
            declared = self._variants[True][0]
            self._allocators = tuple(lib.allocator(shape, t, device) for shape, t in declared.outputs)
            self._scratch = tuple(lib.allocator(shape, t, device) for shape, t in declared.scratch)
            self._constants = tuple(self._constant(shape, t, value) for shape, t, value in declared.constants)
        self._const_ptrs = tuple(lib.ptr(c) for c in self._constants)
        self._cleared = declared.cleared  # (the same scratch in both builds)
        self._empty = any(0 in s for s in self.shapes if s is not None)  # (nothing to launch)
        self._lock = threading.Lock()

    # --- building ---------------------------------------------------------------------------------
    def _prepare(self, vec: bool):
        """The family's declaration for `vec` (the 128-bit build, or the one for any alignment) and
        its packed launches; None where the family declares the same launches for both."""
        arch = self.info.arch

        def built(rung, params):
            return _instance(rung, params, arch)

        declared: Declared = self.op.declare(self.shapes, self.dtype, self.options, self.info, vec, built)
        for m in declared.maps:
            if m.slot[0] not in (IN, OUT):
                raise ValueError(f"{self.op.name}: a tensor map is over an operand or an output, not {m.slot}")
        encoders = tuple((_SLOT_KINDS.index(m.slot[0]), m.slot[1],
                          TensorMapEncoder(m.type_code, m.dims, m.strides, m.box, m.swizzle)) for m in declared.maps)
        launches = []
        for step in declared.steps:
            inst = built(step.rung, step.params)
            use_vec = declared.vec if step.rung.vec_variant else None
            func = inst.module().get_function(step.function) if step.function else \
                prepare(inst, step.launch, use_vec, self.info)
            kinds = tuple(_kind(step, i, a) for i, a in enumerate(step.args))
            packed = PackedLaunch(function_handle(func), step.launch.grid, step.launch.block, step.launch.shared, kinds,
                                  self.device)
            slots, maps = [], []
            for i, a in enumerate(step.args):
                if isinstance(a, tuple) and a[0] == MAP:
                    if not 0 <= a[1] < len(encoders):
                        raise ValueError(f"{step.rung.id}: argument {i} is map {a[1]}; {len(encoders)} declared")
                    maps.append((i, a[1]))
                elif isinstance(a, tuple):
                    if a[0] not in _SLOT_KINDS:
                        raise ValueError(f"{step.rung.id}: argument {i} is slot {a}, not one of {_SLOT_KINDS}")
                    slots.append((packed.values[i], _SLOT_KINDS.index(a[0]), a[1]))
                else:
                    packed.values[i].value = a.item()
            launches.append((packed, tuple(slots), tuple(maps)))
        return declared, tuple(launches), encoders

    def _constant(self, shape, dtype, value):
        if value == "iota":  # (0, 1, ..., n-1: argsort's values)
            return self.lib.arange(shape[0], dtype, self.device)
        return self.lib.full(shape, dtype, self.device, value)

    # --- calling ----------------------------------------------------------------------------------
    def describe(self) -> str:
        """What a call runs: the rungs and their parameters."""
        return f"simtlab.{self.op.name}: {self._variants[True][0].what}"

    def __repr__(self) -> str:
        return f"<OperatorPlan {self.describe()}>"

    def matches(self, *operands) -> bool:
        """Whether operands are of the kind the plan was made for (type, shape, strides, device)."""
        lib = self.lib
        try:
            return tuple(None if x is None else lib.key(x) for x in operands) == self.keys
        except AttributeError:  # (another library's array)
            return False

    def __call__(self, *operands):
        """Run on operands of the kind the plan was made for (checked); returns the outputs (one
        array, or a tuple of them)."""
        if not self.matches(*operands):
            raise ValueError(f"simtlab.{self.op.name}: these operands differ from the ones this plan was made for "
                             "(shape, strides, type or device): make a plan for them")
        return self.run(operands)

    def run(self, operands: tuple):
        """(Operands already matched.) Outputs allocated, addresses set, each step launched on the
        caller's current stream; from a thread where another device is current, the launches run
        under a guard that makes the plan's device current. (Lists over generators, kinds as
        indexes: this is every call's host time.)"""
        lib = self.lib
        first = operands[0]
        outputs = [new(first) for new in self._allocators]
        if self._empty:  # (an empty operand: nothing to launch; a sum over no rows is zeros)
            for x in outputs:
                lib.fill_zero(x)
            return outputs[0] if len(outputs) == 1 else tuple(outputs)
        ptr = lib.ptr
        ins = [0 if x is None else ptr(x) for x in operands]
        declared, launches, encoders = self._variants[True]
        align = declared.align
        for a in ins:  # (outputs, scratch: the allocator's alignment)
            if a % align:
                declared, launches, encoders = self._unaligned()
                break
        scratch = ()
        if self._scratch:
            made = [new(first) for new in self._scratch]
            for i in self._cleared:  # (zeroed on the caller's stream)
                lib.fill_zero(made[i])
            scratch = [ptr(x) for x in made]
        arrays = (ins, [ptr(x) for x in outputs], scratch, self._const_ptrs)  # (indexed as _SLOT_KINDS)
        with self._lock:  # (the packed parameters are the plan's: one thread sets and launches at a time)
            maps = [enc.address(arrays[kind][index]) for kind, index, enc in encoders]  # (kept per address)
            try:
                self._launch(launches, arrays, maps, lib.stream(self.device))
            except ContextMismatch:
                with lib.device_guard(self.device):
                    self._launch(launches, arrays, maps, lib.stream(self.device))
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _unaligned(self):
        """The declaration for operands whose addresses the 128-bit path cannot take (made once)."""
        variant = self._variants.get(False)
        if variant is None:
            with self.lib.on_device(self.device):
                variant = self._variants[False] = self._prepare(False)
        return variant

    @staticmethod
    def _launch(launches, arrays, maps, stream: int) -> None:
        for packed, slots, map_slots in launches:
            for value, kind, index in slots:
                value.value = arrays[kind][index]
            for at, i in map_slots:  # (the parameter points at the map's 128 bytes: copied by the launch)
                packed.params[at] = maps[i]
            packed.launch(stream)


def plan(op: Operator, *operands, **options) -> OperatorPlan:
    """A plan for calls like this one (`plan(*operands)` then runs it on new operands of the kind)."""
    first = next((x for x in operands if x is not None), None)
    if first is None:
        raise TypeError(f"simtlab.{op.name} needs a GPU array")
    return OperatorPlan(op, _lib(first, op), operands, options)


def call(op: Operator, *operands, **options):
    """Run `op` on the operands: the plan kept for their kind (made on its first call)."""
    return _kept_plan(op, operands, options).run(operands)


def _kept_plan(op: Operator, operands: tuple, options: dict) -> OperatorPlan:
    first = operands[0] if operands and operands[0] is not None else None
    if first is None:
        raise TypeError(f"simtlab.{op.name}: {op.operands[0]} must be a GPU array, got None")
    lib = _LIBS.get(type(first)) or _lib(first, op)
    try:
        key = (op.name, tuple([None if x is None else lib.key(x) for x in operands]),
               tuple(sorted(options.items())) if options else ())
    except AttributeError:  # (another library's array: the plan names it)
        return OperatorPlan(op, lib, operands, options)
    found = _PLANS.get(key)
    if found is None:
        _keep_room(_PLANS)
        found = _PLANS[key] = OperatorPlan(op, lib, operands, options)
    return found


def _keep_room(plans: dict) -> None:
    if len(plans) >= PLANS_KEPT:
        for old in list(plans)[: PLANS_KEPT // 2]:
            del plans[old]


_NAMED: dict = {}


def named(name: str) -> Operator:
    """The operator a family declares under `name` (simtlab.<name>)."""
    op = _NAMED.get(name)
    if op is None:
        from .catalog import families

        for fam in families():
            for o in fam.operators:
                _NAMED[o.name] = o
        op = _NAMED.get(name)
        if op is None:
            raise KeyError(f"no operator {name!r}; the families declare {', '.join(sorted(_NAMED))}")
    return op


_ALONG: dict = {}  # (name, dim, x's kind) -> the plan of a contiguous x along its last dimension


def call_along(name: str, x, dim: int, *others, **options):
    """Operator `name` along dimension `dim` of x (and of `others`, arrays of x's shape such as a
    backward's dy): the arrays moved so that `dim` is last and made contiguous where they are not
    (copies inside the call, on its stream), the result moved back, contiguous. A 0-d x is one
    row of one value. A repeated call on a contiguous x along its last dimension goes straight to
    its plan (the checks below are the same for every x of the kind: a key of type, shape, strides
    and device)."""
    lib = _LIBS.get(type(x))
    if lib is not None and not others and not options:
        found = _ALONG.get((name, dim, lib.key(x)))
        if found is not None:
            return found.run((x,))
    torch_like = type(x).__module__.startswith("torch")
    if x.ndim == 0:
        return call_along(name, x.reshape(1), 0, *(o.reshape(1) for o in others), **options).reshape(())
    if not -x.ndim <= dim < x.ndim:
        raise ValueError(f"simtlab.{name}: dim {dim} is out of range for a {x.ndim}-d array of shape {tuple(x.shape)}")
    d = dim % x.ndim
    last = d == x.ndim - 1

    def ready(a):
        return contiguous(a if last else _moved_last(a, d, torch_like))

    operands = (ready(x), *(ready(o) for o in others))
    found = _kept_plan(named(name), operands, options)
    if last and not others and not options and operands[0] is x:  # (kept for the call's repeats)
        _keep_room(_ALONG)
        _ALONG[(name, dim, found.lib.key(x))] = found
    out = found.run(operands)
    if last:
        return out
    if torch_like:
        return out.movedim(-1, d).contiguous()
    import cupy

    return cupy.ascontiguousarray(cupy.moveaxis(out, -1, d))


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")


def contiguous(a):
    """a itself where it is contiguous, None, or not a GPU array (the plan names what it cannot take),
    else a contiguous copy made on the caller's stream."""
    if a is None:
        return a
    if _is_torch(a):
        return a if a.is_contiguous() else a.contiguous()
    flags = getattr(a, "flags", None)
    if flags is None or flags.c_contiguous or type(a).__module__.split(".")[0] != "cupy":
        return a
    import cupy

    return cupy.ascontiguousarray(a)


def _moved_last(a, d: int, torch_like: bool):
    """A view of a with dimension d moved last."""
    if torch_like:
        return a.movedim(d, -1)
    import cupy

    return cupy.moveaxis(a, d, -1)


def reduce_along(name: str, x, dim: int | None = None, keepdim: bool = False):
    """Operator `name` - each row of a matrix reduced to one value - over dimension `dim` of x (moved
    last and made contiguous where it is not: a copy inside the call), or over every element for
    dim None; the result shaped as torch.sum shapes it (`keepdim`: the reduced dimension kept as 1)."""
    if dim is not None and (isinstance(dim, bool) or not isinstance(dim, (int, np.integer))):
        raise TypeError(f"simtlab.{name}: dim is one dimension (an int) or None for every element, got {dim!r}")
    if not hasattr(x, "ndim"):
        raise TypeError(f"simtlab.{name}: x must be a GPU array, got {type(x).__name__}")
    ndim = x.ndim
    if dim is None:
        out = call(named(name), contiguous(x).reshape(1, -1))
        return out.reshape((1,) * ndim if keepdim else ())
    if not -max(ndim, 1) <= dim < max(ndim, 1):
        raise ValueError(f"simtlab.{name}: dim {dim} is out of range for a {ndim}-d array of shape {tuple(x.shape)}")
    if ndim == 0:
        return call(named(name), x.reshape(1, 1)).reshape(())
    d = int(dim) % ndim
    torch_like = _is_torch(x)
    x = contiguous(x if d == ndim - 1 else _moved_last(x, d, torch_like))
    lead = tuple(x.shape[:-1])
    rows = int(np.prod(lead, dtype=np.int64))
    out = call(named(name), x.reshape(rows, x.shape[-1])).reshape(lead)
    if keepdim:
        if torch_like:
            return out.unsqueeze(d)
        import cupy

        return cupy.expand_dims(out, d)
    return out
