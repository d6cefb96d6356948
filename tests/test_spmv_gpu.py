"""The SpMV ladder on the GPU: every rung on every matrix class - uniform, power-law and banded rows,
empty rows, a single dense row, 1 x 1 - with alpha and beta, on a poisoned y (three runs: a rung
that leaves state behind shows), within the bound of the float64 product; cuSPARSE on the same."""

import pytest

from simtlab.catalog import family
from simtlab.verify import compare

pytestmark = [pytest.mark.gpu, pytest.mark.spmv]

SIZES = ["1:uniform", "1000:uniform", "3001:powerlaw", "999:banded", "777:dense", "1001:sparse", "100003:powerlaw",
         "65536:dense"]


@pytest.mark.parametrize("rung", family("spmv").rungs, ids=lambda r: r.name)
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (-1.5, 0.75)])
def test_spmv_rung(rung, size, alpha, beta):
    import cupy

    from simtlab.device import device_info
    from simtlab.launch import build, choose_params, runner
    from simtlab.ops import spmv

    dev = device_info()
    p = spmv.parse_size(size, alpha=alpha, beta=beta)
    ws = spmv.workspace(p, seed=p.n)
    inst = build(rung, choose_params(rung, p, dev, None), dev.arch)
    run = runner(inst, p, ws, None, dev)
    for _ in range(3):
        ws.poison()
        run()
    cupy.cuda.get_current_stream().synchronize()
    assert not bool(cupy.isnan(ws.y).any()), (rung.name, size)
    v = compare(ws.y, ws.expected(), spmv.tolerance(p, ws))
    assert v.ok, (rung.name, size, alpha, beta, v.reason)


@pytest.mark.parametrize("size", ["1000:uniform", "3001:powerlaw", "777:dense"])
def test_cusparse_reference_agrees(size):
    import cupy

    from simtlab.ops import spmv

    p = spmv.parse_size(size, alpha=2.0, beta=-1.0)
    ws = spmv.workspace(p, seed=1)
    ws.poison()
    spmv.references()[0].make(ws)()
    cupy.cuda.get_current_stream().synchronize()
    assert compare(ws.y, ws.expected(), spmv.tolerance(p, ws)).ok


@pytest.mark.parametrize("params", [{"BLOCK": 128, "IPT": 4}, {"BLOCK": 512, "IPT": 8}, {"BLOCK": 256, "IPT": 7}])
def test_merge_path_tiles_of_any_shape(params):
    """Tiles of the tuner's space (an odd IPT among them) on the power-law and dense matrices."""
    import cupy

    from simtlab.device import device_info
    from simtlab.launch import build, runner
    from simtlab.ops import spmv

    dev = device_info()
    for size in ("3001:powerlaw", "65536:dense", "1001:sparse"):
        p = spmv.parse_size(size, beta=0.5)
        ws = spmv.workspace(p, seed=2)
        inst = build(family("spmv").rung("merge_path"), params, dev.arch)
        ws.poison()
        runner(inst, p, ws, None, dev)()
        cupy.cuda.get_current_stream().synchronize()
        assert compare(ws.y, ws.expected(), spmv.tolerance(p, ws)).ok, (params, size)
