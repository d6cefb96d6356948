"""Which kernel a `simtlab.gemm_tc` / `simtlab.gemm` call runs, measured rather than guessed.

Each GEMM has a big-tile rung (tensor cores: rung 6, warp-specialised wgmma in clusters; fp32:
rung 10, the tuned warp tiles) and a split rung for the shapes that rung leaves SMs idle on
(skinny, decode, long K, small: gemm_tc rung 7 on mma.sync, gemm rung 14 on the CUDA cores, K split
over a cluster, tiles from a GEMV's up) at a few named tiles and splits: the candidates.
`benchmarks/gemm_dispatch_table.py` times every candidate over a grid of shapes on a GPU and
writes, per shape, each candidate's time: the table committed under `ops/tables/` for the
family and the GPU's architecture. A call's shape takes the fastest candidate of the nearest
measured shape (distance in log2 of M, N and K; a batch counts into M); shapes far from every
measured one take the rule below, which the table's run also grades (leave-one-out). A GPU with no
table runs the big-tile rung for every shape. A choice says what it ran and why (`Choice.why`)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from .base import sm_count
from .split import DT, MAX_GRID_YZ, OUT, split_layout

__all__ = ["Choice", "Dispatch", "TC", "FP32", "TILES", "SPLITS", "candidates", "choose", "choose_fp32", "rule",
           "split_config", "load_table", "nearest"]

TABLES = Path(__file__).resolve().parent / "tables"
# gemm_tc rung 7's tiles: (BM, BN, BK, WM, WN, WK, STAGES). The small side of C picks BN; a GEMV's
# 8-wide tile streams its matrix through an 8-deep ring with two warps on each 16 rows' k steps.
TILES: dict[str, dict[str, int]] = {
    "32x8": dict(BM=32, BN=8, BK=64, WM=16, WN=8, WK=4, STAGES=8),
    "64x8": dict(BM=64, BN=8, BK=64, WM=16, WN=8, WK=2, STAGES=8),
    "64x16": dict(BM=64, BN=16, BK=64, WM=16, WN=16, WK=2, STAGES=8),
    "64x32": dict(BM=64, BN=32, BK=64, WM=16, WN=32, WK=2, STAGES=6),
    "64x64": dict(BM=64, BN=64, BK=64, WM=32, WN=32, WK=2, STAGES=4),
    "128x64": dict(BM=128, BN=64, BK=64, WM=32, WN=64, WK=2, STAGES=4),
    "128x128": dict(BM=128, BN=128, BK=32, WM=64, WN=32, WK=1, STAGES=4),
}
# gemm rung 14's (fp32, CUDA cores): (BM, BN, BK, TM, TN, WINDOW): 4x4 or 8x4 outputs a thread,
# two 16-deep slices summed plainly before each compensated addition
FP32_TILES: dict[str, dict[str, int]] = {
    "128x8": dict(BM=128, BN=8, BK=16, TM=4, TN=4, WINDOW=2),
    "64x16": dict(BM=64, BN=16, BK=16, TM=4, TN=4, WINDOW=2),
    "64x32": dict(BM=64, BN=32, BK=16, TM=4, TN=4, WINDOW=2),
    "64x64": dict(BM=64, BN=64, BK=16, TM=4, TN=4, WINDOW=2),
    "128x64": dict(BM=128, BN=64, BK=16, TM=8, TN=4, WINDOW=2),
}
SPLITS = (1, 2, 4, 8)  # blocks a cluster that share one tile's K (8: the portable cluster limit)
MIN_SLICES_A_SPLIT = 4  # a split of K keeps at least this many BK-deep slices
FAR = 2.5  # beyond this log2 distance from every measured shape, the rule decides


@dataclass(frozen=True)
class Dispatch:
    """One GEMM's candidates: its big-tile rung (named `big_name` in tables) and its split rung's
    tiles (named PREFIX:TILE:sS), which tile the rule gives a small side up to each bound, and its
    inputs' bytes."""
    family: str
    big: str
    big_name: str
    prefix: str
    tiles: dict
    by_short: tuple  # ((largest small side, tile), ...), ascending
    few_rows: str | None  # the half-height GEMV tile where few tile rows leave SMs idle (tensor cores)
    element: int
    fixed: dict = field(default_factory=dict)


TC = Dispatch("gemm_tc", "wgmma_cluster", "r6", "r7", TILES,
              ((8, "64x8"), (16, "64x16"), (32, "64x32"), (64, "64x64"), (96, "128x64"), (math.inf, "128x128")),
              "32x8", 2)
FP32 = Dispatch("gemm", "tuned", "r10", "r14", FP32_TILES,
                ((8, "128x8"), (16, "64x16"), (32, "64x32"), (64, "64x64"), (math.inf, "128x64")), None, 4)
RUNG6 = TC.big_name


def candidates(d: Dispatch = TC) -> dict[str, tuple[str, dict]]:
    """Every candidate by name: the big-tile rung at its size defaults, the split rung at each tile
    and split."""
    out = {d.big_name: (d.big, {})}
    for tile, params in d.tiles.items():
        for s in SPLITS:
            out[f"{d.prefix}:{tile}:s{s}"] = ("split_k", {**params, "SPLITS": s})
    return out


@dataclass(frozen=True)
class Choice:
    rung: str  # the catalog name: the big-tile rung's, or "split_k"
    params: dict  # the split rung: its tile, split and what the problem fixes (swap, layouts, alignments); else {}
    why: str

    @property
    def name(self) -> str:
        return self.why.split(":", 1)[0]


def _batch(p) -> int:
    return getattr(p, "batch", 1)


def rule(p, sms: int, d: Dispatch = TC) -> str:
    """The candidate a shape takes without a measurement: the big-tile rung where both sides of C
    are 256 or more and its 128x256 tiles fill the SMs, else the split rung's (rule_split)."""
    tiles = -(-p.M // 128) * -(-p.N // 256) * _batch(p)
    return d.big_name if min(p.M, p.N) >= 256 and tiles >= sms else rule_split(p, sms, d)


def rule_split(p, sms: int, d: Dispatch = TC) -> str:
    """The split rung at the tile the small side of C fits and the smallest split that puts a
    block on every SM, each split keeping MIN_SLICES_A_SPLIT slices."""
    long, short = max(p.M, p.N), min(p.M, p.N)
    tile = next(name for bound, name in d.by_short if short <= bound)
    t = d.tiles[tile]
    if d.few_rows and short <= 8 and -(-long // t["BM"]) * _batch(p) < sms // 4:
        tile, t = d.few_rows, d.tiles[d.few_rows]  # (few rows: half-height tiles double the blocks)
    tiles = -(-long // t["BM"]) * -(-short // t["BN"]) * _batch(p)
    slices = -(-p.K // t["BK"])
    split = 1
    for s in SPLITS:
        if slices // s < MIN_SLICES_A_SPLIT:
            break
        split = s
        if tiles * s >= sms:
            break
    return f"{d.prefix}:{tile}:s{split}"


@cache
def load_table(arch: str, family: str = "gemm_tc") -> dict | None:
    """The committed table of a family for an architecture (e.g. sm_90), or None."""
    path = TABLES / f"{family}_{arch}.json"
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


def pick(p, sms: int, arch: str | None, d: Dispatch = TC) -> tuple[str, str]:
    """(candidate name, why) for a problem: the table's nearest row, else the rule. A GPU with no
    table keeps the big-tile rung everywhere: the table's run is also where each candidate was
    first checked on that GPU (a candidate that computed a wrong result there is not in it)."""
    table = load_table(arch, d.family) if arch else None
    if table is None:
        return d.big_name, (f"{d.big_name}: no measured table for {d.family} on {arch or 'this GPU'} "
                            "(benchmarks/gemm_dispatch_table.py makes one); the big-tile rung for every shape")
    row, dist = nearest(table, p.M * _batch(p), p.N, p.K)
    if row is not None and dist <= FAR:
        name = fastest(row)
        return name, (f"{name}: fastest at the nearest measured shape {row['M']}x{row['N']}x{row['K']} "
                      f"(log2 distance {dist:.2f}) of table {table['run']} ({table['device']})")
    name = rule(p, sms, d)
    return name, f"{name}: the rule (no measured shape within reach of table {table['run']})"


def _arch(device) -> str | None:
    if device is None:
        return "sm_90"
    cc = tuple(device.compute_capability)
    return f"sm_{cc[0]}{cc[1]}"


def _chosen(p, d: Dispatch, name: str, why: str) -> Choice:
    rung, params = candidates(d)[name]
    if rung != "split_k":
        return Choice(rung, {}, why)
    full = {**params, **split_problem_params(p, params, d)}
    if -(-max(p.M, p.N) // full["BM"]) > MAX_GRID_YZ or _batch(p) * full["SPLITS"] > MAX_GRID_YZ:
        return Choice(d.big, {}, f"{d.big_name}: {p.M}x{p.N}x{p.K} has more tiles than the split rung's grid holds")
    return Choice(rung, full, why + (" - swapped, C^T = B^T A^T" if full["TC"] else ""))


def choose(p, device=None) -> Choice:
    """What simtlab.gemm_tc runs for `p` (a gemm_tc TcProblem) on a Hopper GPU (`device` a
    DeviceInfo; None: an H200's figures, for plans made with no GPU). TF32 inputs and problems
    rung 7 cannot grid always take rung 6."""
    if p.dtype == "float32":
        return Choice(TC.big, {}, f"{TC.big_name}: TF32 inputs run on rung 6 only")
    name, why = pick(p, sm_count(device), _arch(device), TC)
    return _chosen(p, TC, name, why)


def choose_fp32(p, device=None) -> Choice:
    """What simtlab.gemm (precision 'ieee') runs for `p`: rung 10 or rung 14 at a tile and split,
    from the fp32 table for the GPU (none: rung 10 for every shape, as before the table)."""
    name, why = pick(p, sm_count(device), _arch(device), FP32)
    return _chosen(p, FP32, name, why)


def split_problem_params(p, tile: dict, d: Dispatch = TC) -> dict:
    """What the problem fixes of a split rung's build: whether it runs swapped (the longer side of
    C on the kernel's M), the operands' layouts and row alignments, and (tensor cores) the element
    and output types."""
    layout = split_layout(p, p.N > p.M, d.element)
    if d.family == "gemm":
        return layout.params
    return {"DT": DT[p.dtype], "OUT": OUT[p.out], **layout.params}


def split_config(p, device=None, d: Dispatch = TC) -> dict:
    """A split rung's parameters for `p` (its size defaults, for the ladder and the tuner): the tile
    and split the dispatcher would run it at, the rule's where it would run the big-tile rung."""
    choice = choose(p, device) if d is TC else choose_fp32(p, device)
    if choice.rung == "split_k":
        return dict(choice.params)
    _, params = candidates(d)[rule_split(p, sm_count(device), d)]
    return {**params, **split_problem_params(p, params, d)}
