"""Numerical edge cases on the GPU, family by family: NaN and Inf propagate as the reference does,
extreme magnitudes and subnormals are computed (not flushed), cancellation stays within the
tolerance policy (docs in simtlab.verify). Every rung, or a clear refusal."""

import numpy as np
import pytest

from simtlab.catalog import family
from simtlab.verify import compare

from test_gpu import _run_rung  # tests/ is on sys.path (pytest rootdir-relative imports)

pytestmark = pytest.mark.gpu


def _set(ws_attr_values):
    """An `edit` for _run_rung: write values at positions of named workspace arrays."""

    def edit(ws):
        for attr, idx, value in ws_attr_values:
            getattr(ws, attr)[idx] = value

    return edit


SPECIALS = [np.nan, np.inf, -np.inf, 3e38, -3e38, 1e-40, -1e-45, 0.0, -0.0]


@pytest.mark.parametrize("rung", family("elementwise").rungs, ids=lambda r: r.name)
def test_vector_add_specials_match_ieee(rung):
    from simtlab.ops import elementwise

    p = elementwise.VecProblem(4099)
    edits = [("x", i, v) for i, v in enumerate(SPECIALS)] + [("y", i + 3, v) for i, v in enumerate(SPECIALS)]
    edits += [("x", 20, 1e-40), ("y", 20, 1e-41)]
    ws = _run_rung(family("elementwise"), rung, p, 5, edit=_set(edits))
    # the fp32 sum of the fp32 inputs, special values included (3e38 + 3e38 overflows to inf as in IEEE)
    expect = (ws.x + ws.y).astype(np.float64)
    verdict = compare(ws.z, expect, 0.0)
    assert verdict.ok, verdict.reason
    assert 1.09e-40 < float(ws.z[20]) < 1.11e-40  # subnormal in, subnormal out (no flush to zero)


@pytest.mark.parametrize("rung", family("reduction").rungs, ids=lambda r: r.name)
@pytest.mark.parametrize("case", ["nan", "inf", "inf-inf", "cancel", "huge"])
def test_reduction_specials_and_cancellation(rung, case):
    import cupy

    from simtlab.ops import reduction

    n = 1_000_003
    rng = cupy.random.default_rng(7)

    def edit(ws):
        if case == "nan":
            ws.x[n // 2] = np.nan
        elif case == "inf":
            ws.x[17] = np.inf
        elif case == "inf-inf":
            ws.x[17], ws.x[n - 5] = np.inf, -np.inf
        elif case == "cancel":  # large values that cancel pairwise, small ones that carry the answer
            big = rng.random(n // 2, dtype=cupy.float32) * 1e6
            ws.x[: n // 2 * 2 : 2], ws.x[1 : n // 2 * 2 : 2] = big, -big
        else:  # near the top of the range; the sum of magnitudes still fits
            ws.x *= 1e32

    for op in ("sum", "max"):
        p = reduction.ReduceProblem(n, op)
        ws = _run_rung(family("reduction"), rung, p, 9, ladder_params=True, edit=edit)  # OP from the problem
        expect = ws.expected()
        verdict = compare(ws.out, expect, reduction.tolerance(p, ws))
        assert verdict.ok, (op, verdict.reason)
        if case == "nan" and op == "sum":
            assert bool(cupy.isnan(ws.out[0]))
        if case == "nan" and op == "max":  # documented: maxNum, NaN loses (cupy.nanmax)
            assert bool(cupy.isfinite(ws.out[0]))


@pytest.mark.parametrize("rung", family("gemm").rungs, ids=lambda r: r.name)
def test_gemm_nan_inf_propagate_like_cublas(rung):
    import cupy

    from simtlab.ops import gemm

    p = gemm.GemmProblem(129, 67, 33)
    edits = [("A", (5, 3), np.nan), ("A", (77, 0), np.inf), ("B", (7, 60), -np.inf)]
    ws = _run_rung(family("gemm"), rung, p, 3, edit=_set(edits))
    ours = ws.C.copy()
    ref = ws.A.astype(cupy.float64) @ ws.B.astype(cupy.float64)
    assert bool(cupy.isnan(ours[5]).all()) and bool((cupy.isnan(ours) == cupy.isnan(ref)).all())
    assert bool((cupy.isinf(ours) == cupy.isinf(ref)).all())
    assert compare(ours, ref, gemm.tolerance(p)).ok


@pytest.mark.parametrize("rung", family("gemm").rungs, ids=lambda r: r.name)
def test_gemm_subnormal_and_huge_operands_are_not_flushed(rung):
    """Subnormal A times huge B gives ordinary products: a kernel that flushed subnormals to zero
    would return 0. The operands are made and the reference computed on the host with NumPy (a
    device-side scale or cast could itself flush)."""
    import cupy

    from simtlab.ops import gemm

    p = gemm.GemmProblem(65, 66, 67)
    rng = np.random.default_rng(4)
    a = ((rng.random((p.M, p.K)) + 0.5) * 1e-39).astype(np.float32)  # subnormal (below 1.18e-38)
    b = ((rng.random((p.K, p.N)) - 0.5) * 1e30).astype(np.float32)
    assert 0 < np.abs(a).max() < np.finfo(np.float32).tiny

    def edit(ws):
        ws.A.set(a)
        ws.B.set(b)

    ws = _run_rung(family("gemm"), rung, p, 4, edit=edit)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    out = cupy.asnumpy(ws.C).astype(np.float64)
    err = np.linalg.norm(out - ref) / np.linalg.norm(ref)
    assert err < 1e3 * gemm.tolerance(p), err  # subnormal inputs carry fewer significant bits
    assert np.abs(out).max() > 1e-12


@pytest.mark.parametrize("rung", family("gemm_tc").rungs, ids=lambda r: r.name)
def test_tensor_core_gemm_propagates_nan(rung):
    import cupy

    from simtlab.ops import gemm_tc

    p = gemm_tc.TcProblem(128, 128, 64)

    def edit(ws):
        ws.A[3, 5] = gemm_tc._narrow(cupy.array([np.nan], cupy.float32), p.dtype)[0]

    ws = _run_rung(family("gemm_tc"), rung, p, 2, ladder_params=True, edit=edit)
    assert bool(cupy.isnan(ws.C[3]).all()) and int(cupy.isnan(ws.C).sum()) == p.N
