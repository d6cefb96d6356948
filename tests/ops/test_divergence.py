import pytest

from simtlab.catalog import family
from simtlab.ops import boundary, branch


def test_problems():
    assert branch.parse_size("1000").flops == 2 * 63 * 1000 and branch.parse_size("7").bytes == 56
    assert boundary.parse_size("10").bytes == 160 and boundary.tolerance(boundary.parse_size("10")) == 0.0
    with pytest.raises(ValueError):
        branch.parse_size("0")
    assert 0 < branch.tolerance(branch.parse_size("8")) < 1e-4


@pytest.mark.parametrize("name", ["branch", "boundary"])
def test_geometry_covers(name):
    fam = family(name)
    op = fam.op()
    for n in (1, 255, 256, 257, 10**6 + 3):
        for rung in fam.rungs:
            L = op.geometry(rung.params("sm_90"), op.parse_size(str(n)))
            assert L.grid[0] * L.block[0] >= n > (L.grid[0] - 1) * L.block[0]
