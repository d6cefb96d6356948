import pytest

from simtlab.catalog import family
from simtlab.ops import transpose as tr


def test_parse_and_counts():
    p = tr.parse_size("1000x1013")
    assert (p.rows, p.cols, p.label, p.bytes, p.flops) == (1000, 1013, "1000x1013", 8 * 1000 * 1013, 0)
    assert tr.parse_size("64").cols == 64
    for bad in ("0x5", "1x2x3", "ax3"):
        with pytest.raises(ValueError):
            tr.parse_size(bad)
    assert tr.tolerance(p) == 0.0


@pytest.mark.parametrize("rung", family("transpose").rungs, ids=lambda r: r.name)
@pytest.mark.parametrize("shape", [(1, 1), (1, 1000), (1000, 1), (1000, 1013), (33, 65), (4096, 4096)])
def test_every_element_has_a_block(rung, shape):
    p = tr.TransposeProblem(*shape)
    params = rung.params("sm_90")
    L = rung.geometry(params, p)
    t = params["TILE"]
    assert L.grid[0] * t >= p.cols and L.grid[1] * t >= p.rows
    assert (L.grid[0] - 1) * t < p.cols and (L.grid[1] - 1) * t < p.rows
    assert L.threads == 256
