"""Theoretical occupancy from static resources, with no GPU.

The rules are CUDA's (as the CUDA occupancy calculator and
cudaOccupancyMaxActiveBlocksPerMultiprocessor apply them): registers are
allocated per warp in units of 256 and split over the SM's 4 sub-partitions;
shared memory per block is rounded to the allocation unit after adding the
driver's per-block reservation, against the carveout the driver picks; warps
and blocks per SM have hard caps.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .arch import Arch

__all__ = ["ArchLimits", "ARCHS", "SMEM_WITHOUT_OPT_IN", "Occupancy", "occupancy", "arch_limits", "max_threads_per_block"]

KB = 1024
SMEM_WITHOUT_OPT_IN = 48 * KB  # shared memory per block a kernel gets without opting in (every arch)


@dataclass(frozen=True)
class ArchLimits:
    arch: str
    max_threads_per_sm: int
    max_blocks_per_sm: int
    smem_per_sm: int
    smem_per_block_optin: int
    smem_reserved_per_block: int
    smem_granularity: int
    smem_carveouts_kb: tuple[int, ...]  # shared-memory sizes the driver can configure per SM
    regs_per_sm: int = 65536
    regs_per_block: int = 65536
    reg_granularity: int = 256  # registers per warp are allocated in these units
    max_regs_per_thread: int = 255
    sub_partitions: int = 4
    max_threads_per_block: int = 1024


# Every architecture NVRTC 13 builds for. Blocks per SM and the shared-memory carveouts (hence shared
# memory per SM, a block's opt-in limit being that less the 1 KiB the driver reserves) as CUDA 13.0's
# occupancy calculator (cuda_occupancy.h) has them; resident threads per SM from the CUDA
# Programming Guide's technical specifications per compute capability. Registers: 64 K per SM and
# per block, 255 per thread, allocated per warp in 256s, on every one of them.
_CARVEOUT_100 = (0, 8, 16, 32, 64, 100)
_CARVEOUT_164 = (0, 8, 16, 32, 64, 100, 132, 164)
_CARVEOUT_228 = (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)


def _limits(arch: str, threads: int, blocks: int, carveouts: tuple[int, ...]) -> ArchLimits:
    smem = carveouts[-1] * KB
    return ArchLimits(arch, threads, blocks, smem, smem - KB, KB, 128, carveouts)


ARCHS: dict[str, ArchLimits] = {
    a.arch: a
    for a in (
        ArchLimits("sm_70", 2048, 32, 96 * KB, 96 * KB, 0, 256, (0, 8, 16, 32, 64, 96)),
        ArchLimits("sm_75", 1024, 16, 64 * KB, 64 * KB, 0, 256, (0, 32, 64)),
        _limits("sm_80", 2048, 32, _CARVEOUT_164),  # A100
        _limits("sm_86", 1536, 16, _CARVEOUT_100),  # GA10x
        _limits("sm_87", 1536, 16, _CARVEOUT_164),  # Jetson Orin: A100's shared memory, GA10x's warps
        _limits("sm_88", 1536, 16, _CARVEOUT_100),
        _limits("sm_89", 1536, 24, _CARVEOUT_100),  # Ada
        _limits("sm_90", 2048, 32, _CARVEOUT_228),  # H100, H200
        _limits("sm_100", 2048, 32, _CARVEOUT_228),  # B200, GB200
        _limits("sm_103", 2048, 32, _CARVEOUT_228),  # B300, GB300
        _limits("sm_110", 1536, 24, _CARVEOUT_228),  # Jetson Thor
        _limits("sm_120", 1536, 24, _CARVEOUT_100),  # RTX 50, RTX PRO Blackwell
        _limits("sm_121", 1536, 24, _CARVEOUT_100),  # GB10 (DGX Spark)
    )
}


def arch_limits(arch: str) -> ArchLimits:
    base = Arch(arch).base  # sm_90a has sm_90's resources
    try:
        return ARCHS[base]
    except KeyError:
        raise ValueError(f"no occupancy table for {arch}; known: {', '.join(ARCHS)}") from None


@dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int
    warps_per_sm: int
    occupancy: float  # active warps / maximum warps per SM
    limiter: str  # "warps", "blocks", "registers", "shared memory", or why nothing fits
    limits: dict  # blocks per SM allowed by each resource

    def as_dict(self) -> dict:
        return asdict(self)


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def occupancy(
    arch: str, threads_per_block: int, registers: int, shared_static: int = 0, shared_dynamic: int = 0
) -> Occupancy:
    lim = arch_limits(arch)
    if threads_per_block < 1 or threads_per_block > lim.max_threads_per_block:
        return Occupancy(0, 0, 0.0, f"{threads_per_block} threads per block (limit {lim.max_threads_per_block})", {})
    warps = -(-threads_per_block // 32)
    max_warps = lim.max_threads_per_sm // 32
    limits = {"warps": max_warps // warps, "blocks": lim.max_blocks_per_sm}

    regs_per_warp = _round_up(max(registers, 1) * 32, lim.reg_granularity)
    # The hardware launch check assumes the block's warps spread over all sub-partitions.
    if registers > lim.max_regs_per_thread or regs_per_warp * _round_up(warps, lim.sub_partitions) > lim.regs_per_block:
        limits["registers"] = 0
    else:
        warps_per_sub = (lim.regs_per_sm // lim.sub_partitions) // regs_per_warp
        limits["registers"] = warps_per_sub * lim.sub_partitions // warps

    smem = shared_static + shared_dynamic
    if smem > lim.smem_per_block_optin:
        limits["shared memory"] = 0
    else:
        per_block = _round_up(smem + lim.smem_reserved_per_block, lim.smem_granularity)
        # Default carveout: the whole shared capacity is available when one block needs it.
        per_sm = next(c * KB for c in lim.smem_carveouts_kb if c * KB >= lim.smem_per_sm)
        limits["shared memory"] = per_sm // per_block if per_block else lim.max_blocks_per_sm

    blocks = min(limits.values())
    order = ["warps", "blocks", "registers", "shared memory"]  # on a tie, the hardware cap is the honest answer
    limiter = min(order, key=lambda k: (limits[k], order.index(k)))
    if blocks == 0:
        limiter = f"{limiter} (block does not fit)"
    return Occupancy(blocks, blocks * warps, blocks * warps / max_warps, limiter, limits)


def max_threads_per_block(arch: str, registers: int, declared: int | None = None) -> int:
    """The largest block (a multiple of 32 threads) a kernel can launch with: the device cap,
    its __launch_bounds__, and the register file (the hardware check rounds warps up to 4)."""
    lim = arch_limits(arch)
    regs_per_warp = _round_up(max(registers, 1) * 32, lim.reg_granularity)
    warps = lim.regs_per_block // regs_per_warp // lim.sub_partitions * lim.sub_partitions
    cap = min(lim.max_threads_per_block, warps * 32)
    return min(cap, declared) if declared else cap
