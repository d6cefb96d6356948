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
