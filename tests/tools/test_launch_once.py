import pytest

from simtlab.catalog import family
from simtlab.tools.launch_once import with_overrides


def test_overrides_go_over_the_chosen_parameters():
    rung = family("gemm_tc").rung("wgmma_cluster")
    base = {"DT": 1, "KEEP": 5}
    assert with_overrides(rung, base, ["WAIT=1", "KEEP=4"]) == {"DT": 1, "KEEP": 4, "WAIT": 1}
    assert base == {"DT": 1, "KEEP": 5}  # (not changed in place)


@pytest.mark.parametrize("text, says", [("WAIT", "NAME=integer"), ("WAIT=x", "NAME=integer"),
                                        ("NOPE=1", "no parameter 'NOPE'")])
def test_bad_overrides_are_named(text, says):
    with pytest.raises(SystemExit, match=says):
        with_overrides(family("gemm_tc").rung("wgmma_cluster"), {}, [text])
