"""simtlab.sort and simtlab.argsort as declared (sort rung 5), checked without a GPU: every launch
a call makes is built for sm_90, fits without spilling and passes exactly the kernel's parameters;
the key modes (float, int32, uint32, each descending) reach the kernel's FLOAT argument; the
histogram, tickets and look-back words are cleared before each call; argsort's values are a
constant 0..n-1 made once per plan."""

import numpy as np
import pytest

from declared_checks import check_steps, declare
from simtlab.catalog import family
from simtlab.family import CONST
from simtlab.ops import sort

OPS = {o.name: o for o in family("sort").operators}


def _declare(op, shapes, dtype, descending):
    return declare(op, shapes, dtype, True, {"descending": descending})


@pytest.mark.parametrize("dtype", sort.SORT_TYPES)
@pytest.mark.parametrize("descending", [False, True], ids=["ascending", "descending"])
@pytest.mark.parametrize("how", ["keys", "pairs", "argsort"])
def test_every_sort_launch_fits_and_passes_the_kernels_parameters(dtype, descending, how):
    op = OPS["argsort" if how == "argsort" else "sort"]
    for n in (1, 5, 4097, 1 << 24):
        shapes = ((n,),) if how == "argsort" else ((n,), (n,) if how == "pairs" else None)
        declared, build_once = _declare(op, shapes, dtype, descending)
        mode = sort.KEY_MODE[dtype] | (sort.DESCENDING if descending else 0)
        first = declared.steps[0]
        assert first.params["FLOAT"] == mode and first.params["PAIRS"] == (how != "keys")
        assert declared.cleared == (0, 1, 2) and declared.align == 4
        radix, passes = sort.radix_digits(first.params)
        assert len(declared.steps) == 2 + passes
        assert [int(s.args[-1]) for s in declared.steps[2:]] == list(range(passes))
        check_steps(declared, build_once, shapes)
        if how == "argsort":
            assert declared.constants == (((n,), "int32", sort.IOTA),) and first.args[4] == (CONST, 0)
            assert declared.outputs[1] == ((n,), "int32")
        elif how == "keys":
            assert first.args[4:7] == (np.int64(0),) * 3 and len(declared.outputs) == 1


def test_what_the_sort_cannot_take_is_named():
    with pytest.raises(ValueError, match="one row of keys"):
        _declare(OPS["sort"], ((3, 4), None), "float32", False)
    with pytest.raises(ValueError, match="values have shape"):
        _declare(OPS["sort"], ((8,), (7,)), "int32", False)
    with pytest.raises(ValueError, match="at most 2"):
        _declare(OPS["argsort"], ((2**31,),), "float32", False)


def test_the_torch_sort_traces_with_its_fakes():
    torch = pytest.importorskip("torch")

    import simtlab.torch as st

    k = torch.empty(9, device="meta")
    assert st.sort(k).shape == (9,) and st.argsort(k, True).dtype == torch.int64
    keys, vals = st.sort(k, torch.empty(9, device="meta", dtype=torch.int32))
    assert vals.dtype == torch.int32
    with pytest.raises(TypeError, match="float32, int32 or uint32 keys"):
        st.sort(k.to(torch.float64))
    with pytest.raises(ValueError, match="one row of keys"):
        st.argsort(torch.empty(2, 3, device="meta"))
