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

from simtlab.catalog import family
from simtlab.device import current_sm_clock_mhz, device_info
from simtlab.ladder import LadderOptions, run_ladder
from simtlab.store import Store

BASE = dict(BM=128, BN=128, BK=8, WM=32, WN=64, WMITER=2, WNITER=2, STAGES=3, MINB=2, GROUP_M=8)
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
    args = ap.parse_args(argv)
    sizes = args.size or ["4096", "8192"]
    fam = family("gemm")
    rung = fam.rung("tuned")
    dev = device_info()
    store = Store(args.db)
    run_id = store.start_run("benchmarks/gemm_sweep.py " + " ".join(sys.argv[1:]), dev, current_sm_clock_mhz())
    rows = []
    for i, cand in enumerate(CANDIDATES):
        params = {**BASE, **cand}
        for r in run_ladder(fam, sizes, [rung], store, run_id,
                            LadderOptions(target_ms=args.target_ms, overrides={"tuned": params}, verify=True),
                            reference_cache=REF_CACHE):
            if r.is_reference:
                continue
            rows.append({"candidate": i, "params": params, **r.as_dict()})
    t = Table(title=f"gemm/10_tuned sweep on {dev.name}", title_justify="left")
    for col in ("#", "problem", "changes", "TFLOP/s", "% cuBLAS", "regs", "occ", "status"):
        t.add_column(col)
    for r in sorted(rows, key=lambda r: (r["problem"], -(r["gflops"] or 0))):
        changes = " ".join(f"{k}={v}" for k, v in CANDIDATES[r["candidate"]].items()) or "(base)"
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
