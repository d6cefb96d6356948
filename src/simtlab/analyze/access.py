"""Access-pattern analyzer: what one warp's memory instruction or branch costs,
computed from its index expression, with no GPU.

* Global memory: the 32-byte sectors (and 128-byte lines) a warp's request
  touches, and the fraction of fetched bytes it uses.
* Shared memory: 32 banks of 4 bytes. A warp's request is served in phases
  (all 32 lanes for 4-byte accesses, half-warps for 8-byte, quarter-warps for
  16-byte); within a phase, lanes reading distinct words of one bank serialise
  (the same word is a broadcast). Wavefronts beyond one per phase are the bank
  conflicts Nsight Compute counts.
* Branches: which lanes take each side of a condition (divergence).

An index expression is a Python callable `f(tx, ty, tz, bx, by, bz)` returning
an element index, or None for a lane that does not access memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

__all__ = ["Block", "lane_ids", "addresses", "GlobalAccess", "global_access", "SharedAccess", "shared_access",
           "Divergence", "divergence", "ANALYSES", "run_analysis"]

WARP, SECTOR, LINE, BANKS, BANK_BYTES = 32, 32, 128, 32, 4


@dataclass(frozen=True)
class Block:
    x: int
    y: int = 1
    z: int = 1

    @property
    def threads(self) -> int:
        return self.x * self.y * self.z


def lane_ids(block: Block, warp: int = 0) -> list[tuple[int, int, int] | None]:
    """(tx, ty, tz) of each lane of a warp (None past the end of the block): x varies fastest."""
    out = []
    for lane in range(WARP):
        t = warp * WARP + lane
        if t >= block.threads:
            out.append(None)
            continue
        out.append((t % block.x, (t // block.x) % block.y, t // (block.x * block.y)))
    return out


Index = Callable[[int, int, int, int, int, int], "int | None"]


def addresses(index: Index, block: Block, warp: int = 0, block_idx: tuple[int, int, int] = (0, 0, 0),
              elem_bytes: int = 4) -> list[int | None]:
    out = []
    for lane in lane_ids(block, warp):
        if lane is None:
            out.append(None)
            continue
        i = index(*lane, *block_idx)
        out.append(None if i is None else i * elem_bytes)
    return out


@dataclass(frozen=True)
class GlobalAccess:
    sectors: int  # 32-byte sectors per request
    lines: int  # 128-byte lines per request
    bytes_requested: int  # distinct bytes the active lanes ask for
    active_lanes: int

    @property
    def efficiency(self) -> float:
        """Used bytes / fetched bytes (sectors x 32)."""
        return self.bytes_requested / (self.sectors * SECTOR) if self.sectors else 0.0


def global_access(addrs: list[int | None], access_bytes: int = 4) -> GlobalAccess:
    active = [a for a in addrs if a is not None]
    sectors, lines, used = set(), set(), set()
    for a in active:
        sectors.update(range(a // SECTOR, (a + access_bytes - 1) // SECTOR + 1))
        lines.update(range(a // LINE, (a + access_bytes - 1) // LINE + 1))
        used.update(range(a, a + access_bytes))
    return GlobalAccess(len(sectors), len(lines), len(used), len(active))


@dataclass(frozen=True)
class SharedAccess:
    wavefronts: int
    phases: int  # phases with an active lane: the ideal number of wavefronts
    ways: int  # worst serialisation within one phase

    @property
    def conflicts(self) -> int:
        return self.wavefronts - self.phases


def shared_access(addrs: list[int | None], access_bytes: int = 4) -> SharedAccess:
    if access_bytes not in (1, 2, 4, 8, 16):
        raise ValueError(f"shared-memory accesses are 1, 2, 4, 8 or 16 bytes, not {access_bytes}")
    per_phase = WARP if access_bytes <= 4 else (BANKS * BANK_BYTES) // access_bytes  # 32, 16 or 8 lanes
    wavefronts = phases = ways = 0
    for start in range(0, WARP, per_phase):
        words_by_bank: dict[int, set[int]] = {}
        for a in addrs[start : start + per_phase]:
            if a is None:
                continue
            for word in range(a // BANK_BYTES, (a + access_bytes - 1) // BANK_BYTES + 1):
                words_by_bank.setdefault(word % BANKS, set()).add(word)
        if not words_by_bank:
            continue
        w = max(len(s) for s in words_by_bank.values())
        wavefronts += w
        phases += 1
        ways = max(ways, w)
    return SharedAccess(wavefronts, phases, ways)


@dataclass(frozen=True)
class Divergence:
    active: int
    taken: int
    not_taken: int

    @property
    def paths(self) -> int:
        return (self.taken > 0) + (self.not_taken > 0)

    @property
    def divergent(self) -> bool:
        return self.paths == 2

    @property
    def work_fraction(self) -> float:
        """Lanes executing the guarded work over the warp's active lanes (the rest idle through it)."""
        return self.taken / self.active if self.active else 0.0


def divergence(condition: Callable[[int, int, int, int, int, int], bool], block: Block, warp: int = 0,
               block_idx: tuple[int, int, int] = (0, 0, 0)) -> Divergence:
    lanes = [lane for lane in lane_ids(block, warp) if lane is not None]
    taken = sum(bool(condition(*lane, *block_idx)) for lane in lanes)
    return Divergence(len(lanes), taken, len(lanes) - taken)


# --- the ladders' key accesses ---------------------------------------------------------------

K, N = 4096, 4096  # leading dimensions for the GEMM examples


def _gemm():
    naive = Block(16, 16)  # rung 1: threadIdx.x walks rows of C
    coalesced = Block(32, 8)  # rung 2: threadIdx.x walks columns
    return {
        "gemm/01_naive A load": ("global", lambda: global_access(addresses(lambda tx, ty, tz, bx, by, bz: tx * K, naive))),
        "gemm/01_naive B load": ("global", lambda: global_access(addresses(lambda tx, ty, tz, bx, by, bz: ty, naive))),
        "gemm/02_coalesced A load": ("global", lambda: global_access(addresses(lambda tx, ty, tz, bx, by, bz: ty * K, coalesced))),
        "gemm/02_coalesced B load": ("global", lambda: global_access(addresses(lambda tx, ty, tz, bx, by, bz: tx, coalesced))),
        # rungs 5-6: thread (trow, tcol) = (tid / 16, tid % 16) reads 8 contiguous B values at tcol*8 (LDS.128 x2)
        "gemm/06_vectorized B fragment (LDS.128)": (
            "shared", lambda: shared_access(addresses(lambda tx, *_: (tx % 16) * 8, Block(256)), 16)),
        "gemm/07_bank_conflict_free B fragment (LDS.128)": (
            "shared", lambda: shared_access(addresses(lambda tx, *_: (tx % 16) * 4, Block(256)), 16)),
        # rung 6 stores A transposed: thread t writes As[(k + i) * 128 + t / 2] with k = (t % 2) * 4
        "gemm/06_vectorized A transposed store (STS.32)": (
            "shared", lambda: shared_access(addresses(lambda tx, *_: (tx % 2) * 4 * 128 + tx // 2, Block(256)), 4)),
        "gemm/07_bank_conflict_free A transposed store (STS.32)": (
            "shared", lambda: shared_access(addresses(lambda tx, *_: (tx % 2) * 4 * 132 + tx // 2, Block(256)), 4)),
        # rung 8: lane's 4-column group (lane % 8) * 4 inside a 32-column warp sub-tile
        "gemm/08_warptiling B fragment (LDS.128)": (
            "shared", lambda: shared_access(addresses(lambda tx, *_: (tx % 8) * 4, Block(256)), 16)),
    }


def _transpose():
    b = Block(32, 8)
    return {
        "transpose naive read (in[y][x])": (
            "global", lambda: global_access(addresses(lambda tx, ty, tz, bx, by, bz: ty * 4096 + tx, b))),
        "transpose naive write (out[x][y])": (
            "global", lambda: global_access(addresses(lambda tx, ty, tz, bx, by, bz: tx * 4096 + ty, b))),
        "transpose tile[32][32] column read": (
            "shared", lambda: shared_access(addresses(lambda tx, ty, *_: tx * 32 + ty, b), 4)),
        "transpose tile[32][33] column read (padded)": (
            "shared", lambda: shared_access(addresses(lambda tx, ty, *_: tx * 33 + ty, b), 4)),
        # rung 5: a warp covers 4 rows x 8 float4; lane reads tile[c][r], c = 4 * (lane % 8), r = lane / 8
        "transpose wide tile[64][65] column read": (
            "shared", lambda: shared_access(addresses(lambda tx, *_: 4 * (tx % 8) * 65 + tx // 8, Block(256)), 4)),
    }


def _reduction():
    b = Block(256)
    return {
        "reduction v0 tid % (2s) == 0, s=1": ("branch", lambda: divergence(lambda tx, *_: tx % 2 == 0, b)),
        "reduction v0 tid % (2s) == 0, s=8": ("branch", lambda: divergence(lambda tx, *_: tx % 16 == 0, b)),
        "reduction v1 sdata[2*s*tid], s=1": ("shared", lambda: shared_access(addresses(lambda tx, *_: 2 * tx, b), 4)),
        "reduction v1 sdata[2*s*tid], s=8": ("shared", lambda: shared_access(addresses(lambda tx, *_: 16 * tx, b), 4)),
        "reduction v2 tid < s, s=64, warp 1": ("branch", lambda: divergence(lambda tx, *_: tx < 64, b, warp=1)),
        "reduction v2 sdata[tid + s], s=64": ("shared", lambda: shared_access(addresses(lambda tx, *_: tx + 64, b), 4)),
    }


def _spmv():
    """A warp's loads of the matrix values on uniform rows of 16 nonzeros, rung 5's warp over a piece
    of a long row (wherever the piece starts), rung 4's walk over the products it staged in shared
    memory (thread t starts about t * IPT items in), and rung 6's gathers of x in column order."""
    b = Block(256)
    row = 16
    return {
        "spmv/01_scalar vals[row_ptr[r] + k] (a row a lane, 16 a row)": (
            "global", lambda: global_access(addresses(lambda tx, *_: row * tx, b))),
        "spmv/02_vector vals[row_ptr[r] + lane] (16 lanes a row)": (
            "global", lambda: global_access(addresses(lambda tx, *_: row * (tx // 16) + tx % 16, b))),
        "spmv/03_sell vals[slice + 32 j + lane]": (
            "global", lambda: global_access(addresses(lambda tx, *_: tx, b))),
        "spmv/05_sell_split csr_vals[begin + lane] (a piece a warp, begin 5 past a line)": (
            "global", lambda: global_access(addresses(lambda tx, *_: 5 + tx, b))),
        # rung 6's gathers of x in a row block's column order, at two nonzeros a sector (a block's
        # nonzeros evenly over the columns, entry e at column 4e): lane l's j-th entry taken as
        # entry 4l + j (the first layout: 32 sectors) or as 32j + l (windows stored lane-major: 16)
        "spmv/06_row_blocks x[col] gather, entry 4l + j (j = 0)": (
            "global", lambda: global_access(addresses(lambda tx, *_: 4 * (4 * (tx % 32)), Block(32)))),
        "spmv/06_row_blocks x[col] gather, entry 32j + l (j = 0)": (
            "global", lambda: global_access(addresses(lambda tx, *_: 4 * (tx % 32), Block(32)))),
        "spmv/04_merge_path prod[t * IPT] walk, IPT 8": (
            "shared", lambda: shared_access(addresses(lambda tx, *_: 8 * tx, b), 4)),
        "spmv/04_merge_path prod[t * IPT] walk, IPT 7": (
            "shared", lambda: shared_access(addresses(lambda tx, *_: 7 * tx, b), 4)),
    }


def _sort():
    """The sort rungs' key accesses: rung 1's global step and its tile in shared memory at the
    shortest distance (j = 1: a thread's pair is 2p, 2p + 1), rung 3's thread reading its ITEMS (8)
    consecutive keys, rung 4's warp reading a round (item i of lane l at i * 32 + l), and rung 4's
    writes: scattered from registers (uniform keys: a warp's 32 keys carry 32 different digits, each
    bound for its own run, 2^24 keys / 256 digits apart) against STAGED (32 consecutive places of the
    tile in digit order: with 16 keys of a digit a tile - 4096 keys, 256 digits - two runs, each
    starting wherever the tiles before it left off)."""
    b = Block(256)
    run = 2 ** 24 // 256  # keys of one digit in the output
    return {
        "sort/01_bitonic_shared keys[2j(p / j) + p % j], j = 1": (
            "global", lambda: global_access(addresses(lambda tx, *_: 2 * tx, b))),
        "sort/01_bitonic_shared s[2j(t / j) + t % j] in a tile, j = 1": (
            "shared", lambda: shared_access(addresses(lambda tx, *_: 2 * tx, b), 4)),
        "sort/03_radix_lsd keys[t * ITEMS + i], ITEMS 8": (
            "global", lambda: global_access(addresses(lambda tx, *_: 8 * tx, b))),
        "sort/04_radix_onesweep keys[i * 32 + lane]": (
            "global", lambda: global_access(addresses(lambda tx, *_: tx, b))),
        "sort/04_radix_onesweep out[start[digit] + rank], scattered": (
            "global", lambda: global_access(addresses(lambda tx, *_: (tx * 157 + 11) % 256 * run + 40 + 3 * tx, b))),
        "sort/04_radix_onesweep STAGED out[start[d] + j - first[d]], runs of 16": (
            "global", lambda: global_access(addresses(lambda tx, *_: tx // 16 * run + 40 + 7 * (tx // 16) + tx % 16, b))),
    }


def _scan():
    """Rung 2's up-sweep at its second level (offset 2: thread t adds element 4t + 1 into 4t + 3),
    its tree indices as they are and with a word of padding every 32 (index + index / 32); and a
    warp's 16-byte loads (and stores, the same addresses) in rung 5 (a thread's 8 consecutive
    elements: lane l at 8l) against rung 6 (warp-striped groups: lane l at 4l)."""
    b = Block(256)
    return {
        "scan/05_decoupled_lookback x[8t + 4q], 16 bytes a lane": (
            "global", lambda: global_access(addresses(lambda tx, *_: 8 * tx, b), 16)),
        "scan/06_striped_lookback x[128g + 4 lane], 16 bytes a lane": (
            "global", lambda: global_access(addresses(lambda tx, *_: 4 * tx, b), 16)),
        "scan/02_blelloch s[4t + 1], unpadded": ("shared", lambda: shared_access(addresses(lambda tx, *_: 4 * tx + 1, b), 4)),
        "scan/02_blelloch s[k + k / 32], k = 4t + 1": (
            "shared", lambda: shared_access(addresses(lambda tx, *_: (4 * tx + 1) + (4 * tx + 1) // 32, b), 4)),
    }


def _branch():
    return {"branch i & 1 (even/odd lanes)": ("branch", lambda: divergence(lambda tx, *_: tx % 2 == 1, Block(256)))}


ANALYSES: dict[str, tuple[str, Callable]] = {**_gemm(), **_transpose(), **_reduction(), **_branch(), **_spmv(),
                                             **_sort(), **_scan()}


def run_analysis(name: str) -> dict:
    kind, fn = ANALYSES[name]
    r = fn()
    if kind == "global":
        return {"analysis": name, "kind": kind, "sectors_per_request": r.sectors, "lines": r.lines,
                "efficiency": r.efficiency}
    if kind == "shared":
        return {"analysis": name, "kind": kind, "wavefronts": r.wavefronts, "conflicts": r.conflicts, "ways": r.ways}
    return {"analysis": name, "kind": kind, "active": r.active, "taken": r.taken, "paths": r.paths,
            "divergent": r.divergent, "work_fraction": r.work_fraction}
