"""simtlab.sum, simtlab.amax (reduction rung 10) and simtlab.transpose (transpose rung 5) as
declared, checked without a GPU: every launch a call makes is built for sm_90, fits without
spilling and passes exactly the kernel's parameters; rung 10's segments cover every element of
every row once, each chunk starting on a 16-byte boundary where the rows do."""

import numpy as np
import pytest

from declared_checks import H100, check_steps, declare
from simtlab.catalog import family
from simtlab.family import IN, OUT, SCRATCH
from simtlab.ops import reduction

OPERATORS = {o.name: o for fam in ("reduction", "transpose") for o in family(fam).operators}
SHAPES = [(1, 1), (3, 5), (1, 4096), (7, 4097), (1, 8191), (1, 100003), (2, 1 << 20), (1, 1 << 27), (5000, 3000),
          (100000, 128), (3, 65536), (4096, 32768), (1, 0), (0, 7)]


def _declare(op, shapes, dtype, vec):
    return declare(op, shapes, dtype, vec)


def _check_steps(declared, build_once, shapes):
    check_steps(declared, build_once, shapes)


@pytest.mark.parametrize("name", ["sum", "amax"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("vec", [True, False], ids=["aligned", "unaligned"])
def test_every_reduction_launch_fits_and_passes_the_kernels_parameters(name, dtype, vec):
    op = OPERATORS[name]
    for rows, cols in SHAPES:
        if name == "amax" and cols == 0:
            continue
        declared, build_once = _declare(op, ((rows, cols),), dtype, vec)
        assert declared.outputs == (((rows,), dtype),) and declared.align == 4 * (4 if dtype == "float32" else 2)
        _check_steps(declared, build_once, ((rows, cols),))
        first = declared.steps[0]
        assert first.params["DT"] == reduction.DT[dtype] and first.params["OP"] == reduction.TORCH_OPS[name]
        if len(declared.steps) == 2:  # chunks to fp32 partials, then the partials in x's type
            assert first.params["ODT"] == 0 and declared.steps[1].params == {**first.params, "DT": 0,
                                                                              "ODT": reduction.DT[dtype]}
            assert first.args[1] == (SCRATCH, 0) == declared.steps[1].args[0]
            assert declared.scratch == (((int(first.args[2]),), "float32"),)
        else:
            assert first.params["ODT"] == first.params["DT"] and first.args[:2] == ((IN, 0), (OUT, 0))


def _walk(seg):
    """rung 10's addressing in NumPy: (start, length) of every segment."""
    s = np.arange(seg.count, dtype=np.int64)
    row, part = s // seg.per_row, s % seg.per_row
    start = row * seg.cols + part * seg.chunk
    return start, np.minimum(seg.chunk, seg.cols - part * seg.chunk)


@pytest.mark.parametrize("rows, cols", [(1, 1), (1, 4097), (1, 8192 * 3 + 1), (1, 10**9), (3, 100003), (131, 65536),
                                        (2111, 9000), (5000, 3000), (1, 2**31 + 5)])
def test_rung_10_segments_cover_every_element_once_and_fill_the_gpu(rows, cols):
    seg = reduction.cut(rows, cols, reduction.segment_params(rows, cols), H100)
    start, length = _walk(seg)
    assert (length > 0).all() and length.max() <= seg.chunk
    covered = np.zeros(rows * cols, dtype=np.int8) if rows * cols < 10**7 else None
    if covered is not None:
        for a, n in zip(start, length):
            covered[a:a + n] += 1
        assert (covered == 1).all()
    else:  # (too large to mark: consecutive, no gap, no overlap)
        assert (start[1:] == start[:-1] + length[:-1]).all() and start[-1] + length[-1] == rows * cols
    if seg.per_row > 1:
        assert seg.chunk % 16 == 0 and seg.chunk >= reduction.MIN_CHUNK  # every chunk of an aligned row aligned
        assert seg.count >= min(H100.sms * reduction.BLOCKS_PER_SM, cols // reduction.MIN_CHUNK)
        assert seg.second.count == rows and seg.second.cols == seg.per_row
    blocks = seg.launch.grid[0]
    per_block = seg.block // 32 if seg.warp_rows else 1
    assert blocks * per_block >= seg.count or blocks == 2**31 - 1


def test_the_ladder_runs_rung_10_as_chunks_then_partials():
    rung = family("reduction").rung(10)
    p = reduction.parse_size("1073741824")
    params = rung.params("sm_90", reduction.segment_defaults(p))
    assert params["WARP_ROWS"] == 0 and rung.geometry(params, p, H100).grid[0] == H100.sms * reduction.BLOCKS_PER_SM
    small = reduction.parse_size("1000")
    assert reduction.segment_defaults(small)["WARP_ROWS"] == 1


def test_amax_of_an_empty_dimension_is_refused_in_one_line():
    with pytest.raises(ValueError, match="empty dimension .* no identity"):
        _declare(OPERATORS["amax"], ((4, 0),), "float32", True)


@pytest.mark.parametrize("vec", [True, False], ids=["aligned", "unaligned"])
def test_every_transpose_launch_fits_and_covers_the_matrix(vec):
    op = OPERATORS["transpose"]
    for rows, cols in [(1, 1), (3, 5), (64, 64), (4096, 4096), (4097, 12), (1, 100003), (100003, 3)]:
        declared, build_once = _declare(op, ((rows, cols),), "float32", vec)
        assert declared.outputs == (((cols, rows), "float32"),) and declared.vec == (vec and rows % 4 == 0 == cols % 4)
        _check_steps(declared, build_once, ((rows, cols),))
        (step,) = declared.steps
        tile = step.params["TILE"]
        assert step.launch.grid[:2] == (-(-cols // tile), -(-rows // tile))
    with pytest.raises(ValueError, match="past the grid's 65535 in y"):
        _declare(op, ((65536 * 64 + 1, 2),), "float32", True)


def test_host_arrays_are_named_without_a_gpu():
    import simtlab

    for call in (simtlab.sum, simtlab.amax, simtlab.transpose):
        with pytest.raises((TypeError, ValueError), match="GPU array|matrix"):
            call(np.ones((3, 4), dtype=np.float32))


def test_the_torch_reductions_and_transpose_trace_with_their_fakes():
    torch = pytest.importorskip("torch")

    import simtlab.torch as st

    x = torch.empty(2, 5, 7, device="meta", dtype=torch.bfloat16)
    assert st.sum(x).shape == () and st.sum(x, 1).shape == (2, 7) and st.amax(x, -1, True).shape == (2, 5, 1)
    assert st.sum(x, None, True).shape == (1, 1, 1) and st.amax(x, 0).dtype == torch.bfloat16
    m = torch.empty(3, 9, device="meta")
    assert st.transpose(m).shape == (9, 3)
    with pytest.raises(TypeError, match="float32 tensors"):
        st.transpose(m.to(torch.bfloat16))
    with pytest.raises(ValueError, match="takes a matrix"):
        st.transpose(x.float())
