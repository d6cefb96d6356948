"""The row operators' declarations (simtlab.softmax, log_softmax, layer_norm, rms_norm and their
backwards), checked without a GPU: for every regime of row length, storage type and alignment,
each launch a call would make is built for sm_90, fits the SM's resources without spilling,
covers every row, and passes exactly the kernel's parameters (their count and sizes, read from
the cubin)."""

import dataclasses
import math

import numpy as np
import pytest

from simtlab.arrays import ArrayLib
from simtlab.catalog import family
from simtlab.device import DeviceInfo
from simtlab.family import CONST, IN, OUT, SCRATCH
from simtlab.hw.resources import param_sizes_from_cubin
from simtlab.launch import build, check_launch
from simtlab.ops import softmax

H100 = DeviceInfo(0, "H100 (declared)", (9, 0), 132, 65536, 65536, 233472, 49152, 232448, 1024, 2048, 1024, 32,
                  50 * 2**20, 80 * 2**30, 5120, 1980, 2619, 13000, 13000)
A100 = dataclasses.replace(H100, name="A100-like (declared)", compute_capability=(8, 0), sms=108)  # (no clusters)
OPERATORS = {o.name: o for fam in ("softmax", "layernorm") for o in family(fam).operators}


CLUSTER_FROM = 4096  # (softmax's rung 6 from here, in the launch checks)


@pytest.fixture(autouse=True)
def _clusters_without_a_gpu(monkeypatch):
    """Rung 6 of the norms and softmax on Hopper asks the driver how many clusters run at once: here,
    the launch's own estimate (whole clusters, 1024 threads an SM)."""
    from simtlab.ops import cluster_rows

    monkeypatch.setattr(cluster_rows, "active_clusters", lambda inst, launch, vec, device, size: launch.grid[0] // size)
# one length in each regime of the launch rules: a warp a row, a block of 256, of 512 / 1024 in
# registers, streamed; either side of each boundary; lengths not in groups of four
COLS = (1, 3, 128, 1024, 1025, 4096, 6144, 6145, 8192, 8193, 16384, 16385, 32768, 32769, 65536, 100003)
SIZES = {"in": 8, "out": 8, "scratch": 8, "const": 8}


def _operands(op, rows, cols, weight=True, bias=True):
    shape = (rows, cols)
    if op.name.endswith("_backward"):
        return (shape, (cols,) if weight else None, shape) if "norm" in op.name else (shape, shape)
    if op.name == "layer_norm":
        return (shape, (cols,) if weight else None, (cols,) if bias else None)
    if op.name == "rms_norm":
        return (shape, (cols,) if weight else None)
    return (shape,)


def _declare(op, shapes, dtype, vec, device=H100):
    built = {}

    def build_once(rung, params):
        key = (rung.id, tuple(sorted(params.items())))
        if key not in built:
            built[key] = build(rung, params, "sm_90")
        return built[key]

    return op.declare(shapes, dtype, {}, device, vec, build_once), build_once


@pytest.mark.parametrize("name", sorted(OPERATORS))
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("vec", [True, False], ids=["aligned", "unaligned"])
def test_every_launch_a_call_makes_fits_and_passes_the_kernels_parameters(name, dtype, vec, tmp_path, monkeypatch):
    """Every launch at lengths in each regime, softmax's rung 6 taken from 4096 values (as a measured
    CLUSTER_FROM would route it)."""
    monkeypatch.setattr(softmax, "CLUSTER_FROM", CLUSTER_FROM)
    op = OPERATORS[name]
    itemsize = 4 if dtype == "float32" else 2
    for cols in COLS:
        rows = 3
        shapes = _operands(op, rows, cols)
        declared, build_once = _declare(op, shapes, dtype, vec)
        clustered = declared.steps[0].rung.stage == 6  # (on Hopper: rows in 16-byte pieces)
        # (the norms' backward at every length, softmax's operators from a measured one, the norms' forwards never)
        from_cols = 1 if "norm_backward" in name else CLUSTER_FROM if "softmax" in name else math.inf
        assert clustered == (vec and cols * itemsize % 16 == 0 and from_cols <= cols <= 65536)
        assert declared.vec == (vec and cols % 4 == 0) and declared.align == (16 if clustered else 4 * itemsize)
        assert declared.outputs[0] == ((rows, cols), dtype)
        for step in declared.steps:
            inst = build_once(step.rung, step.params)
            use_vec = declared.vec if step.rung.vec_variant else None
            res = inst.resources(use_vec)
            assert res.spill_bytes == 0 and res.stack_frame == 0, (inst.expression(use_vec), cols)
            check_launch(res, step.launch, "sm_90", H100)
            sizes = param_sizes_from_cubin(inst.cubin.data())[inst.cubin.mangled(inst.expression(use_vec))]
            passed = [8 if isinstance(a, tuple) else a.dtype.itemsize for a in step.args]
            assert passed == sizes, (inst.expression(use_vec), step.args)
            for a in step.args:
                if isinstance(a, tuple):
                    pool = {IN: shapes, OUT: declared.outputs, SCRATCH: declared.scratch, CONST: declared.constants}[a[0]]
                    assert 0 <= a[1] < len(pool) and (a[0] != IN or shapes[a[1]] is not None)
        first = declared.steps[0]
        slots = first.params["BLOCK"] // 32 if first.params.get("WARP_ROWS") else 1
        if clustered:  # whole clusters, no more teams than rows
            group = first.params.get("GROUP", 1)
            size = first.params["CLUSTER"] * group
            assert all(step.launch.grid[0] % size == 0 for step in declared.steps)
            assert 1 <= first.launch.grid[0] // size <= -(-rows // group)
        elif "norm_backward" in name:  # a persistent grid striding over the rows
            assert 1 <= first.launch.grid[0] <= -(-rows // slots)
        else:
            assert first.launch.grid[0] * slots >= rows


def test_absent_weight_and_bias_read_constants_made_once_per_plan():
    declared, _ = _declare(OPERATORS["layer_norm"], _operands(OPERATORS["layer_norm"], 5, 64, False, False),
                           "bfloat16", True)
    assert declared.constants == (((64,), "bfloat16", 1.0), ((64,), "bfloat16", 0.0))
    assert declared.steps[0].args[1:3] == ((CONST, 0), (CONST, 1))
    declared, _ = _declare(OPERATORS["rms_norm_backward"], (((5, 64)), None, (5, 64)), "float32", True)
    assert declared.constants == (((64,), "float32", 1.0),) and declared.steps[0].args[1] == (CONST, 0)
    assert [o[0] for o in declared.outputs] == [(5, 64), (64,)]  # dx, dw (no bias)


def test_the_backward_s_partial_rows_are_its_clusters_on_hopper():
    """Rung 6: one partial row a cluster (4 teams of whole rows at 4096 bf16 values: two blocks of 256
    an SM, a cluster over two SMs; a long row split over 4 blocks of 8192 values at 32768), the
    column sums over a grid of whole clusters."""
    for cols, shape in ((4096, (1, 4)), (32768, (4, 1))):
        declared, _ = _declare(OPERATORS["layer_norm_backward"], ((100000, cols), (cols,), (100000, cols)), "bfloat16",
                               True)
        first, second = declared.steps
        assert first.rung.stage == 6 and (first.params["CLUSTER"], first.params["GROUP"]) == shape
        parts = first.launch.grid[0] // (shape[0] * shape[1])
        assert declared.scratch == (((parts, cols), "float32"),) * 2 and first.args[9] == np.int32(parts)
        assert (first.args[-1], second.args[-1]) == (0, 1) and second.launch.grid[0] % (shape[0] * shape[1]) == 0
        assert second.launch.grid[0] * 32 >= cols
        assert second.launch.block[0] == 256


def test_the_backward_s_partial_rows_are_its_grid():
    declared, _ = _declare(OPERATORS["layer_norm_backward"], ((100000, 4096), (4096,), (100000, 4096)), "bfloat16",
                           True, A100)
    first, second = declared.steps
    parts = first.launch.grid[0]
    assert declared.scratch == (((parts, 4096), "float32"),) * 2 and first.args[10] == np.int32(parts)
    assert parts % A100.sms == 0 and parts <= 100000  # as many blocks as run at once
    assert (first.args[-1], second.args[-1]) == (0, 1) and second.launch.grid[0] == 4096 // 32


@pytest.mark.parametrize("op", ["layer_norm_backward", "rms_norm_backward"])
def test_long_rows_take_their_statistics_then_column_blocks_down_row_slices(op):
    declared, _ = _declare(OPERATORS[op], ((4096, 32768), (32768,), (4096, 32768)), "bfloat16", True, A100)
    stats, walk, sums = declared.steps
    assert [s.args[-1] for s in declared.steps] == [2, 0, 1]
    assert stats.launch.grid == (4096, 1, 1)  # a block a row
    columns, parts, _ = walk.launch.grid
    assert columns == 32768 // (4 * walk.launch.block[0]) and walk.args[10] == np.int32(parts)
    assert 1 < parts < 4096 and columns * parts >= H100.sms  # the device filled once, few partial rows
    partials = 1 if op.startswith("rms") else 2
    assert declared.scratch == (((parts, 32768), "float32"),) * partials + (((4096, 4), "float32"),)
    assert walk.args[6] == ("scratch", partials)  # the statistics' slot
    assert sums.launch.grid == (32768 // 32, 1, 1)


@pytest.mark.parametrize("shapes, match", [
    (((4, 8), (7,), (8,)), r"weight has shape \(7,\); it takes one value per column, \(8,\)"),
    (((4, 8), (8,), (8, 1)), r"bias has shape \(8, 1\)"),
    (((), None, None), "0-d"),
])
def test_a_call_it_cannot_run_is_named_in_one_line(shapes, match):
    with pytest.raises(ValueError, match=match):
        _declare(OPERATORS["layer_norm"], shapes, "float32", True)
    with pytest.raises(ValueError, match=r"dy has shape \(4, 9\) but y has \(4, 8\)"):
        _declare(OPERATORS["softmax_backward"], ((4, 8), (4, 9)), "float32", True)


def test_rows_over_int32_are_refused():
    with pytest.raises(ValueError, match="32-bit integers"):
        _declare(OPERATORS["softmax"], ((2**20, 2**12, 2),), "float32", True)


def test_host_arrays_are_named_without_a_gpu():
    import simtlab

    for call in (simtlab.layer_norm, simtlab.softmax, simtlab.rms_norm):
        with pytest.raises(TypeError, match="GPU array"):
            call(np.ones((3, 4), dtype=np.float32))


def test_torch_host_tensors_and_types_are_named_without_a_gpu():
    torch = pytest.importorskip("torch")

    import simtlab

    with pytest.raises(TypeError, match="simtlab.softmax: x: a PyTorch tensor on cpu"):
        simtlab.softmax(torch.randn(3, 4))
    with pytest.raises(TypeError, match="float32, bfloat16 or float16 tensors, got torch.float64"):
        simtlab.rms_norm(torch.randn(3, 4, dtype=torch.float64, device="meta"))


def test_the_torch_operators_trace_with_their_fakes():
    """On the meta device the fake implementations answer: shapes and types as the real calls'."""
    torch = pytest.importorskip("torch")

    import simtlab.torch as st

    x = torch.empty(2, 5, 7, device="meta", dtype=torch.bfloat16)
    w = torch.empty(7, device="meta", dtype=torch.float32)
    assert st.softmax(x, 1).shape == x.shape and st.log_softmax(x).dtype == torch.bfloat16
    assert st.layer_norm(x, w, w).shape == x.shape and st.rms_norm(x, w).shape == x.shape
    dx, dw, db = torch.ops.simtlab.norm_backward(x, w.to(x.dtype), x, 1e-5, False)
    assert dx.shape == x.shape and dw.shape == db.shape == (7,)


# --- the generic plan on the CPU: a fake array library and a recording launcher ----------------------

class _Array:
    def __init__(self, shape, dtype, ptr, strides=None):
        self.shape, self.dtype, self.ptr = tuple(shape), dtype, ptr
        size, st = 1, []
        for n in reversed(self.shape):
            st.append(size)
            size *= n
        self.strides = tuple(strides) if strides is not None else tuple(reversed(st))
        self.zeroed = False


class _Lib(ArrayLib):
    name = "fake"

    def __init__(self):
        self.next = 1 << 20

    def owns(self, x):
        return isinstance(x, _Array)

    def key(self, x):
        return (x.dtype, x.shape, x.strides, 0)

    def ptr(self, x):
        return x.ptr

    def describe(self, x):
        return x.dtype, x.shape, x.strides, 0

    def stream(self, device):
        return 77

    def current_device(self):
        return 0

    def allocator(self, shape, dtype, device):
        def new(first):
            self.next += 1 << 16
            return _Array(shape, dtype, self.next)
        return new

    def full(self, shape, dtype, device, value):
        x = self.allocator(shape, dtype, device)(None)
        x.value = value
        return x

    def fill_zero(self, x):
        x.zeroed = True


class _Packed:
    launches: list = []

    def __init__(self, function, grid, block, shared, kinds, device=0, cluster=None):
        import ctypes

        self.kinds, self.grid = kinds, grid
        self.values = [ctypes.c_uint64() if k in ("ptr", "map") else ctypes.c_int64() if k == "i64" else
                       ctypes.c_int32() if k == "i32" else ctypes.c_float() for k in kinds]
        self.params = [None] * len(kinds)  # (a tensor map's parameter: its 128 bytes' host address)

    def launch(self, stream):
        _Packed.launches.append((self.grid, [p if k == "map" else v.value for k, v, p in
                                             zip(self.kinds, self.values, self.params)], stream))


@pytest.fixture
def fake_plan(monkeypatch):
    import simtlab.device
    import simtlab.operator as operator

    vecs = []
    monkeypatch.setattr(simtlab.device, "require_gpu", lambda: None)
    monkeypatch.setattr(simtlab.device, "device_info", lambda index=None: H100)
    monkeypatch.setattr(operator, "PackedLaunch", _Packed)
    monkeypatch.setattr(operator, "prepare", lambda inst, launch, vec, info: vecs.append(vec) or object())
    monkeypatch.setattr(operator, "function_handle", lambda func: 1)
    _Packed.launches = []
    return operator, vecs


def test_a_plan_binds_each_slot_and_takes_the_unaligned_build_for_misaligned_addresses(fake_plan):
    operator, vecs = fake_plan
    lib = _Lib()
    op = OPERATORS["layer_norm_backward"]
    x, w, dy = _Array((300, 1024), "bfloat16", 4096), _Array((1024,), "bfloat16", 8192), _Array((300, 1024), "bfloat16",
                                                                                                    12288)
    plan = operator.OperatorPlan(op, lib, (x, w, dy), {"eps": 1e-5})
    dx, dw, db = plan.run((x, w, dy))
    (g0, first, s0), (g1, second, _) = _Packed.launches  # (rung 6 on the declared H100: no statistics slot)
    parts = first[9]
    assert s0 == 77 and first[:4] == [x.ptr, w.ptr, dy.ptr, dx.ptr] and first[6:8] == [300, 1024]
    assert abs(first[8] - 1e-5) < 1e-12 and first[10:] == [dw.ptr, db.ptr, 0] and second[-1] == 1
    assert g0[0] == 8 * parts and dx.shape == (300, 1024) and dw.shape == db.shape == (1024,)  # (clusters of 8)
    assert first[4] != first[5] and first[4] not in (dx.ptr, dw.ptr, db.ptr)  # two scratch buffers, fresh
    assert vecs == [True, True]
    odd = _Array((300, 1024), "bfloat16", 12290)  # 2 bytes off: the element-load build, declared once
    plan.run((x, w, odd))
    plan.run((x, w, odd))
    assert vecs == [True, True, False, False] and len(_Packed.launches) == 6
    assert plan.matches(x, w, dy) and not plan.matches(x, w, _Array((300, 1023), "bfloat16", 0))
    with pytest.raises(ValueError, match="make a plan for them"):
        plan(x, w, _Array((2, 1024), "bfloat16", 0))


def test_absent_weights_are_constants_and_empty_calls_launch_nothing(fake_plan):
    operator, _ = fake_plan
    lib = _Lib()
    x = _Array((0, 64), "float32", 4096)
    plan = operator.OperatorPlan(OPERATORS["layer_norm_backward"], lib, (x, None, _Array((0, 64), "float32", 8192)), {})
    dx, dw, db = plan.run((x, None, _Array((0, 64), "float32", 8192)))
    assert not _Packed.launches and dw.zeroed and db.zeroed  # (a sum over no rows: zeros)
    y = _Array((5, 64), "float32", 4096)
    plan = operator.OperatorPlan(OPERATORS["layer_norm"], lib, (y, None, None), {})
    plan.run((y, None, None))
    (_, values, _), = _Packed.launches
    ones, zeros = plan._constants
    assert values[1:3] == [ones.ptr, zeros.ptr] and (ones.value, zeros.value) == (1.0, 0.0)


def test_a_plan_names_a_bad_operand_in_one_line(fake_plan):
    operator, _ = fake_plan
    lib = _Lib()
    x = _Array((4, 8), "float32", 4096)
    cases = [((_Array((4, 8), "float64", 0),), TypeError, "x has dtype float64; it takes float32, bfloat16, float16"),
             ((_Array((4, 8), "float32", 0, strides=(16, 2)),), ValueError, r"element strides \(16, 2\)"),
             ((x, _Array((4, 8), "bfloat16", 0)), TypeError, "dy is bfloat16 but y is float32")]
    for operands, exc, match in cases:
        op = OPERATORS["softmax"] if len(operands) == 1 else OPERATORS["softmax_backward"]
        with pytest.raises(exc, match=match):
            operator.OperatorPlan(op, lib, operands, {})
    with pytest.raises(TypeError, match="takes 1 arrays"):
        operator.OperatorPlan(OPERATORS["softmax"], lib, (x, x), {})


class _Encoder:
    """A tensor-map encoder that records what it was made for and hands out a made-up address a buffer."""
    made: list = []

    def __init__(self, type_code, dims, strides, box, swizzle):
        self.dims, self.box = tuple(dims), tuple(box)
        _Encoder.made.append(self)

    def address(self, ptr):
        return 0x7000_0000 + ptr


def test_declared_tensor_maps_are_encoded_per_address_and_passed_by_value(fake_plan, monkeypatch):
    from simtlab.catalog import family

    operator, _ = fake_plan
    monkeypatch.setattr(operator, "TensorMapEncoder", _Encoder)
    _Encoder.made = []
    op = family("attention").operators[0]
    q, k, v = (_Array((2, 3, 300, 128), "bfloat16", 4096 * (i + 1) * 1024) for i in range(3))
    plan = operator.OperatorPlan(op, _Lib(), (q, k, v), {"causal": True})
    out, lse = plan.run((q, k, v))
    ((grid, args, stream),) = _Packed.launches
    assert args[:5] == [0x7000_0000 + q.ptr, 0x7000_0000 + k.ptr, 0x7000_0000 + v.ptr, out.ptr, lse.ptr]
    assert [(e.dims, e.box) for e in _Encoder.made] == [((128, 300, 6), (64, 128, 1))] * 3
    assert grid == (-(-300 // 128), 6, 1) and stream == 77
    q2 = _Array((2, 3, 300, 128), "bfloat16", 1 << 30)  # another address: encoded for it, same encoders
    plan.run((q2, k, v))
    assert _Packed.launches[-1][1][0] == 0x7000_0000 + q2.ptr and len(_Encoder.made) == 3


def test_the_norms_backward_takes_rung_5_where_no_cluster_fits(monkeypatch):
    """A GPU partition that runs none of rung 6's clusters (the driver counts 0) gets rung 5, not an
    error; rows not in 16-byte pieces and GPUs without clusters get it too."""
    from simtlab.ops import cluster_rows

    shapes = ((300, 4096), (4096,), (300, 4096))
    monkeypatch.setattr(cluster_rows, "active_clusters", lambda inst, launch, vec, device, size: 0)
    declared, _ = _declare(OPERATORS["layer_norm_backward"], shapes, "bfloat16", True)
    assert declared.steps[0].rung.stage == 5 and declared.align == 4 * 2
    odd = ((300, 4100), (4100,), (300, 4100))  # (8200 bytes a row: not in 16-byte pieces)
    assert _declare(OPERATORS["rms_norm_backward"], odd, "bfloat16", True)[0].steps[0].rung.stage == 5
    assert _declare(OPERATORS["rms_norm_backward"], shapes, "bfloat16", True, A100)[0].steps[0].rung.stage == 5


def test_softmax_takes_rung_6_only_from_its_measured_length(monkeypatch):
    """Until CLUSTER_FROM is measured the softmax operators run rung 5 at every length; once set, rows
    from it up in 16-byte pieces take rung 6 on Hopper, and rung 5 where no cluster fits, on GPUs
    without clusters, and for rows past LONGEST_ROW."""
    from simtlab.ops import cluster_rows

    shape = ((300, 8192),)
    monkeypatch.setattr(softmax, "CLUSTER_FROM", None)
    assert _declare(OPERATORS["softmax"], shape, "bfloat16", True)[0].steps[0].rung.stage == 5
    monkeypatch.setattr(softmax, "CLUSTER_FROM", 4096)
    declared = _declare(OPERATORS["softmax"], shape, "bfloat16", True)[0]
    assert declared.steps[0].rung.stage == 6 and declared.align == 16 and "CLUSTER" in declared.what
    assert _declare(OPERATORS["softmax"], ((300, 2048),), "bfloat16", True)[0].steps[0].rung.stage == 5
    assert _declare(OPERATORS["softmax"], ((3, 65544),), "bfloat16", True)[0].steps[0].rung.stage == 5
    assert _declare(OPERATORS["softmax"], shape, "bfloat16", True, A100)[0].steps[0].rung.stage == 5
    monkeypatch.setattr(cluster_rows, "active_clusters", lambda inst, launch, vec, device, size: 0)
    assert _declare(OPERATORS["log_softmax_backward"], (shape[0], shape[0]), "float32", True)[0].steps[0].rung.stage == 5
