"""What the operator tests share (tests/ops/test_*_operator*.py): a declared H100 and A100, a
declaration built for sm_90 with each rung compiled once, and the checks every declared launch
must pass - spill-free, within the SM's limits, exactly the kernel's parameters (count and sizes,
read from the cubin), every slot pointing at an array the call has."""

from simtlab.device import DeviceInfo
from simtlab.family import CONST, IN, MAP, OUT, SCRATCH
from simtlab.hw.resources import param_sizes_from_cubin
from simtlab.launch import build, check_launch

H100 = DeviceInfo(0, "H100 (declared)", (9, 0), 132, 65536, 65536, 233472, 49152, 232448, 1024, 2048, 1024, 32,
                  50 * 2**20, 80 * 2**30, 5120, 1980, 2619, 13000, 13000)
A100 = DeviceInfo(0, "A100 (declared)", (8, 0), 108, 65536, 65536, 167936, 49152, 166912, 1024, 2048, 1024, 32,
                  40 * 2**20, 80 * 2**30, 5120, 1410, 1593, 13000, 13000)


def declare(op, shapes, dtype, vec=True, options=None, device=H100):
    """op's declaration for operands of `shapes`, and the build function it was given (each rung
    at each set of parameters compiled once, for the device's architecture)."""
    built, arch = {}, str(device.arch)

    def build_once(rung, params):
        key = (rung.id, tuple(sorted(params.items())))
        if key not in built:
            built[key] = build(rung, params, arch)
        return built[key]

    return op.declare(shapes, dtype, options or {}, device, vec, build_once), build_once


def check_steps(declared, build_once, shapes, device=H100):
    """Every step of a declaration: no spill, within the device's limits, the kernel's parameters (a
    tensor map: 128 bytes, over an operand or an output the call has)."""
    arch = str(device.arch)
    pools = {IN: shapes, OUT: declared.outputs, SCRATCH: declared.scratch, CONST: declared.constants,
             MAP: declared.maps}
    for m in declared.maps:
        assert m.slot[0] in (IN, OUT) and 0 <= m.slot[1] < len(pools[m.slot[0]]), m
    for step in declared.steps:
        inst = build_once(step.rung, step.params)
        use_vec = declared.vec if step.rung.vec_variant else None
        name = step.function or inst.cubin.mangled(inst.expression(use_vec))
        if step.function is None:
            res = inst.resources(use_vec)
            assert res.spill_bytes == 0 and res.stack_frame == 0, inst.expression(use_vec)
            check_launch(res, step.launch, arch, device)
        sizes = param_sizes_from_cubin(inst.cubin.data())[name]
        expected = [(128 if a[0] == MAP else 8) if isinstance(a, tuple) else a.dtype.itemsize for a in step.args]
        assert expected == sizes, (name, step.args)
        for a in step.args:
            if isinstance(a, tuple):
                assert 0 <= a[1] < len(pools[a[0]]) and (a[0] != IN or shapes[a[1]] is not None), (name, a)
