"""Reading a caller's operands: layouts from shapes and element strides (CPU)."""

import numpy as np
import pytest

from simtlab.arrays import ROW, TRANSPOSED, array_lib, layout_of


def _strides(x: np.ndarray) -> tuple:
    return tuple(s // x.itemsize for s in x.strides)


def _transposed(shape):
    """A transposed view of the given shape: x.mT of a row-major array of the swapped shape."""
    return np.zeros(shape[:-2] + shape[-2:][::-1], np.float32).swapaxes(-1, -2)


@pytest.mark.parametrize("shape", [(5, 7), (3, 5, 7)])
def test_row_major_and_transposed_views_are_told_apart(shape):
    x, t = np.zeros(shape, np.float32), _transposed(shape)
    assert layout_of(x.shape, _strides(x)) == ROW
    assert layout_of(t.shape, _strides(t)) == TRANSPOSED


@pytest.mark.parametrize("shape", [(1, 7), (5, 1), (1, 5, 7)])
def test_a_dimension_of_extent_one_takes_any_stride(shape):
    for x in (np.zeros(shape, np.float32), _transposed(shape)):
        assert layout_of(x.shape, _strides(x)) is not None


def test_other_strides_have_no_layout():
    x = np.zeros((6, 8), np.float32)
    for bad in (x[:, ::2], x[::2], x[:, 1:], np.broadcast_to(np.zeros((1, 8), np.float32), (6, 8))):
        assert layout_of(bad.shape, _strides(bad)) is None, bad.strides
    batch = np.zeros((4, 6, 8), np.float32)
    assert layout_of(batch[::2].shape, _strides(batch[::2])) is None  # matrices not back to back
    assert layout_of((4, 6, 8), (0, 8, 1)) is None  # a broadcast batch


def test_host_arrays_are_refused_by_name():
    with pytest.raises(TypeError, match="GPU array"):
        array_lib(np.zeros(3))
    with pytest.raises(TypeError, match="GPU array"):
        array_lib([1.0, 2.0])


def test_a_host_array_is_named_before_any_gpu_is_looked_for():
    """simtlab.gemm / gemm_tc given a NumPy array or a CPU tensor say so (not 'no GPU visible', and
    no command-line advice in a Python exception)."""
    import numpy as np

    import simtlab

    for call in (simtlab.gemm, simtlab.gemm_tc):
        with pytest.raises(TypeError, match="on the host") as info:
            call(np.ones((4, 4), np.float32), np.ones((4, 4), np.float32))
        assert "simtlab compile" not in str(info.value)
    torch = pytest.importorskip("torch")
    for call, dtype in ((simtlab.gemm, torch.float32), (simtlab.gemm_tc, torch.bfloat16)):
        with pytest.raises(TypeError, match="tensor on cpu was given: simtlab's kernels take CUDA tensors"):
            call(torch.ones(4, 4, dtype=dtype), torch.ones(4, 4, dtype=dtype))
