import math

import numpy as np
import pytest

from simtlab.verify import compare, dot_tolerance, elementwise_tolerance, relative_error


@pytest.fixture
def ref():
    return np.random.default_rng(1).uniform(-1, 1, size=(37, 53))


def test_exact_passes(ref):
    v = compare(ref.astype(np.float32), ref, 1e-6)
    assert v.ok and v.rel_error < 1e-7


def test_poison_left_in_one_element_fails(ref):
    out = ref.copy()
    out[5, 7] = np.nan  # an element the kernel never wrote
    v = compare(out, ref, 1.0)
    assert not v.ok and "(5, 7)" in v.reason and "never written" in v.reason


def test_inf_where_reference_is_finite_fails(ref):
    out = ref.copy()
    out[0, 0] = np.inf
    assert not compare(out, ref, 1.0).ok


def test_nan_matching_the_reference_passes(ref):
    r = ref.copy()
    r[2, 2] = np.nan
    r[3, 3] = -np.inf
    out = r.copy()
    assert compare(out, r, 1e-12).ok
    out[3, 3] = np.inf  # wrong sign of infinity
    assert not compare(out, r, 1e-12).ok
    out[3, 3] = 0.0
    assert not compare(out, r, 1e-12).ok


def test_tolerance_boundary(ref):
    noise = np.random.default_rng(2).standard_normal(ref.shape)
    out = ref + noise * (1e-4 * np.linalg.norm(ref) / np.linalg.norm(noise))
    err = relative_error(out, ref)
    assert err == pytest.approx(1e-4, rel=1e-9)
    assert compare(out, ref, 1.01e-4).ok
    assert not compare(out, ref, 0.99e-4).ok


def test_shape_mismatch(ref):
    v = compare(ref[:, :-1], ref, 1.0)
    assert not v.ok and "shape" in v.reason


def test_zero_reference_uses_absolute_error():
    z = np.zeros(8)
    assert compare(z, z, 1e-12).ok
    assert not compare(z + 1e-3, z, 1e-6).ok


def test_tolerance_policy():
    u32 = 2.0**-24
    assert dot_tolerance("float32", 1) == pytest.approx(24 * u32)
    assert dot_tolerance("float32", 4096) == pytest.approx(u32 * (8 * 64 + 16))
    # an accidental TF32 path (~2e-4 relative error) must not pass the fp32 bound at our sizes
    assert dot_tolerance("float32", 8192) < 1e-4
    assert elementwise_tolerance("float32") == 2 * u32
    with pytest.raises(ValueError):
        dot_tolerance("float32", 0)
    with pytest.raises(ValueError, match="no tolerance policy"):
        dot_tolerance("int8", 4)


def test_fp32_accumulation_stays_inside_the_bound():
    # Sequential fp32 dot products of random data against float64: the policy must hold with margin.
    rng = np.random.default_rng(3)
    for k in (1, 17, 1000, 20000):
        a = rng.uniform(-1, 1, (16, k)).astype(np.float32)
        b = rng.uniform(-1, 1, (k, 8)).astype(np.float32)
        acc = np.zeros((16, 8), np.float32)
        for i in range(k):  # naive order, the worst a rung does
            acc += np.outer(a[:, i], b[i, :])
        ref = a.astype(np.float64) @ b.astype(np.float64)
        err = relative_error(acc, ref)
        assert err < dot_tolerance("float32", k) / 2, (k, err)
        assert math.isfinite(err)
