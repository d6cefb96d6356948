import numpy as np
import pytest

from simtlab.catalog import family
from simtlab.ops import reduction as red


class Dev:
    sms, max_threads_per_sm = 132, 2048


def test_parse_and_counts():
    p = red.parse_size("1000003")
    assert (p.n, p.op, p.label) == (1000003, "sum", "1000003")
    m = red.parse_size("2^20:max")
    assert (m.n, m.op, m.label) == (2**20, "max", "1048576:max")
    assert p.bytes == 4 * 1000003 + 4 and p.flops == 1000003
    for bad in ("0", "10:min", "x"):
        with pytest.raises(ValueError):
            red.parse_size(bad)


def test_operator_comes_from_the_problem():
    assert red.operator_params(red.parse_size("7:max")) == {"OP": 1}
    rung = family("reduction").rung(3)
    assert rung.name_expression(rung.params("sm_90", red.operator_params(red.parse_size("7")))) == \
        "reduce_sequential<256, 0>"


def test_tolerance_policy():
    assert red.tolerance(red.parse_size("100:max")) == 0.0
    t = red.tolerance(red.parse_size(str(2**28)))
    assert 1e-5 < t < 1e-4  # catches a lost element of a 2^28 sum of unit-variance data (~5e-5 relative)

    class Ws:
        x = np.array([1.0, -1.0 + 1e-6], dtype=np.float32)

    assert red.tolerance(red.ReduceProblem(2), Ws()) > 1e-2  # ill-conditioned: near-total cancellation


@pytest.mark.parametrize("rung", [r for r in family("reduction").rungs if not r.can(red.SEGMENTS)],
                         ids=lambda r: r.name)  # (rung 10's segments: tests/ops/test_reduce_transpose_operators.py)
@pytest.mark.parametrize("n", [1, 2, 255, 256, 257, 1000003, 2**28])
def test_passes_end_in_one_block_and_cover_the_input(rung, n):
    passes = red.plan_passes(rung, {"BLOCK": 256, "OP": 0}, n, Dev())
    if rung.can(red.SINGLE_LAUNCH):  # one launch; its last block finishes the job
        assert rung.name == "vectorized_single_pass" and passes == [(min(-(-n // 1024), 132 * 8), n)]
        return
    assert passes[0][1] == n and passes[-1][0] == 1
    for (grid, count), (_, next_count) in zip(passes, passes[1:]):
        assert next_count == grid  # each pass reads the previous pass's partials
    grid, count = passes[0]
    per_block = {red.ONE: 256, red.TWO: 512}.get(rung.geometry.keywords["kind"])
    if per_block:
        assert grid * per_block >= count > (grid - 1) * per_block
    else:
        assert grid <= 132 * 8
    assert len(passes) <= 4
