import pytest

from simtlab.catalog import family
from simtlab.ops import stencil as st


def test_parse_labels_and_counts():
    p = st.parse_size("17x33x65")
    assert (p.NZ, p.NY, p.NX, p.label, p.points) == (17, 33, 65, "17x33x65", 17 * 33 * 65)
    assert st.parse_size("512").label == "512x512x512"
    assert p.bytes == 8 * p.points and p.flops == 8 * p.points
    for bad in ("0", "2x3", "1x0x5", "ax1x1"):
        with pytest.raises(ValueError):
            st.parse_size(bad)
    assert 0 < st.tolerance(p) < 1e-5


@pytest.mark.parametrize("rung", family("stencil").rungs, ids=lambda r: r.name)
@pytest.mark.parametrize("shape", [(1, 1, 1), (17, 33, 65), (512, 512, 512), (3, 1000, 7)])
def test_every_point_has_a_thread(rung, shape):
    p = st.StencilProblem(*shape)
    params = rung.params("sm_90")
    L = rung.geometry(params, p)
    assert L.grid[0] * params["BX"] >= p.NX and (L.grid[0] - 1) * params["BX"] < p.NX
    rows = params["BY"] * params.get("RY", 1)
    assert L.grid[1] * rows >= p.NY and (L.grid[1] - 1) * rows < p.NY
    zc = params.get("ZC", 1)
    assert L.grid[2] * zc >= p.NZ and (L.grid[2] - 1) * zc < p.NZ


def test_blocking_requests_about_one_load_per_point():
    p = st.parse_size("512")
    fam = family("stencil")
    naive, blocked, pipelined, ring = (r.requested_bytes(r.params("sm_90"), p) for r in fam.rungs)
    assert naive == 4 * 8 * p.points
    assert blocked < 1.5 * p.bytes < naive / 2
    assert pipelined < blocked  # the taller tile's ring costs less per point
    assert ring < 1.25 * p.bytes  # wide tiles: the halo ring and the two extra planes a chunk add < 25%


def test_async_ring_fits_two_blocks_an_sm():
    params = family("stencil").rung("async_ring").params("sm_90")
    L = st.geometry_async_ring(params, st.parse_size("512"))
    assert L.shared == 4 * (params["P"] + 3) * (params["BY"] * params["RY"] + 2) * (params["BX"] + 8)
    assert 2 * L.shared <= 227 * 1024  # two resident blocks of 512 threads keep 2 x P planes in flight


def test_async_ring_refuses_planes_past_32_bit_offsets():
    params = family("stencil").rung("async_ring").params("sm_90")
    with pytest.raises(ValueError, match="32-bit offsets"):
        st.geometry_async_ring(params, st.StencilProblem(2, 65536, 32768))


@pytest.mark.parametrize("device", ["sm_90", "sm_80"])
@pytest.mark.parametrize("shape", [(1, 1, 1), (17, 33, 65), (300, 7, 1001)])
def test_the_operator_s_launch_fits_and_passes_the_kernels_parameters(device, shape):
    import numpy as np

    from declared_checks import A100, H100, check_steps, declare
    from simtlab.family import IN, OUT

    dev = H100 if device == "sm_90" else A100
    op = family("stencil").operators[0]
    declared, build_once = declare(op, (shape,), "float32", True, {"c0": 0.5, "c1": -0.25}, dev)
    (step,) = declared.steps
    assert step.rung.stage == 4 and declared.outputs == ((shape, "float32"),)
    check_steps(declared, build_once, (shape,), dev)
    nz, ny, nx = shape
    assert step.args == ((IN, 0), (OUT, 0), np.int32(nx), np.int32(ny), np.int32(nz), np.float32(0.5),
                         np.float32(-0.25))
    assert step.launch == family("stencil").rung(4).geometry(step.params, st.StencilProblem(*shape), dev)


def test_what_the_operator_cannot_take_is_named():
    from declared_checks import H100

    op = family("stencil").operators[0]
    with pytest.raises(ValueError, match=r"3-D grid \(NZ, NY, NX\), got shape \(4, 5\)"):
        op.declare(((4, 5),), "float32", {}, H100, True, None)
    with pytest.raises(ValueError, match="32-bit offsets"):
        op.declare(((2, 65536, 32768),), "float32", {}, H100, True, None)


def test_the_torch_operator_traces_with_its_fake():
    torch = pytest.importorskip("torch")

    import simtlab.torch as st

    u = torch.empty(5, 6, 7, device="meta")
    assert st.stencil(u, 0.5, 0.1).shape == u.shape
    with pytest.raises(TypeError, match="float32"):
        st.stencil(u.double())
    with pytest.raises(ValueError, match="3-D grid"):
        st.stencil(torch.empty(4, 5, device="meta"))
