"""The conv2d ladder's block-shape step: rungs 3 (one output per thread), 4 (four per thread),
5 (a TYx4 patch per thread; 32x32 threads would need more than 48 KiB of static shared memory,
which the row reports as a compile failure) and 6 (rung 5's patch on cp.async-filled,
double-buffered tiles in dynamic shared memory)
at each 2D block shape the conv issue names, on one image and radius; every row verified, timed
beside the device copy and stored. Prints the table with occupancy and its limiter, which is
most of the answer to "which shape wins and why".

    python benchmarks/conv_block_sweep.py [--size 8192:r3] [--json rows.json]
"""

from __future__ import annotations

import argparse
import json

from param_sweep import print_rows, steps  # benchmarks/ is on sys.path when a script here runs
from simtlab.catalog import family
from simtlab.device import current_sm_clock_mhz, device_info
from simtlab.ladder import LadderOptions, run_ladder
from simtlab.store import Store

SHAPES = [(32, 8), (16, 16), (32, 32), (64, 4)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="8192:r3")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    fam = family("conv2d")
    dev = device_info()
    store = Store()
    run_id = store.start_run("benchmarks/conv_block_sweep.py --size " + args.size, dev, current_sm_clock_mhz())
    refs: dict = {}
    rows = run_ladder(fam, [args.size], [], store, run_id, reference_cache=refs)  # the references once
    pairs = [(rung, shape) for rung in (fam.rung("smem_tile"), fam.rung("register_x"), fam.rung("register_xy"),
                                        fam.rung("pipelined")) for shape in SHAPES]
    for rung, (bx, by) in steps(pairs, f"conv2d {args.size} block shapes"):
        opts = LadderOptions(overrides={rung.name: {"BX": bx, "BY": by}})
        rows += run_ladder(fam, [args.size], [rung], store, run_id, opts, reference_cache=refs)
    print_rows(rows, f"conv2d {args.size} block shapes on {dev.name}", fam.metric,
               lambda r: f"{r.params['BX']}x{r.params['BY']}" if r.params else "")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([r.as_dict() for r in rows], f, indent=2, default=str)


if __name__ == "__main__":
    main()
