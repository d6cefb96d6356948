"""Sweep a few parameters of one rung at one size: every combination verified, timed beside the
family's references and stored, then one table (fastest first) with resources and occupancy.
For hand-picked grids that are too small for `simtlab tune`; what it finds becomes a catalog default.
Each point is measured in a child process (`--timeout` seconds: one that hangs costs that point
only). `--compile-only ARCH` builds every point into the cubin cache and stops (no GPU needed), so a
device run can carry the cache instead of compiling there.

    python benchmarks/param_sweep.py stencil pipelined_25d --size 512 --param RY=2,4 --param ZC=16,32,64
"""

from __future__ import annotations

import argparse
import itertools
import json

from rich.console import Console
from rich.table import Table

from simtlab.catalog import family
from simtlab.device import current_sm_clock_mhz, device_info
from simtlab.ladder import LadderOptions, run_ladder, run_ladder_isolated
from simtlab.store import Store


def parse_param(text: str) -> tuple[str, list[int]]:
    name, _, values = text.partition("=")
    if not name or not values:
        raise SystemExit(f"--param {text!r}: use NAME=v1,v2,...")
    return name, [int(v) for v in values.split(",")]


def _value(row, metric: str) -> float:
    return (row.gbs if metric == "gbs" else (row.gflops or 0) / 1e3) or 0.0


def print_rows(rows, title: str, metric: str, shown) -> None:
    """One table of sweep rows: `shown(row)` names the parameters that vary."""
    t = Table(title=title, title_justify="left", header_style="bold")
    for col in ("rung", "params", "GB/s" if metric == "gbs" else "TFLOP/s", "% of ref", "regs", "smem B", "occ",
                "limited by", "status"):
        t.add_column(col)
    for r in rows:
        v = _value(r, metric)
        t.add_row(r.name, shown(r), f"{v:.1f}" if v else "", f"{r.pct_of_reference:.1f}" if r.pct_of_reference else "",
                  str(r.registers or ""), str(r.shared_bytes or ""), f"{100 * r.occupancy:.0f}%" if r.occupancy else "",
                  r.limiter or "", r.status)
    Console(width=200).print(t)


def steps(items, what: str):
    """`items` with a progress bar on stderr while they are measured (on a terminal only; gone once done)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    items = list(items)
    err = Console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=True, disable=not err.is_terminal) as progress:
        task = progress.add_task(what, total=len(items))
        for item in items:
            yield item
            progress.advance(task)


def compile_grid(fam, rung, size: str, grid, arch: str) -> None:
    """Each point's build, as the sweep would choose its parameters, into the cubin cache; a point
    that fails to compile is said and skipped, as the sweep would."""
    from simtlab.launch import build, choose_params

    problem = fam.ops.parse_size(size)
    names = [n for n, _ in grid]
    for values in itertools.product(*(v for _, v in grid)):
        explicit = dict(zip(names, values))
        try:
            build(rung, choose_params(rung, problem, None, True, None, explicit), arch)
            print("built", explicit)
        except Exception as e:  # (reported and skipped, never fatal to the grid)
            print("failed", explicit, str(e).splitlines()[0][:200])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("family")
    ap.add_argument("rung")
    ap.add_argument("--size", required=True)
    ap.add_argument("--param", action="append", default=[], help="NAME=v1,v2 (repeat for a grid)")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds a point may take in its own process (0: every point in this process)")
    ap.add_argument("--compile-only", metavar="ARCH", help="build the grid's points for ARCH (e.g. sm_90a) and stop")
    args = ap.parse_args()
    fam = family(args.family)
    rung = fam.rung(args.rung)
    grid = [parse_param(p) for p in args.param]
    if args.compile_only:
        compile_grid(fam, rung, args.size, grid, args.compile_only)
        return
    dev = device_info()
    store = Store()
    cmd = f"benchmarks/param_sweep.py {args.family} {args.rung} --size {args.size} " + " ".join(
        f"--param {p}" for p in args.param)
    run_id = store.start_run(cmd, dev, current_sm_clock_mhz())
    names = [n for n, _ in grid]
    points = [dict(zip(names, values)) for values in itertools.product(*(v for _, v in grid))]
    if args.timeout > 0:  # each point in a child process: one that hangs costs itself, not the sweep
        rows = run_ladder_isolated(fam, [args.size], [rung], store, run_id, LadderOptions(), timeout_s=args.timeout,
                                   points=points, on_step=lambda what: print(what, flush=True))
    else:
        refs: dict = {}
        rows = run_ladder(fam, [args.size], [], store, run_id, reference_cache=refs)  # the references once
        for point in steps(points, f"{rung.id} {args.size}"):
            opts = LadderOptions(overrides={rung.name: point})
            rows += run_ladder(fam, [args.size], [rung], store, run_id, opts, reference_cache=refs)
    rows.sort(key=lambda r: (r.status not in ("ok", "reference"), r.status != "reference", -_value(r, fam.metric)))
    print_rows(rows, f"{fam.name}/{rung.name} {args.size} on {dev.name}", fam.metric,
               lambda r: " ".join(f"{k}={r.params[k]}" for k in names if r.params and k in r.params))
    if args.json:
        with open(args.json, "w") as f:
            json.dump([r.as_dict() for r in rows], f, indent=2, default=str)


if __name__ == "__main__":
    main()
