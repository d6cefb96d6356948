"""Sweep tile configurations of the tuned GEMM rung on this GPU and store every
verified measurement (the tuner's history that rung 10 reads its parameters
from). Prints a table; `--json` writes the rows.

    python benchmarks/gemm_sweep.py --size 4096 --size 8192 [--db results.db]
"""

from __future__ import annotations

import argparse
import json
import sys

from rich.console import Console
from rich.table import Table

from param_sweep import steps  # benchmarks/ is on sys.path when a script here runs
from simtlab.catalog import family
from simtlab.device import current_sm_clock_mhz, device_info
from simtlab.ladder import LadderOptions, run_ladder
from simtlab.store import Store

BASE = dict(BM=128, BN=128, BK=8, WM=32, WN=64, WMITER=2, WNITER=2, STAGES=3, MINB=2, GROUP_M=8)
# Round 2 starts from round 1's winner on the H200 (128x256 block, 16x8 outputs per thread, BK=16).
BASE2 = dict(BM=128, BN=256, BK=16, WM=64, WN=64, WMITER=4, WNITER=2, STAGES=3, MINB=1, GROUP_M=8)
ROUND2 = [
    {},
    {"BK": 32, "STAGES": 2}, {"BK": 32, "STAGES": 3},
    {"STAGES": 2}, {"STAGES": 4},
    {"WMITER": 2, "WNITER": 4},                       # 8x16 per thread
    {"BM": 256, "BN": 128},                           # 256x128 block, 16x8 per thread
    {"BN": 128, "WMITER": 4, "WNITER": 2, "MINB": 2, "BK": 32},  # 4 warps, two blocks per SM
    {"GROUP_M": 4}, {"GROUP_M": 16},
]
# Round 3: the same neighbourhood after the cp.async loader lost its per-slice address arithmetic.
ROUND3 = [
    {},
    {"BK": 32, "STAGES": 2}, {"BK": 32, "STAGES": 3},
    {"STAGES": 2}, {"STAGES": 4},
    {"BN": 128, "MINB": 2},                           # two 4-warp blocks per SM: barriers interleave
    {"BN": 128, "MINB": 2, "BK": 32, "STAGES": 2},
    {"BM": 192, "BN": 192, "WM": 48, "WMITER": 3},    # 12x8 per thread, 12 warps
    {"BM": 256, "BN": 128},
]
# Round 4: the tuned rung's size classes, measured at every reported size; the ladder's rung 10
# then takes the fastest verified one per size from the store (how the tuner feeds it).
def _size_classes():
    from simtlab.ops.gemm import TUNED_LARGE, TUNED_MEDIUM, TUNED_PREDICATED, TUNED_SMALL

    return TUNED_LARGE, [{}, *({k: v for k, v in c.items() if TUNED_LARGE.get(k) != v}
                               for c in (TUNED_MEDIUM, TUNED_SMALL, TUNED_PREDICATED))]


CANDIDATES = [
    {},
    {"STAGES": 2}, {"STAGES": 4},
    {"BK": 16, "STAGES": 2}, {"BK": 16, "STAGES": 3}, {"BK": 16, "STAGES": 4},
    {"WM": 64, "WN": 32},
    {"GROUP_M": 1}, {"GROUP_M": 16},
    # 16x8 / 8x16 outputs per thread: twice the FMAs per shared load, one block per SM
    {"BN": 256, "WM": 64, "WN": 64, "WMITER": 4, "WNITER": 2, "MINB": 1},
    {"BM": 256, "WM": 64, "WN": 64, "WMITER": 2, "WNITER": 4, "MINB": 1},
    {"BN": 256, "WM": 64, "WN": 64, "WMITER": 4, "WNITER": 2, "MINB": 1, "BK": 16, "STAGES": 3},
    # 4 warps of 16x8 per thread, two blocks per SM
    {"WM": 64, "WN": 64, "WMITER": 4, "WNITER": 2, "MINB": 2},
    {"WM": 64, "WN": 64, "WMITER": 4, "WNITER": 2, "MINB": 2, "BK": 16, "STAGES": 3},
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", action="append", default=None)
    ap.add_argument("--db", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--target-ms", type=float, default=300.0)
    ap.add_argument("--round", type=int, default=1, choices=(1, 2, 3, 4))
    args = ap.parse_args(argv)
    base, candidates = {1: (BASE, CANDIDATES), 2: (BASE2, ROUND2), 3: (BASE2, ROUND3), 4: _size_classes()}[args.round]
    sizes = args.size or ["4096", "8192"]
    fam = family("gemm")
    rung = fam.rung("tuned")
    dev = device_info()
    store = Store(args.db)
    run_id = store.start_run("benchmarks/gemm_sweep.py " + " ".join(sys.argv[1:]), dev, current_sm_clock_mhz())
    rows = []
    for i, cand in steps(enumerate(candidates), f"gemm/10_tuned round {args.round}"):
        params = {**base, **cand}
        for r in run_ladder(fam, sizes, [rung], store, run_id,
                            LadderOptions(target_ms=args.target_ms, overrides={"tuned": params}, verify=True),
                            reference_cache=REF_CACHE):
            if r.is_reference:
                continue
            rows.append({"candidate": i, "params": params, **r.as_dict()})
    t = Table(title=f"gemm/10_tuned sweep round {args.round} on {dev.name}; base {base}", title_justify="left")
    for col in ("#", "problem", "changes", "TFLOP/s", "% cuBLAS", "regs", "occ", "status"):
        t.add_column(col)
    for r in sorted(rows, key=lambda r: (r["problem"], -(r["gflops"] or 0))):
        changes = " ".join(f"{k}={v}" for k, v in candidates[r["candidate"]].items()) or "(base)"
        t.add_row(str(r["candidate"]), r["problem"], changes, f"{(r['gflops'] or 0) / 1e3:.2f}",
                  f"{r['pct_of_reference'] or 0:.1f}", str(r["registers"]), f"{(r['occupancy'] or 0) * 100:.0f}%",
                  r["status"] if r["status"] == "ok" else f"{r['status']}: {(r['error'] or '')[:60]}")
    Console(width=150).print(t)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2, default=str)
    return 0


REF_CACHE: dict = {}

if __name__ == "__main__":
    sys.exit(main())
