"""simtlab.cumsum as declared (scan rungs 6 and 7), checked without a GPU: every launch a call
makes is built for sm_90, fits without spilling and passes exactly the kernel's parameters; a
NumPy model of rung 7's walk (whole rows, or chunk totals, their exclusive scan, the chunks from
their carries) reproduces numpy.cumsum for every cut the plan makes."""

import dataclasses

import numpy as np
import pytest

from declared_checks import H100, check_steps, declare
from simtlab.catalog import family
from simtlab.ops import scan

CUMSUM = family("scan").operators[0]
SHAPES = [(1, 1), (1, 7), (1, 5000), (1, 3_000_001), (2, 1 << 20), (3, 4097), (64, 100003), (1000, 33), (5000, 4096),
          (300000, 16), (4, 1, 9)]


def _declare(shapes, dtype, vec):
    return declare(CUMSUM, shapes, dtype, vec)


@pytest.mark.parametrize("dtype", scan.CUMSUM_TYPES)
@pytest.mark.parametrize("vec", [True, False], ids=["aligned", "unaligned"])
def test_every_cumsum_launch_fits_and_passes_the_kernels_parameters(dtype, vec):
    for shape in SHAPES:
        declared, build_once = _declare((shape,), dtype, vec)
        assert declared.outputs == ((shape, scan.SUM_TYPE[dtype]),)
        check_steps(declared, build_once, (shape,))
        one_fp32_row = shape[:-1] in ((1,), (4, 1)) and dtype == "float32" and np.prod(shape[:-1]) == 1
        stage = declared.steps[0].rung.stage
        assert stage == (6 if one_fp32_row else 7), (shape, dtype)
        if stage == 6:
            assert declared.cleared == (0, 1) and declared.scratch[0][0][0] == declared.steps[0].launch.blocks + 1


def _model(x, cut, tile):
    """rung 7 in NumPy: what each launch writes, in order."""
    rows, cols = x.shape
    flat, out = x.reshape(-1), np.full(rows * cols, np.nan)
    if cut.whole:
        for r in range(rows):
            carry = 0.0
            for start in range(r * cols, (r + 1) * cols, tile):
                stop = min(start + tile, (r + 1) * cols)
                out[start:stop] = carry + np.cumsum(flat[start:stop])
                carry = out[stop - 1]
        return out.reshape(rows, cols)
    spans = []
    for s in range(cut.count):
        r, k = divmod(s, cut.per_row)
        start = r * cols + k * cut.chunk
        spans.append((start, min(start + cut.chunk, (r + 1) * cols)))
    totals = np.array([flat[a:b].sum() for a, b in spans])
    for r in range(rows):  # each row's totals, exclusive-scanned
        t = totals[r * cut.per_row:(r + 1) * cut.per_row]
        totals[r * cut.per_row:(r + 1) * cut.per_row] = np.concatenate(([0.0], np.cumsum(t)[:-1]))
    for s, (a, b) in enumerate(spans):
        assert b > a and (a - (a // cols) * cols) % tile == 0  # (every chunk starts on a tile)
        out[a:b] = totals[s] + np.cumsum(flat[a:b])
    return out.reshape(rows, cols)


@pytest.mark.parametrize("rows, cols", [(1, 1), (1, 4095), (1, 70001), (2, 50000), (7, 6000), (5000, 3), (3, 512)])
def test_rung_7_s_walk_is_a_cumsum_for_every_cut(rows, cols):
    params = {"BLOCK": scan.row_block(cols), "ITEMS": scan.ROW_ITEMS}
    small = dataclasses.replace(H100, sms=2)  # (two SMs: few rows are cut into chunks at these sizes)
    cut = scan.cut_rows(rows, cols, params, small)
    x = np.random.default_rng(rows + cols).integers(-4, 5, (rows, cols)).astype(np.float64)
    assert np.array_equal(_model(x, cut, scan.tile(params)), np.cumsum(x, axis=1))
    assert cut.whole == (cut.per_row == 1 and cut.chunk == cols)


def test_few_long_rows_are_cut_to_fill_the_gpu_and_many_rows_stay_whole():
    params = {"BLOCK": 256, "ITEMS": scan.ROW_ITEMS}
    cut = scan.cut_rows(1, 1 << 28, params, H100)
    assert not cut.whole and cut.count >= H100.sms * scan.CHUNKS_PER_SM // 2 and cut.chunk % scan.tile(params) == 0
    assert [phase for phase, _ in cut.launches] == [scan.ROWS_REDUCE, scan.ROWS_TOTALS, scan.ROWS_SCAN]
    many = scan.cut_rows(100000, 4096, params, H100)
    assert many.whole and many.launches == [(scan.ROWS_WHOLE, (many.grid_whole, 1, 1))]


def test_types_it_cannot_scan_are_named():
    with pytest.raises(ValueError, match="0-d"):
        _declare(((),), "float32", True)
    torch = pytest.importorskip("torch")

    import simtlab.torch as st

    with pytest.raises(TypeError, match="float32, int32 or int64"):
        st.cumsum(torch.empty(3, 4, device="meta", dtype=torch.bfloat16))
    assert st.cumsum(torch.empty(3, 4, device="meta", dtype=torch.int32), 0).dtype == torch.int64
