import pytest

from simtlab.catalog import family
from simtlab.ops import intrinsics as it


def test_parse_and_counts():
    p = it.parse_size("exp:2^24")
    assert (p.op, p.n, p.reps, p.label) == ("exp", 2**24, it.DEFAULT_REPS, "exp:16777216")
    q = it.parse_size("int:1000:r4")
    assert (q.op, q.reps, q.label, q.operations) == ("int", 4, "int:1000:r4", 1000 * 17)
    for bad in ("exp", "log:100", "exp:0", "exp:10:4", "exp:10:rx", "exp:10:r5000"):
        with pytest.raises(ValueError):
            it.parse_size(bad)
    assert it.op_params(q) == {"OP": 2, "REPS": 4}
    assert it.tolerance(q) == 0 < it.tolerance(it.parse_size("div:10")) < it.tolerance(p)


def test_the_chains_survive_compilation():
    """The timing chain must not be optimised away: the fast and precise SASS differ in size, and
    the chain's operations appear once per unrolled step."""
    from simtlab.analyze.sass import kernel_sass
    from simtlab.launch import build

    fam = family("intrinsics")
    counts = {}
    for rung in fam.rungs:
        for op in range(3):
            inst = build(rung, {"OP": op, "REPS": 64}, "sm_90")
            counts[rung.name, op] = kernel_sass(inst.cubin, inst.expression(None)).instructions
    for op in range(3):
        assert counts["precise", op] > 1.25 * counts["fast", op] > 100  # without the chain: about 50


def test_float32_ulp():
    import numpy as np

    ref = np.array([1.0, 1.5, 2.0, 3.0e-39, 0.0, -4.0, np.float64(np.float32(5.5e34))])
    expect = [np.spacing(np.float32(abs(v))) for v in ref]
    assert np.array_equal(it.float32_ulp(ref), np.array(expect, np.float64))
