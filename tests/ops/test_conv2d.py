import pytest

from simtlab.catalog import family
from simtlab.ops import conv2d as cv


def test_parse_labels_and_counts():
    p = cv.parse_size("1000x1013:r7")
    assert (p.H, p.W, p.R, p.taps, p.label) == (1000, 1013, 7, 225, "1000x1013:r7")
    assert cv.parse_size("8192").label == "8192x8192:r3"
    assert p.flops == 2 * 225 * 1000 * 1013 and p.bytes == 8 * 1000 * 1013 + 4 * 225
    for bad in ("0", "5x0", "64:r0", "64:r8", "64:3", "1x2x3"):
        with pytest.raises(ValueError):
            cv.parse_size(bad)
    assert cv.radius_params(p) == {"R": 7}
    assert 0 < cv.tolerance(p) < 1e-4


@pytest.mark.parametrize("rung", family("conv2d").rungs, ids=lambda r: r.name)
@pytest.mark.parametrize("shape", [(1, 1), (1000, 1013), (33, 65), (8192, 8192)])
def test_every_pixel_has_a_thread(rung, shape):
    p = cv.ConvProblem(*shape, 7)
    params = rung.params("sm_90", rung.size_defaults(p) if rung.size_defaults else None)
    L = rung.geometry(params, p)
    cols = params["BX"] * (params.get("TX", cv.TX) if rung.stage >= 4 else 1)
    rows = params["BY"] * params.get("TY", 1) * params.get("NT", 1)
    assert L.grid[0] * cols >= p.W and (L.grid[0] - 1) * cols < p.W
    assert L.grid[1] * rows >= p.H and (L.grid[1] - 1) * rows < p.H


def test_tiling_cuts_the_requested_bytes():
    p = cv.parse_size("8192:r3")
    fam = family("conv2d")
    req = {r.name: r.requested_bytes(r.params("sm_90", r.size_defaults(p) if r.size_defaults
                                                        else None), p)
           for r in fam.rungs}
    assert req["naive"] > req["constant"] > 10 * req["smem_tile"]
    assert req["smem_tile"] < 2 * p.bytes and req["register_x"] < 1.5 * p.bytes
    assert req["register_xy"] < req["register_x"]  # taller tiles, less halo per output
    assert req["pipelined"] < 1.3 * p.bytes  # 16-byte-rounded halo columns, same rows


@pytest.mark.parametrize("radius", range(1, 8))
def test_pipelined_tiles_are_16_byte_rows_within_shared_memory(radius):
    p = cv.ConvProblem(8192, 8192, radius)
    rung = family("conv2d").rung("pipelined")
    params = rung.params("sm_90", cv.radius_rows_params(p))
    th, tw = cv.pipelined_tile(params, radius)
    assert tw % 4 == 0 and cv.halo_pad(radius) >= radius and cv.halo_pad(radius) % 4 == 0
    assert th == params["BY"] * params["TY"] + 2 * radius
    L = cv.geometry_pipelined(params, p)
    assert L.shared == 2 * 4 * th * tw <= 99 * 1024  # two stages, room for two blocks an SM
    assert cv.patch_rows(3) == 4 and cv.patch_rows(7) == 2


def test_tma_rung_boxes_and_stages():
    """Rung 7 reads the image as a 2-D tensor in whole haloed tiles; each stage starts 128-byte aligned."""
    rung = family("conv2d").rung("tma")
    for radius in range(1, 8):
        p = cv.ConvProblem(1000, 1013, radius)
        params = rung.params("sm_90", cv.tma_params(p))
        th, tw = cv.pipelined_tile(params, radius)
        box = cv.tma_box(params, p, 1016)
        assert box.dims == (1016, 1000) and box.strides == (4 * 1016,) and box.box == (tw, th)
        assert cv.tma_stage_bytes(params, radius) % 128 == 0 >= 4 * th * tw - cv.tma_stage_bytes(params, radius)
        assert cv.geometry_tma(params, p).shared <= 99 * 1024
    from simtlab.ops.tma import TmaBox

    with pytest.raises(ValueError, match="16 bytes"):
        TmaBox((1013, 8), (4 * 1013,), (136, 38))
    with pytest.raises(ValueError, match="1-256"):
        TmaBox((4096, 8), (4 * 4096,), (264, 38))


@pytest.mark.parametrize("radius", [1, 3])
def test_rung6_takes_the_block_shape_its_measured_table_puts_first(radius):
    """Where rung 6's whole space was measured on the H200 (tests/fixtures), its size defaults are
    that table's optimum."""
    from pathlib import Path

    from simtlab.space import Space
    from simtlab.tune.replay import load_table

    fam = family("conv2d")
    rung = fam.rung("pipelined")
    p = fam.op().parse_size(f"8192:r{radius}")
    params = {**rung.defaults, **rung.size_defaults(p, None, None)}
    t = load_table(Path(__file__).resolve().parents[1] / "fixtures" / f"conv2d_pipelined_h200_8192_r{radius}.json")
    assert t.times[Space.key({k: params[k] for k in t.params})] == t.optimum


@pytest.mark.parametrize("radius, size", [(3, 8192), (7, 4096)])
def test_rung_8_takes_the_fastest_shape_its_tables_measured(radius, size):
    from pathlib import Path

    from simtlab.space import Space
    from simtlab.tune.replay import load_table

    rung = family("conv2d").rung("filter_arg")
    p = cv.parse_size(f"{size}:r{radius}")
    params = {**rung.defaults, **rung.size_defaults(p, None, None)}
    t = load_table(Path(__file__).resolve().parents[1] / "fixtures" / f"conv2d_filter_arg_h100_{size}_r{radius}.json")
    assert t.times[Space.key({k: params[k] for k in t.params})] == t.optimum
    assert params == {**rung.defaults, **cv.pipelined_params(p), **cv.FILTER_ARG_MEASURED[radius]}


@pytest.mark.parametrize("shape, d", [((1, 1), 3), ((1000, 1013), 7), ((4, 3, 77, 130), 15), ((8192, 8192), 3)])
def test_the_operator_s_launch_fits_and_passes_the_kernels_parameters(shape, d):
    import numpy as np

    from declared_checks import A100, H100, check_steps, declare
    from simtlab.family import IN, OUT

    op = family("conv2d").operators[0]
    for dev in (H100, A100):
        declared, build_once = declare(op, (shape, (d, d)), "float32", True, {}, dev)
        (step,) = declared.steps
        assert step.rung.stage == 8 and step.params["R"] == d // 2 and declared.outputs == ((shape, "float32"),)
        check_steps(declared, build_once, (shape, (d, d)), dev)
        h, w = shape[-2:]
        assert step.args == ((IN, 0), (IN, 1), (OUT, 0), np.int32(h), np.int32(w))
        assert step.launch.grid[2] == int(np.prod(shape[:-2])) if len(shape) > 2 else step.launch.grid[2] == 1


def test_what_the_operator_cannot_take_is_named():
    from declared_checks import H100

    op = family("conv2d").operators[0]
    for shapes, match in [(((5,), (3, 3)), r"images \(\.\.\., H, W\)"), (((5, 5), (4, 4)), "odd size 3..15"),
                          (((5, 5), (3, 5)), "odd size"), (((5, 5), (17, 17)), "odd size"),
                          (((70000, 4, 4), (3, 3)), "65535 in z")]:
        with pytest.raises(ValueError, match=match):
            op.declare(shapes, "float32", {}, H100, True, None)


def test_the_torch_operator_traces_with_its_fake():
    torch = pytest.importorskip("torch")

    import simtlab.torch as st

    x, w = torch.empty(2, 3, 40, 50, device="meta"), torch.empty(5, 5, device="meta")
    assert st.conv2d(x, w).shape == x.shape
    with pytest.raises(TypeError, match="float32"):
        st.conv2d(x.half(), w.half())
    with pytest.raises(ValueError, match="odd size"):
        st.conv2d(x, torch.empty(4, 4, device="meta"))
