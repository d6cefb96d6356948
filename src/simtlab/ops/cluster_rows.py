"""Rows split over thread-block clusters: the shape the row families' rung 6 (sm_90) shares.

A block owns VPT groups of four values a thread of each row it takes - 4 for 16-bit rows (a row's
fixed costs, its reductions and barriers, over twice the values; 512 threads an SM), 2 for fp32
(1024) - at most 512 threads (1024 for fp32 rows past CLUSTER_MAX such blocks), and a row takes as many
blocks a cluster as it needs. Its rows' slices are staged in shared memory, as many stages as fit
an SM; how many clusters run at once is the driver's count.
"""

from __future__ import annotations

from ..driver import PORTABLE_CLUSTER
from ..launch import Launch
from .base import ITEMSIZE, sm_count
from .rows import DT

__all__ = ["CLUSTER_MAX", "NoClusterFits", "blocks_an_sm", "row_split", "LONGEST_ROW", "stage_count", "cluster_vec",
           "check_split", "clusters_launch", "active_clusters", "clusters_that_fit", "element_bytes"]

CLUSTER_MAX = PORTABLE_CLUSTER  # blocks a cluster may have on any GPU with clusters
# The longest row a cluster holds: CLUSTER_MAX blocks of 8192 values (1024 threads x 8 for fp32; 512
# x 16 for 16-bit rows, whose 16 values a thread take the 128 registers of 512 threads an SM).
LONGEST_ROW = CLUSTER_MAX * 8192
SM_SHARED = 228 * 1024  # an SM's shared memory on sm_90
BLOCK_RESERVE = 5120    # a block's reserve (1 KB) and the kernels' static shared memory, at most


class NoClusterFits(ValueError):
    """The GPU (or its partition) runs no cluster of the shape a rung 6 build needs."""


def element_bytes(dt: int) -> int:
    """The DT template argument's element bytes."""
    return {code: ITEMSIZE[name] for name, code in DT.items()}[dt]


def blocks_an_sm(vpt: int, block: int) -> int:
    """Blocks an SM under the kernels' launch bounds: 1024 threads at VPT 2, 512 at VPT 4."""
    return max(1, 2048 // vpt // block)


def _vpt(itemsize: int) -> int:
    return 4 if itemsize == 2 else 2


def row_split(cols: int, itemsize: int) -> tuple[int, int, int]:
    """(BLOCK, VPT, CLUSTER) for rows of up to LONGEST_ROW values: the fewest blocks of at most 512
    threads, or (fp32 rows past CLUSTER_MAX such blocks) of 1024, each block some of the row."""
    if not 0 < cols <= LONGEST_ROW:
        raise ValueError(f"rung 6 splits rows of 1 to {LONGEST_ROW} values over a cluster, not {cols}")
    vpt = _vpt(itemsize)
    per_block = 512 * 4 * vpt
    slice_cols = per_block if cols <= CLUSTER_MAX * per_block else 8192
    cluster = -(-cols // slice_cols)
    block = max(32, -(-cols // (cluster * 32 * 4 * vpt)) * 32)
    return block, vpt, cluster


def stage_count(stage: int, per_sm: int, fixed: int = 0, most: int = 4) -> int:
    """Row slices of `stage` bytes a block stages (2 to `most`) beside `fixed` bytes of its own, with
    `per_sm` blocks sharing an SM's shared memory."""
    room = SM_SHARED // min(16, per_sm) - BLOCK_RESERVE
    return max(2, min(most, (room - fixed) // stage))


def cluster_vec(cols: int, itemsize: int) -> bool:
    """Rung 6 copies rows in 16-byte pieces: a row's bytes a multiple of 16 (bases aligned to 16)."""
    return cols * itemsize % 16 == 0


def check_split(block: int, vpt: int, cluster: int, cols: int, group: int = 1) -> None:
    """A ValueError unless `cluster` blocks of `block` threads x 4 `vpt` values split a row of `cols`
    (each block some of it) and the cluster of cluster x group blocks is a portable size."""
    span = 4 * vpt * block
    if cluster * group > CLUSTER_MAX:
        raise ValueError(f"clusters of {cluster} x {group} blocks: at most {CLUSTER_MAX}")
    if span * cluster < cols or span * (cluster - 1) >= cols:
        raise ValueError(f"{cluster} blocks of {block} threads x {4 * vpt} values do not split a {cols}-value row "
                         "(each block some of it): see row_split")


def clusters_launch(block: int, vpt: int, size: int, teams_needed: int, shared: int, device=None) -> Launch:
    """Whole clusters of `size` blocks, as many as the SMs hold at the launch bounds (the runners
    and operators ask the driver instead: active_clusters), no more than the rows need."""
    clusters = max(1, min(teams_needed, sm_count(device) * blocks_an_sm(vpt, block) // size))
    return Launch((clusters * size, 1, 1), (block, 1, 1), shared)


def active_clusters(inst, launch: Launch, vec: bool, device, size: int) -> int:
    """How many clusters of `size` blocks of the build's launch the GPU runs at once: the driver's
    count, which knows how the GPCs' SMs group (the function's shared memory allowed first: the
    count depends on it)."""
    from ..driver import max_active_clusters
    from ..launch import function_handle, prepare

    return max_active_clusters(function_handle(prepare(inst, launch, vec, device)), launch.block, launch.shared, size)


def clusters_that_fit(inst, launch: Launch, vec: bool, device, size: int) -> int:
    """active_clusters for the build's launch, or NoClusterFits (one line) where none fits the GPU."""
    active = active_clusters(inst, launch, vec, device, size)
    if active < 1:
        raise NoClusterFits(f"{inst.rung.id}: no cluster of {size} blocks of {launch.block[0]} threads with "
                            f"{launch.shared} bytes of shared memory fits this GPU")
    return active
