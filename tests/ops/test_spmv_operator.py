"""simtlab.spmv as declared (SpMV rung 4, the merge path), checked without a GPU: both launches
built for sm_90 with exactly their kernels' parameters (the prepare launch is the module's
spmv_merge_prepare_into), shapes checked in one line, the int32 offsets typed apart from the
float32 values by the generic plan."""

import numpy as np
import pytest

from declared_checks import check_steps, declare
from simtlab.catalog import family
from simtlab.family import IN, OUT, SCRATCH

SPMV = family("spmv").operators[0]


def _declare(shapes, **options):
    return declare(SPMV, shapes, "float32", True, {"cols": options.pop("cols", 1000), **options})[0]


@pytest.mark.parametrize("n, nnz, with_y", [(1, 1, False), (1000, 16000, True), (4 << 20, 72_900_000, False),
                                            (7, 0, True)])
def test_both_launches_pass_their_kernels_parameters(n, nnz, with_y):
    shapes = ((n + 1,), (nnz,), (nnz,), (1000,), (n,) if with_y else None)
    declared, build_once = declare(SPMV, shapes, "float32", True, {"cols": 1000, "beta": 0.5 if with_y else 0.0})
    prepare, main = declared.steps
    check_steps(declared, build_once, shapes)
    assert prepare.function == "spmv_merge_prepare_into" and main.function is None
    tile = main.params["BLOCK"] * main.params["IPT"]
    tiles = max(-(-(n + nnz) // tile), 1)
    assert main.launch.grid[0] == tiles and declared.scratch == (((tiles + 1,), "int32"),)
    assert prepare.args[5] == ((IN, 4) if with_y else np.int64(0)) and prepare.args[6] == (OUT, 0)
    assert main.args[6] == (SCRATCH, 0) and prepare.launch.grid[0] * 256 >= max(n, tiles + 1)


@pytest.mark.parametrize("shapes, options, match", [
    (((11,), (5,), (6,), (1000,), None), {}, "offsets"),
    (((11,), (5,), (5,), (999,), None), {}, "x has shape"),
    (((11,), (5,), (5,), (1000,), (9,)), {}, "y has shape"),
    (((11,), (5,), (5,), (1000,), None), {"beta": 1.0}, "no y was given"),
])
def test_what_it_cannot_take_is_named(shapes, options, match):
    with pytest.raises(ValueError, match=match):
        _declare(shapes, **options)


def test_the_offsets_are_typed_apart_from_the_values():
    assert SPMV.typed == {"row_ptr": "int32", "cols": "int32"} and SPMV.dtypes == ("float32",)


def test_a_cupy_matrix_of_another_kind_is_named():
    import simtlab

    with pytest.raises(TypeError, match="csr_matrix"):
        simtlab.spmv(np.eye(3, dtype=np.float32), np.ones(3, dtype=np.float32))


PREPARED = family("spmv").operators[1]


def _prepared_shapes(n, ncols, nnz, blocks, slots, pieces, with_y):
    groups = -(-nnz // 128) * 32
    layout = ((blocks + 1,), (slots + 1,), (blocks * -(-ncols // 65536) + 1,), (4 * groups,), (4 * groups,),
              (pieces,) if pieces else None, (pieces,) if pieces else None, (n + 1,), (nnz,), (nnz,))
    return (*layout, (ncols,), (n,) if with_y else None)


@pytest.mark.parametrize("n, ncols, nnz, pieces, with_y", [(1, 1, 1, 0, False), (20001, 7000, 320016, 0, True),
                                                           (4 << 20, 4 << 20, 72_900_000, 1500, False),
                                                           (3000, 200000, 48000, 7, True)])
def test_a_prepared_matrix_s_launches_pass_their_kernels_parameters(n, ncols, nnz, pieces, with_y):
    """simtlab.spmv_plan's call: rung 6's row blocks at the plan's blocks of threads and a row block's
    y in shared memory, then (where A has long rows) their pieces, a warp each; y read where given."""
    from simtlab.ops import spmv

    slots = 264
    shapes = _prepared_shapes(n, ncols, nnz, 40, slots, pieces, with_y)
    options = {"cols": ncols, "chunks": -(-ncols // 65536), "rows": 32768, "beta": 0.5 if with_y else 0.0}
    declared, build_once = declare(PREPARED, shapes, "float32", True, options)
    check_steps(declared, build_once, shapes)
    blocks = declared.steps[0]
    assert blocks.rung.name == "row_blocks" and blocks.launch.grid[0] == slots
    assert blocks.launch.shared == spmv.block_y_bytes(32768, n) and declared.outputs == (((n,), "float32"),)
    assert blocks.args[9] == ((IN, len(spmv.PREPARED) + 1) if with_y else np.int64(0)) and blocks.args[10] == (OUT, 0)
    assert len(declared.steps) == (2 if pieces else 1)
    if pieces:
        long = declared.steps[1]
        assert long.function == "spmv_long_pieces" and long.launch.grid[0] * 8 >= pieces and long.args[-1] == (OUT, 0)


@pytest.mark.parametrize("change, options, match", [
    (lambda s: (*s[:10], (999,), s[11]), {}, "x has shape"),
    (lambda s: (*s[:11], (9,)), {}, "y has shape"),
    (lambda s: (*s[:11], None), {"beta": 1.0}, "no y was given"),
])
def test_what_a_prepared_call_cannot_take_is_named(change, options, match):
    shapes = change(_prepared_shapes(11, 1000, 50, 2, 3, 0, True))
    with pytest.raises(ValueError, match=match):
        declare(PREPARED, shapes, "float32", True, {"cols": 1000, "chunks": 1, "rows": 32768, **options})


def test_the_prepared_layout_s_indices_are_typed_apart_from_its_values():
    from simtlab.ops import spmv

    assert PREPARED.operands == (*spmv.PREPARED, "x", "y") and PREPARED.dtypes == ("float32",)
    assert set(PREPARED.typed) == set(spmv.PREPARED) - {"vals", "values"}
    assert all(t == "int32" for t in PREPARED.typed.values())
    assert PREPARED.optional == {"piece_row", "piece_begin", "y"}


@pytest.mark.parametrize("n, ncols, long", [(3000, 200000, 256), (70001, 900, 1024), (1, 5, 256)])
def test_a_rectangular_matrix_s_layout_gives_its_product_back(n, ncols, long):
    """row_block_layout on a matrix of any shape (columns over several 65536-column chunks, or far
    fewer than the rows; duplicate columns in a row; empty rows; long rows), walked as the kernels
    walk it, gives A x back."""
    from simtlab.ops import spmv
    from test_spmv import _walk_row_blocks

    rng = np.random.default_rng(n)
    lengths = rng.integers(0, 12, n)
    lengths[rng.integers(0, n)] = 3000  # (a long row: pieces)
    row_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    cols = rng.integers(0, ncols, int(row_ptr[-1])).astype(np.int32)
    vals = (rng.random(cols.size) * 2 - 1).astype(np.float32)
    x = (rng.random(ncols) * 2 - 1).astype(np.float32)
    blk_row, cta_blk, seg_ptr, idx, lay_vals, chunks = spmv.row_block_layout(row_ptr, cols, vals, ncols, 512, long, 5)
    assert chunks == -(-ncols // 65536)
    y = _walk_row_blocks(blk_row, cta_blk, seg_ptr, idx, lay_vals, chunks, x, n)
    _, piece_row, piece_begin = spmv.long_row_pieces(row_ptr, spmv.ROW_BLOCK_PIECE, long)
    for r, b in zip(piece_row, piece_begin):
        e = min(b + spmv.ROW_BLOCK_PIECE, row_ptr[r + 1])
        y[r] += np.sum(vals[b:e].astype(np.float64) * x[cols[b:e]])
    dense = np.zeros(n)
    np.add.at(dense, np.repeat(np.arange(n), lengths), vals.astype(np.float64) * x[cols])
    assert np.allclose(y, dense, rtol=1e-5, atol=1e-6)


def test_the_prepared_layout_is_the_ladder_s_arrays_under_the_operator_s_names():
    """prepared_layout (what the ladder's runner and simtlab.spmv_plan launch): row_block_layout's
    arrays in PREPARED order, its entries as int32 of the same bits, and the long rows' pieces where
    there are any (None where none)."""
    from simtlab.ops import spmv

    rng = np.random.default_rng(2)
    for long_row in (False, True):
        lengths = rng.integers(0, 9, 500)
        if long_row:
            lengths[17] = 2000
        row_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        cols = rng.integers(0, 900, int(row_ptr[-1])).astype(np.int32)
        vals = rng.random(cols.size).astype(np.float32)
        arrays, chunks = spmv.prepared_layout(row_ptr, cols, vals, 900, 128, 256, 3)
        assert tuple(arrays) == spmv.PREPARED and chunks == 1
        idx = spmv.row_block_layout(row_ptr, cols, vals, 900, 128, 256, 3)[3]
        assert arrays["idx"].dtype == np.int32 and np.array_equal(arrays["idx"].view(np.uint32), idx)
        assert (arrays["piece_row"] is not None) == long_row and arrays["row_ptr"] is row_ptr
