import pytest

from simtlab.hw.occupancy import arch_limits, occupancy


def test_register_limited():
    # 128 regs x 32 = 4096 per warp; 16384 per sub-partition -> 4 warps each, 16 per SM -> 2 blocks of 8 warps.
    occ = occupancy("sm_90", 256, 128)
    assert occ.blocks_per_sm == 2 and occ.warps_per_sm == 16
    assert occ.occupancy == pytest.approx(0.25) and occ.limiter == "registers"


def test_full_occupancy_is_limited_by_warps():
    occ = occupancy("sm_90", 256, 32)
    assert occ.blocks_per_sm == 8 and occ.occupancy == 1.0 and occ.limiter == "warps"


def test_register_granularity_rounds_up():
    # 33 regs -> 1056 -> 1280 per warp: 12 warps per sub-partition (not 15).
    assert occupancy("sm_90", 128, 33).warps_per_sm == 48


def test_shared_memory_limited_with_reservation():
    # 100 KiB + 1 KiB reserved per block against 228 KiB: 2 blocks.
    occ = occupancy("sm_90", 128, 32, shared_dynamic=100 * 1024)
    assert occ.blocks_per_sm == 2 and occ.limiter == "shared memory"
    # sm_86 has only 100 KiB per SM.
    assert occupancy("sm_86", 128, 32, shared_dynamic=60 * 1024).blocks_per_sm == 1


def test_blocks_cap():
    occ = occupancy("sm_90", 32, 16)
    assert occ.blocks_per_sm == 32 and occ.limiter == "blocks"
    assert occupancy("sm_86", 32, 16).blocks_per_sm == 16


def test_nothing_fits():
    assert occupancy("sm_90", 1024, 255).blocks_per_sm == 0
    assert occupancy("sm_90", 128, 32, shared_dynamic=228 * 1024).blocks_per_sm == 0
    occ = occupancy("sm_90", 2048, 32)
    assert occ.blocks_per_sm == 0 and "threads per block" in occ.limiter


def test_sm90a_uses_sm90_table_and_unknown_arch_is_clear():
    assert arch_limits("sm_90a").arch == "sm_90"
    with pytest.raises(ValueError, match="no occupancy table"):
        arch_limits("sm_12")


def test_max_threads_per_block():
    from simtlab.hw.occupancy import max_threads_per_block

    assert max_threads_per_block("sm_90", 32) == 1024
    assert max_threads_per_block("sm_90", 255) == 256  # 8192 registers per warp: 8 warps
    assert max_threads_per_block("sm_90", 128) == 512
    assert max_threads_per_block("sm_90", 32, declared=384) == 384
