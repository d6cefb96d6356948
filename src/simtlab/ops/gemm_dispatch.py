"""Which tensor-core kernel a `simtlab.gemm_tc` call runs, measured rather than guessed.

The candidates are rung 6 (warp-specialised wgmma in clusters: the big products) and rung 7
(split-K in clusters over mma.sync tiles from 32x8: skinny, decode, long-K and small products) at a
few named tiles and splits. `benchmarks/gemm_dispatch_table.py` times every candidate over a grid
of shapes on a GPU and writes, per shape, each candidate's time: the table committed under
`ops/tables/` for the GPU's architecture. A call's shape takes the fastest candidate of the
nearest measured shape (distance in log2 of M, N and K; a batch counts into M); shapes far from
every measured one take the rule below, which the table's run also grades (leave-one-out). A GPU
with no table runs rung 6 for every shape. A choice says what it ran and why (`Choice.why`)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .base import sm_count
from .gemm_tc import TcProblem, split_layout

__all__ = ["Choice", "TILES", "SPLITS", "candidates", "choose", "rule", "split_config", "load_table", "nearest"]

TABLES = Path(__file__).resolve().parent / "tables"
# Rung 7's tiles: (BM, BN, BK, WM, WN, WK, STAGES). The small side of C picks BN; a GEMV's 8-wide
# tile streams its matrix through an 8-deep ring with two warps on each 16 rows' k steps.
TILES: dict[str, dict[str, int]] = {
    "32x8": dict(BM=32, BN=8, BK=64, WM=16, WN=8, WK=4, STAGES=8),
    "64x8": dict(BM=64, BN=8, BK=64, WM=16, WN=8, WK=2, STAGES=8),
    "64x16": dict(BM=64, BN=16, BK=64, WM=16, WN=16, WK=2, STAGES=8),
    "64x32": dict(BM=64, BN=32, BK=64, WM=16, WN=32, WK=2, STAGES=6),
    "64x64": dict(BM=64, BN=64, BK=64, WM=32, WN=32, WK=2, STAGES=4),
    "128x64": dict(BM=128, BN=64, BK=64, WM=32, WN=64, WK=2, STAGES=4),
    "128x128": dict(BM=128, BN=128, BK=32, WM=64, WN=32, WK=1, STAGES=4),
}
SPLITS = (1, 2, 4, 8)  # blocks a cluster that share one tile's K (8: the portable cluster limit)
MIN_SLICES_A_SPLIT = 4  # a split of K keeps at least this many BK-deep slices
FAR = 2.5  # beyond this log2 distance from every measured shape, the rule decides
RUNG6 = "r6"


def candidates() -> dict[str, tuple[str, dict]]:
    """Every candidate by name: rung 6 at its size defaults, rung 7 at each tile and split."""
    out = {RUNG6: ("wgmma_cluster", {})}
    for tile, params in TILES.items():
        for s in SPLITS:
            out[f"r7:{tile}:s{s}"] = ("split_k", {**params, "SPLITS": s})
    return out


@dataclass(frozen=True)
class Choice:
    rung: str  # the catalog name: "wgmma_cluster" or "split_k"
    params: dict  # rung 7: its tile, split and what the problem fixes (swap, layouts, alignments); rung 6: {}
    why: str

    @property
    def name(self) -> str:
        return self.why.split(":", 1)[0]


def _long_short(p: TcProblem) -> tuple[int, int]:
    return max(p.M, p.N), min(p.M, p.N)


def rule(p: TcProblem, sms: int) -> str:
    """The candidate a shape takes without a measurement: rung 6 where both sides of C are 256 or
    more and its 128x256 tiles fill the SMs, else rung 7's (rule_split)."""
    long, short = _long_short(p)
    tiles6 = -(-p.M // 128) * -(-p.N // 256) * p.batch
    return RUNG6 if short >= 256 and tiles6 >= sms else rule_split(p, sms)


def rule_split(p: TcProblem, sms: int) -> str:
    """Rung 7 at the tile the small side of C fits and the smallest split that puts a block on every
    SM, each split keeping MIN_SLICES_A_SPLIT slices."""
    long, short = _long_short(p)
    tile = ("64x8" if short <= 8 else "64x16" if short <= 16 else "64x32" if short <= 32 else
            "64x64" if short <= 64 else "128x64" if short <= 96 else "128x128")
    if tile == "64x8" and -(-long // 64) * p.batch < sms // 4:
        tile = "32x8"  # (few rows: half-height tiles double the blocks)
    t = TILES[tile]
    tiles = -(-long // t["BM"]) * -(-short // t["BN"]) * p.batch
    slices = -(-p.K // t["BK"])
    split = 1
    for s in SPLITS:
        if slices // s < MIN_SLICES_A_SPLIT:
            break
        split = s
        if tiles * s >= sms:
            break
    return f"r7:{tile}:s{split}"


@cache
def load_table(arch: str) -> dict | None:
    """The committed table for an architecture (e.g. sm_90), or None."""
    path = TABLES / f"gemm_tc_{arch}.json"
    if not path.is_file():
        return None
    return json.loads(path.read_text())


def _point(M: int, N: int, K: int) -> tuple[float, float, float]:
    return math.log2(M), math.log2(N), math.log2(K)


def nearest(table: dict, M: int, N: int, K: int, exclude=None) -> tuple[dict, float] | tuple[None, float]:
    """The measured row nearest (M, N, K) in log2 space, and its distance; `exclude` leaves one
    row out (the table's own check)."""
    best, best_d = None, math.inf
    x = _point(M, N, K)
    for row in table["rows"]:
        if row is exclude:
            continue
        d = math.dist(x, _point(row["M"], row["N"], row["K"]))
        if d < best_d:
            best, best_d = row, d
    return best, best_d


def fastest(row: dict) -> str:
    return min(row["us"], key=row["us"].get)


def pick(p: TcProblem, sms: int, arch: str | None) -> tuple[str, str]:
    """(candidate name, why) for a problem: the table's nearest row, else the rule. A GPU with no
    table keeps rung 6 everywhere: the table's run is also where each candidate was first checked
    on that GPU (a candidate that computed a wrong result there is not in it)."""
    table = load_table(arch) if arch else None
    if table is None:
        return RUNG6, (f"{RUNG6}: no measured table for {arch or 'this GPU'} (benchmarks/gemm_dispatch_table.py "
                       "makes one); rung 6 for every shape")
    m = p.M * p.batch
    row, d = nearest(table, m, p.N, p.K)
    if row is not None and d <= FAR:
        name = fastest(row)
        return name, (f"{name}: fastest at the nearest measured shape {row['M']}x{row['N']}x{row['K']} "
                      f"(log2 distance {d:.2f}) of table {table['run']} ({table['device']})")
    name = rule(p, sms)
    return name, f"{name}: the rule (no measured shape within reach of table {table['run']})"


def _arch(device) -> str | None:
    if device is None:
        return "sm_90"
    cc = tuple(device.compute_capability)
    return f"sm_{cc[0]}{cc[1]}"


def choose(p: TcProblem, device=None) -> Choice:
    """What simtlab.gemm_tc runs for `p` on a Hopper GPU (`device` a DeviceInfo; None: an H200's
    figures, for plans made with no GPU). TF32 inputs and problems rung 7 cannot grid always take
    rung 6."""
    if p.dtype == "float32":
        return Choice("wgmma_cluster", {}, f"{RUNG6}: TF32 inputs run on rung 6 only")
    name, why = pick(p, sm_count(device), _arch(device))
    rung, params = candidates()[name]
    if rung == "wgmma_cluster":
        return Choice(rung, {}, why)
    full = {**params, **split_problem_params(p, params)}
    from .gemm_tc import MAX_GRID_YZ

    if -(-max(p.M, p.N) // full["BM"]) > MAX_GRID_YZ or p.batch * full["SPLITS"] > MAX_GRID_YZ:
        return Choice("wgmma_cluster", {}, f"{RUNG6}: {p.label} has more tiles than rung 7's grid holds")
    return Choice(rung, full, why + (" - swapped, C^T = B^T A^T" if full["TC"] else ""))


def split_problem_params(p: TcProblem, tile: dict) -> dict:
    """What the problem fixes of a rung 7 build: element and output types, whether it runs swapped
    (the longer side of C on the kernel's M), the operands' layouts and row alignments."""
    from .gemm_tc import DT, OUT

    layout = split_layout(p, p.N > p.M)
    return {"DT": DT[p.dtype], "OUT": OUT[p.out], **layout.params}


def split_config(p: TcProblem, device=None) -> dict:
    """Rung 7's parameters for `p` (its size defaults, for the ladder and the tuner): the tile and
    split the dispatcher would run it at, rung 7's rule where it would run rung 6 instead."""
    choice = choose(p, device)
    if choice.rung == "split_k":
        return dict(choice.params)
    _, params = candidates()[rule_split(p, sm_count(device))]
    return {**params, **split_problem_params(p, params)}
