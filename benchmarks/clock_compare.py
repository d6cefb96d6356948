"""Rungs beside the family's references with the SM clock and board power each ran at.

Under a power limit two kernels can differ in time by the clock the card chose rather than by the
work they do a clock; dividing the speed by the clock separates the two.

    python benchmarks/clock_compare.py gemm_tc --rung 6 --size 4096:bf16 --size 4096:fp16 [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time

from rich.console import Console
from rich.table import Table


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("family")
    ap.add_argument("--rung", action="append", required=True)
    ap.add_argument("--size", action="append", required=True)
    ap.add_argument("--target-ms", type=float, default=1500.0, help="time per kernel: long enough for samples")
    ap.add_argument("--json")
    args = ap.parse_args()

    from simtlab.catalog import family
    from simtlab.ladder import LadderOptions, run_ladder
    from simtlab.tools.clock_log import ClockLog

    fam = family(args.family)
    windows: list[list[float]] = []
    with ClockLog() as log:
        rows = run_ladder(fam, args.size, [fam.rung(r) for r in args.rung], opts=LadderOptions(target_ms=args.target_ms),
                          on_step=lambda s: windows.append([time.time()]),
                          on_row=lambda r: windows[-1].append(time.time()))
    out = []
    for row, (t0, t1) in zip(rows, windows):
        c = log.summary(t0, t1)
        tflops = (row.gflops or 0) / 1e3
        per_ghz = tflops / (c["sm_mhz"] / 1e3) if c["sm_mhz"] and tflops else None
        out.append({**row.as_dict(), **c, "tflops_per_ghz": per_ghz})
    table = Table(title=f"{fam.name}: speed, clock and power", title_justify="left")
    for col in ("size", "kernel", "status", "TFLOP/s", "% of ref", "SM MHz", "W", "samples", "TFLOP/s per GHz"):
        table.add_column(col)
    for r in out:
        table.add_row(r["problem"], r["name"], r["status"], f"{(r['gflops'] or 0) / 1e3:.1f}",
                      f"{r['pct_of_reference']:.1f}" if r["pct_of_reference"] else "", str(r["sm_mhz"]),
                      str(r["watts"]), str(r["samples"]), f"{r['tflops_per_ghz']:.1f}" if r["tflops_per_ghz"] else "")
    Console(width=200).print(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2, default=str)


if __name__ == "__main__":
    main()
