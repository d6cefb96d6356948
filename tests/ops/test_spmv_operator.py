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
