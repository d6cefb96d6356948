"""simtlab.spmv_plan's host side, without a GPU: what it refuses, in one line each, and a plan of a
matrix with no nonzeros (nothing to launch: zeros, or beta y)."""

import numpy as np
import pytest

import simtlab
from simtlab.ops.spmv import PREPARED
from simtlab.sparse import SpmvPlan


def test_what_a_plan_cannot_be_made_from_is_named():
    with pytest.raises(TypeError, match="torch sparse CSR tensor or a cupyx.scipy.sparse.csr_matrix, got numpy"):
        simtlab.spmv_plan(np.eye(3, dtype=np.float32))
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="spmv_plan takes a sparse CSR tensor"):
        simtlab.spmv_plan(torch.eye(3))
    with pytest.raises(TypeError, match="A is on cpu"):
        simtlab.spmv_plan(torch.eye(3).to_sparse_csr())


def test_a_plan_checks_its_operands_and_an_empty_matrix_launches_nothing():
    torch = pytest.importorskip("torch")
    plan = SpmvPlan(dict.fromkeys(PREPARED), (4, 3), 0, 1, 32768, True, 0, "4x3, no nonzeros: nothing to launch")
    assert torch.equal(plan(torch.zeros(3)), torch.zeros(4))
    assert torch.equal(plan(torch.zeros(3), beta=2.0, y=torch.ones(4)), torch.full((4,), 2.0))
    with pytest.raises(ValueError, match="x has shape \\(4,\\) but A has 3 columns"):
        plan(torch.zeros(4))
    with pytest.raises(ValueError, match="y has shape \\(3,\\) but A has 4 rows"):
        plan(torch.zeros(3), beta=1.0, y=torch.zeros(3))
    with pytest.raises(TypeError, match="x is float64"):
        plan(torch.zeros(3, dtype=torch.float64))
    with pytest.raises(TypeError, match="made from a PyTorch tensor's matrix; x is a numpy.ndarray"):
        plan(np.zeros(3, dtype=np.float32))
    assert "no nonzeros" in repr(plan)
