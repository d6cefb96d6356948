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


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,box,swizzle", [
    ("bfloat16", tma.TmaBox((4096, 4096, 1), (8192, 8192 * 4096), (64, 128, 1)), tma.TMA_SWIZZLE_128B),
    ("float16", tma.TmaBox((512, 512, 64), (1024, 1024 * 512), (64, 64, 1)), tma.TMA_SWIZZLE_128B),
    ("bfloat16", tma.TmaBox((264, 136, 1), (528, 528 * 136), (32, 64, 1)), tma.TMA_SWIZZLE_64B),
    ("float32", tma.TmaBox((4096, 4096, 1), (16384, 16384 * 4096), (32, 64, 1)), tma.TMA_SWIZZLE_128B),
], ids=["bf16-A", "fp16-batched", "bf16-C-narrow", "fp32-C"])
def test_map_slots_repoint_exactly_as_the_driver_encodes(dtype, box, swizzle):
    """The library's calls re-point their maps by one write (driver.MapSlot) instead of encoding
    each new address: the rule learned from this driver must hold, and give its bytes exactly."""
    import ctypes
    import random

    cupy = pytest.importorskip("cupy")
    buf = cupy.empty(1 << 20, dtype=cupy.uint8)  # (a real allocation's address to learn from)
    encoder = tma.tensor_map_encoder(box, dtype, swizzle)
    slot = encoder.slot(buf.data.ptr)
    assert slot is not None, "this driver's tensor maps do not hold the address as plain bits of one word"
    rng = random.Random(7)
    for q in [buf.data.ptr + 16 * i for i in range(1, 9)] + [rng.randrange(1, 1 << 43) << 4 for _ in range(200)]:
        if q & slot.outside:
            continue
        slot.word.value = slot.base | (q >> 4) << slot.shift
        assert ctypes.string_at(slot.address, 128) == encoder.encode(q), hex(q)
