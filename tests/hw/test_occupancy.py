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


@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90", "sm_100", "sm_103",
                                  "sm_110", "sm_120", "sm_121"])
def test_every_architecture_nvrtc_targets_has_limits(arch):
    """Each has a table (no "no occupancy table"), consistent with itself: a block's opt-in shared
    memory is the SM's less the driver's 1 KiB, the largest carveout is the SM's, and a small
    block fills the SM up to its warp or block cap."""
    from simtlab.compile import nvrtc_archs
    from simtlab.hw.occupancy import arch_limits, occupancy

    lim = arch_limits(arch)
    if int(arch[3:]) in nvrtc_archs():
        assert lim.arch == arch
    assert lim.smem_carveouts_kb[-1] * 1024 == lim.smem_per_sm
    assert lim.smem_per_block_optin == lim.smem_per_sm - lim.smem_reserved_per_block
    occ = occupancy(arch, 128, 32)
    assert occ.warps_per_sm == min(lim.max_threads_per_sm // 32, 4 * lim.max_blocks_per_sm)
    assert occupancy(arch, 128, 32, shared_dynamic=lim.smem_per_block_optin + 1).blocks_per_sm == 0


def test_the_new_architectures_limits():
    """Blackwell data-center parts as Hopper (228 KiB, 64 warps, 32 blocks); Thor and the GeForce /
    workstation parts 48 warps and 24 blocks, the latter with 100 KiB; Orin A100's shared memory."""
    from simtlab.hw.occupancy import arch_limits

    got = {a: (arch_limits(a).max_threads_per_sm, arch_limits(a).max_blocks_per_sm, arch_limits(a).smem_per_sm // 1024)
           for a in ("sm_87", "sm_100", "sm_103", "sm_110", "sm_120", "sm_121")}
    assert got == {"sm_87": (1536, 16, 164), "sm_100": (2048, 32, 228), "sm_103": (2048, 32, 228),
                   "sm_110": (1536, 24, 228), "sm_120": (1536, 24, 100), "sm_121": (1536, 24, 100)}


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["sm_100", "sm_120"])
def test_every_family_reports_every_rung_for_blackwell(arch):
    """`simtlab compile FAMILY --arch sm_100 / sm_120`: every rung built and reported, or said to
    need Hopper's own instructions (sm_90a) or to compute another operator than the default
    problem's (the row families' operator rungs), never an error."""
    from simtlab.analyze.static import static_report
    from simtlab.catalog import families

    for fam in families():
        entries = static_report(fam, arch)
        assert {e["rung"] for e in entries} == {r.id for r in fam.rungs}
        for e in entries:
            assert not e.get("error") or e.get("unsupported"), (e["rung"], e.get("error"))
            if e.get("unsupported") and e.get("not_for") != "problem":
                assert "sm_90a" in e["error"], e["error"]
