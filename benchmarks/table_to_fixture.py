"""A brute-force table from a GPU run (`simtlab tune ... --strategy random --json`, the gpu_run
table phases) as a committed fixture the replays read: the parameter names, one row per
configuration (its values, then the median ms or null where it failed), fastest first, and where
it came from (device, rung, problem, commit, date, command).

    python benchmarks/table_to_fixture.py RUN/table_x.json --rung gemm_tc/06_wgmma_cluster \
        --problem 4096x4096x4096:bf16 --commit bf0414a --date 2026-12-04 --command "..." -o tests/fixtures/x.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from simtlab.tune.replay import load_table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_json", type=Path)
    ap.add_argument("--rung", required=True, help="the rung's id, e.g. gemm/10_tuned")
    ap.add_argument("--problem", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--date", required=True)
    ap.add_argument("--command", required=True, help="the command that measured it")
    ap.add_argument("--device", default="NVIDIA H200")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--sample", help="the table is not the whole space: say which part it is (it is replayed "
                                     "as a space of its own configurations)")
    ap.add_argument("-o", "--out", type=Path, required=True)
    args = ap.parse_args()
    t = load_table(args.run_json)
    rows = sorted(([*(dict(k)[n] for n in t.params), ms] for k, ms in t.times.items()),
                  key=lambda r: (r[-1] is None, r[-1] or 0.0))
    failed = sum(r[-1] is None for r in rows)
    args.out.write_text(json.dumps({
        "device": args.device, "arch": args.arch, "rung": args.rung, "problem": args.problem,
        "commit": args.commit, "date": args.date, "command": args.command,
        "note": "median ms of every valid configuration of the rung's space, each verified against the family's "
                "reference; null: failed", **({"sample": args.sample} if args.sample else {}),
        "params": t.params, "rows": rows}))
    print(f"{args.out}: {len(rows)} configurations, {failed} failed, optimum {t.optimum:.4f} ms")


if __name__ == "__main__":
    main()
