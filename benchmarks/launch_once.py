"""Launch chosen rungs once each (after one warm-up) so a profiler can read
their counters, e.g. shared-memory bank conflicts of gemm rungs 6 and 7:

    ncu --clock-control none --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,\\
        l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum -k regex:gemm_ \\
        python benchmarks/launch_once.py gemm 6 7 --size 2048
"""

from __future__ import annotations

import argparse

import cupy

from simtlab.catalog import family
from simtlab.device import device_info
from simtlab.launch import build, prepare


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("family")
    ap.add_argument("rungs", nargs="+")
    ap.add_argument("--size", required=True)
    args = ap.parse_args()
    fam = family(args.family)
    op = fam.op()
    problem = op.parse_size(args.size)
    dev = device_info()
    for key in args.rungs:
        rung = fam.rung(key)
        inst = build(rung, None, dev.arch)
        ws = op.workspace(problem, 1)
        vec = ws.vec_ok() if rung.vec_variant else None
        launch = inst.geometry(problem, dev)
        func = prepare(inst, launch, vec, dev)
        func(launch.grid, launch.block, ws.args(), shared_mem=launch.shared)
        cupy.cuda.get_current_stream().synchronize()
        print(f"{rung.id}: {inst.expression(vec)} grid={launch.grid} block={launch.block}")


if __name__ == "__main__":
    main()
