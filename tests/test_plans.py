"""What a plan refuses before anything runs, with stand-in arrays of a stand-in library (CPU):
operands that do not multiply, wrong types, layouts it cannot read, two GPUs."""

import pytest

from simtlab.arrays import ArrayLib
from simtlab.ops.gemm_plans import GemmPlan, TcPlan


class Stand(ArrayLib):
    """Arrays as dicts of what a library reports: type, shape, element strides, device."""

    name = "stand-in"

    def owns(self, x):
        return isinstance(x, dict)

    def describe(self, x):
        return x["dtype"], x["shape"], x["strides"], x["gpu"]


def arr(shape, dtype="float32", gpu=0, transposed=False, strides=None):
    if strides is None and len(shape) == 1:
        strides = (1,)
    if strides is None:
        rows, cols = shape[-2:]
        strides = (1, rows) if transposed else (cols, 1)
        if len(shape) == 3:
            strides = (rows * cols,) + strides
    return {"dtype": dtype, "shape": tuple(shape), "strides": tuple(strides), "gpu": gpu}


@pytest.fixture(autouse=True)
def _no_gpu_needed(monkeypatch):
    import simtlab.device as device

    monkeypatch.setattr(device, "require_gpu", lambda: None)


CASES = [  # (plan, operands, error, what it must say)
    (GemmPlan, (arr((64, 32)), arr((32, 16), gpu=1)), ValueError, "A is on GPU 0 and B on GPU 1"),
    (TcPlan, (arr((64, 32), "bfloat16"), arr((32, 16), "bfloat16", gpu=1)), ValueError, "both operands take one GPU"),
    (GemmPlan, (arr((64, 32)), arr((16, 16))), ValueError, "inner dimensions differ"),
    (TcPlan, (arr((64, 32), "float16"), arr((16, 16), "float16")), ValueError, "inner dimensions differ"),
    (GemmPlan, (arr((64, 32), "float16"), arr((32, 16))), TypeError, "A has dtype float16; this kernel takes float32"),
    (TcPlan, (arr((64, 32)), arr((32, 16))), TypeError, "takes float16 or bfloat16"),
    (TcPlan, (arr((64, 32), "bfloat16"), arr((32, 16), "float16")), TypeError, "A is bfloat16 and B is float16"),
    (TcPlan, (arr((64, 32), "float16"), arr((2, 32, 16), "float16")), ValueError, "both 2-D"),
    (TcPlan, (arr((3, 64, 32), "float16"), arr((2, 32, 16), "float16")), ValueError, "A has 3 matrices and B 2"),
    (GemmPlan, (arr((64,)), arr((64, 16))), ValueError, "must be 2-D"),
    (GemmPlan, (arr((64, 32), strides=(64, 2)), arr((32, 16))), ValueError, "element strides \\(64, 2\\)"),
    (TcPlan, (arr((64, 32), "float16"), arr((32, 16), "float16", strides=(0, 1))), ValueError, "element strides"),
    (TcPlan, (arr((2, 64, 32), "float16", strides=(0, 32, 1)), arr((2, 32, 16), "float16")), ValueError,
     "element strides"),  # a broadcast batch
    (GemmPlan, (arr((64, 32)), [1.0]), TypeError, "pass one library's arrays"),
    (TcPlan, (arr((0, 32), "float16"), arr((32, 16), "float16")), ValueError, "must be >= 1"),
    (GemmPlan, (arr((64, 32)), arr((32, 16)), arr((64, 16), transposed=True)), ValueError, "C-contiguous C"),
    (GemmPlan, (arr((64, 32)), arr((32, 16)), arr((64, 8))), ValueError, "C has shape \\(64, 8\\)"),
    (TcPlan, (arr((64, 32), "float16"), arr((32, 16), "float16"), arr((64, 16), "float16")), ValueError,
     "C is float16 \\(64, 16\\); this product is float32"),
]


@pytest.mark.parametrize("plan, operands, error, says", CASES, ids=lambda c: getattr(c, "__name__", None))
def test_plans_name_what_they_refuse(plan, operands, error, says):
    with pytest.raises(error, match=says):
        plan(Stand(), *operands)


def test_out_dtype_is_fp32_or_the_inputs():
    with pytest.raises(ValueError, match="out_dtype is 'float32' or the inputs' own type"):
        TcPlan(Stand(), arr((64, 32), "float16"), arr((32, 16), "float16"), out_dtype="bfloat16")


def test_tf32x3_picks_float64_sums_below_min_k_then_rung_11_on_hopper_and_12_elsewhere():
    """precision="tf32x3": float64 sums (rung 8) below TF32X3_MIN_K on any GPU, rung 11 on Hopper,
    rung 12 from sm_80, an error below sm_80 or for a rung that is not one of its two."""
    from simtlab.ops.gemm_plans import TF32X3_MIN_K, tf32x3_rung

    k = TF32X3_MIN_K
    assert [tf32x3_rung("best", k - 1, cc, "sm_x") for cc in ((9, 0), (8, 0), (7, 0))] == ["warptiling"] * 3
    assert tf32x3_rung("best", k, (9, 0), "sm_90") == "tf32x3"
    assert tf32x3_rung("best", k, (8, 9), "sm_89") == tf32x3_rung("best", k, (8, 0), "sm_80") == "tf32x3_mma"
    assert tf32x3_rung("tf32x3_mma", 16, (9, 0), "sm_90") == "tf32x3_mma"  # (a named rung runs as named)
    assert tf32x3_rung(11, 16, (9, 0), "sm_90") == "tf32x3"
    with pytest.raises(ValueError, match="sm_80 or later; this GPU is sm_75"):
        tf32x3_rung("best", k, (7, 5), "sm_75")
    with pytest.raises(ValueError, match="no other rung"):
        tf32x3_rung("tuned", k, (9, 0), "sm_90")
    with pytest.raises(ValueError, match="no kahan"):
        tf32x3_rung("best", k, (9, 0), "sm_90", kahan=True)


def test_f16x3_picks_float64_sums_below_min_k_then_rung_13_on_hopper_only():
    """precision="f16x3": float64 sums (rung 8) below TF32X3_MIN_K (three 11-bit products lose to a
    short SGEMM there), rung 13 on Hopper; off Hopper, a rung that is not rung 13, or kahan: an
    error that names what to use instead."""
    from simtlab.ops.gemm_plans import TF32X3_MIN_K, f16x3_rung

    k = TF32X3_MIN_K
    assert f16x3_rung("best", k - 1, (9, 0), "sm_90") == f16x3_rung("best", k - 1, (8, 0), "sm_80") == "warptiling"
    assert f16x3_rung("best", k, (9, 0), "sm_90") == f16x3_rung(13, 16, (9, 0), "sm_90") == "f16x3"
    with pytest.raises(ValueError, match="runs on sm_90.*this GPU is sm_80 - use precision='tf32x3'"):
        f16x3_rung("best", k, (8, 0), "sm_80")
    with pytest.raises(ValueError, match="no other rung"):
        f16x3_rung("tf32x3", k, (9, 0), "sm_90")
    with pytest.raises(ValueError, match="no kahan"):
        f16x3_rung("best", k, (9, 0), "sm_90", kahan=True)


@pytest.mark.parametrize("precision", ["ieee", "tf32x3", "f16x3"])
@pytest.mark.parametrize("short", [True, False], ids=["short_k", "long_k"])
@pytest.mark.parametrize("cc", [(9, 0), (8, 0)], ids=["sm_90", "sm_80"])
def test_gemm_choice_names_a_rung_that_takes_its_sums(precision, short, cc):
    """What simtlab.gemm builds for each precision, depth and GPU: a rung of the catalog whose
    parameters include the accumulation it is given (precision="f16x3" at K < TF32X3_MIN_K once
    handed rung 10 the float64 sums' KAHAN, which rung 10 does not have)."""
    from simtlab.catalog import family
    from simtlab.ops.gemm_plans import F64_SUMS_PARAMS, TF32X3_MIN_K, gemm_choice

    arch = f"sm_{cc[0]}{cc[1]}"
    K = TF32X3_MIN_K - 1 if short else TF32X3_MIN_K
    if precision == "f16x3" and cc < (9, 0) and not short:
        with pytest.raises(ValueError, match="runs on sm_90"):
            gemm_choice("best", precision, K, cc, arch)
        return
    name, sums = gemm_choice("best", precision, K, cc, arch)
    expected = {"ieee": "tuned", "tf32x3": "tf32x3" if cc >= (9, 0) else "tf32x3_mma", "f16x3": "f16x3"}[precision]
    if precision != "ieee" and short:
        assert (name, sums) == ("warptiling", F64_SUMS_PARAMS)
    else:
        assert (name, sums) == (expected, None)
    family("gemm").rung(name).params(arch, dict(sums or ()))  # (raises on a parameter the rung lacks)


def test_gemm_choice_kahan_and_named_rungs():
    from simtlab.ops.gemm_plans import KAHAN_PARAMS, gemm_choice

    assert gemm_choice("best", "ieee", 4096, (9, 0), "sm_90", kahan=True) == ("warptiling", KAHAN_PARAMS)
    assert gemm_choice(13, "ieee", 4096, (9, 0), "sm_90") == ("f16x3", None)  # (rung 13 is its precision)
    assert gemm_choice("naive", "ieee", 8, (9, 0), "sm_90") == ("naive", None)
    with pytest.raises(ValueError, match="option of the warptiling rung"):
        gemm_choice("naive", "ieee", 8, (9, 0), "sm_90", kahan=True)
    with pytest.raises(ValueError, match="precision 'fp64'"):
        gemm_choice("best", "fp64", 8, (9, 0), "sm_90")
