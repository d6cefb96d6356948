"""Fast-math intrinsics, speed beside accuracy: for each operation (exp, division by a run-time
value, int / and % by a run-time power of two), the precise and fast rungs are verified and timed
through the ladder (stored like any ladder row), then each is run once more and its single
application compared with float64 in ulps (ints: wrong results).

    python benchmarks/intrinsics_table.py [--n 2^24] [--reps 64] [--json rows.json]
"""

from __future__ import annotations

import argparse
import json

from rich.console import Console
from rich.table import Table

from simtlab.catalog import family
from simtlab.device import current_sm_clock_mhz, device_info
from simtlab.launch import build, choose_params, runner
from simtlab.ladder import run_ladder
from simtlab.ops import intrinsics as it
from simtlab.store import Store


def measured_error(rung, problem, dev) -> dict:
    import cupy

    ws = it.workspace(problem, seed=1)
    inst = build(rung, choose_params(rung, problem, dev, None), dev.arch)
    ws.poison()
    runner(inst, problem, ws, None, dev)()
    cupy.cuda.get_current_stream().synchronize()
    return it.ulp_error(ws)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", default="2^24")
    ap.add_argument("--reps", type=int, default=it.DEFAULT_REPS)
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    fam = family("intrinsics")
    dev = device_info()
    store = Store()
    run_id = store.start_run(f"benchmarks/intrinsics_table.py --n {args.n} --reps {args.reps}", dev,
                             current_sm_clock_mhz())
    sizes = [f"{op}:{args.n}:r{args.reps}" for op in it.OPS]
    rows = run_ladder(fam, sizes, None, store, run_id)
    out = []
    t = Table(title=f"fast-math intrinsics on {dev.name} ({args.reps} chained applications per element x4)",
              title_justify="left", header_style="bold")
    for col in ("operation", "rung", "G op/s", "speed-up", "max ulp", "mean ulp", "wrong", "regs", "status"):
        t.add_column(col)
    for size in sizes:
        problem = it.parse_size(size)
        mine = [r for r in rows if r.problem == problem.label and not r.is_reference]
        base = next((r.median_ms for r in mine if r.name.endswith("precise") and r.median_ms), None)
        for r in mine:
            err = measured_error(fam.rung(r.name.split("_", 1)[1]), problem, dev) if r.status == "ok" else {}
            rate = problem.operations / (r.median_ms * 1e-3) / 1e9 if r.median_ms else None
            speed = base / r.median_ms if base and r.median_ms else None
            out.append({**r.as_dict(), "gops": rate, "speedup": speed, **err})
            t.add_row(problem.op, r.name, f"{rate:.0f}" if rate else "", f"{speed:.2f}x" if speed else "",
                      "" if err.get("max_ulp") is None else f"{err['max_ulp']:.2f}",
                      "" if err.get("mean_ulp") is None else f"{err['mean_ulp']:.3f}",
                      "" if err.get("wrong") is None else str(err["wrong"]), str(r.registers or ""), r.status)
    Console(width=200).print(t)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2, default=str)


if __name__ == "__main__":
    main()
