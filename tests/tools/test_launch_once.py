import pytest

from simtlab.catalog import family
from simtlab.launch import choose_params
from simtlab.ops.gemm_tc import TcProblem
from simtlab.tools.launch_once import parse_params


def test_params_go_over_the_size_defaults():
    rung = family("gemm_tc").rung("wgmma_cluster")
    explicit = parse_params(["LEAN=0", "KEEP=4"])
    assert explicit == {"LEAN": 0, "KEEP": 4}
    p = TcProblem(4096, 4096, 4096, "bfloat16")  # (its size defaults: DT 1, KEEP 5, OUT 0, WIDE 1, TA 0, TB 0)
    assert choose_params(rung, p, None, None, explicit=explicit) == {"DT": 1, "KEEP": 4, "OUT": 0, "WIDE": 1, "LEAN": 0,
                                                                      "TA": 0, "TB": 0}


@pytest.mark.parametrize("text", ["LEAN", "LEAN=x"])
def test_malformed_params_are_named(text):
    with pytest.raises(SystemExit, match="NAME=integer"):
        parse_params([text])


def test_a_parameter_the_rung_lacks_is_named():
    rung = family("gemm_tc").rung("wgmma_cluster")
    with pytest.raises(ValueError, match="has no parameter 'NOPE'"):
        rung.params("sm_90", parse_params(["NOPE=1"]))
