import pytest

from simtlab.ops import tma


def test_tensor_map_enum_values_match_the_driver_headers():
    drv = pytest.importorskip("cuda.bindings.driver")
    assert tma.TMA_FLOAT16 == int(drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16)
    assert tma.TMA_BFLOAT16 == int(drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16)
    assert tma.TMA_FLOAT32 == int(drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT32)
    assert tma.TMA_INTERLEAVE_NONE == int(drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE)
    assert tma.TMA_SWIZZLE_128B == int(drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B)
    assert tma.TMA_SWIZZLE_NONE == int(drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE)
    assert tma.TMA_L2_256B == int(drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B)
    assert tma.TMA_OOB_ZERO == int(drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
