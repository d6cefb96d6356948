"""One fp32 GEMM rung compiled several ways (NVRTC options that leave the source alone but change
ptxas's register assignment and schedule), each verified and timed beside cuBLAS in one process,
with the static facts of its main loop: registers, instructions, operands marked `.reuse`. Does
the same source's codegen move the time, and does the reuse count say which way?

    python benchmarks/codegen_sweep.py --size 4096 --size 8192 [--rung tuned] [--json out.json]
        [--options '[{}, {"ptxas_options": "--register-usage-level=0"}]']   (else OPTION_SETS)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time

from rich.console import Console
from rich.table import Table

# NVRTC options through cuda-core's ProgramOptions; {} is the build the ladder uses
# (--register-usage-level: ptxas's 0-10 trade of registers for optimisation, default 5; 0-3 and
# 6-10 each give rung 10 another assignment)
OPTION_SETS = ({}, {"max_register_count": 232}, {"max_register_count": 208}, {"max_register_count": 200},
               {"ptxas_options": "-O1"}, {"ptxas_options": "--register-usage-level=0"},
               {"ptxas_options": "--register-usage-level=6"})


def static_facts(inst, vec: bool) -> dict:
    from simtlab.analyze.sass import _main_loop, disassemble, parse_sass

    text = disassemble(inst.cubin.path, inst.cubin.mangled(inst.expression(vec)))
    loop = _main_loop(next(iter(parse_sass(text).values())))
    res = inst.resources(vec)
    return {"registers": res.registers, "spill": res.spill_bytes,
            "loop": len(loop), "reuse": sum(i.operands.count(".reuse") for i in loop if i.base == "FFMA"),
            "sass": hashlib.sha256(text.encode()).hexdigest()[:8]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", action="append", required=True)
    ap.add_argument("--rung", default="tuned")
    ap.add_argument("--json")
    ap.add_argument("--options", help="a JSON list of NVRTC option sets ({} = the ladder's build)")
    args = ap.parse_args()
    option_sets = json.loads(args.options) if args.options else OPTION_SETS

    from simtlab.bench import time_gpu
    from simtlab.catalog import family
    from simtlab.compile import compile_file
    from simtlab.device import device_info
    from simtlab.launch import RungInstance, build, choose_params, runner
    from simtlab.ops import gemm
    from simtlab.tools.clock_log import ClockLog
    from simtlab.verify import compare

    fam, dev = family("gemm"), device_info()
    rung = fam.rung(args.rung)
    rows = []

    def timed(run, row):  # long timings: many clock samples inside each
        t0 = time.time()
        row["ms"] = time_gpu(run, target_ms=1500).median_ms
        row.update(clocks.summary(t0, time.time()))
        rows.append(row)

    with ClockLog() as clocks:
        for size in args.size:
            p = gemm.parse_size(size)
            ws = fam.op().workspace(p, 11)
            vec = ws.vec_ok()
            params = build(rung, choose_params(rung, p, dev, vec), dev.arch).params
            first = len(rows)
            timed(gemm._cublas_sgemm(ws), {"size": size, "build": "cuBLAS"})
            for opts in option_sets:
                cubin = compile_file(rung.source, rung.name_expressions(params), arch=rung.build_arch(dev.arch),
                                     options=opts)
                inst = RungInstance(rung, params, cubin)
                run = runner(inst, p, ws, vec, dev)
                ws.poison()
                run()
                ok = compare(ws.output(), ws.expected(), gemm.tolerance(p)).ok
                timed(run, {"size": size, "build": json.dumps(opts) if opts else "default", "verified": ok,
                            **static_facts(inst, vec)})
            timed(gemm._cublas_sgemm(ws), {"size": size, "build": "cuBLAS again"})  # drift over the sweep
            ref = (rows[first]["ms"] + rows[-1]["ms"]) / 2
            for r in rows[first:]:
                r.update(tflops=p.flops / r["ms"] / 1e9, pct=100 * ref / r["ms"])
    table = Table(title=f"gemm/{rung.name} compiled several ways on {dev.name} (power: {clocks.power_source})",
                  title_justify="left")
    for col in ("size", "build", "TFLOP/s", "% of cuBLAS", "SM MHz", "W", "capped", "verified", "regs", "spill",
                "loop instrs", "FFMA .reuse", "SASS"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["size"], r["build"], f"{r['tflops']:.2f}", f"{r['pct']:.1f}", str(r["sm_mhz"]),
                      str(r["watts"]), str(r["power_capped"]), str(r.get("verified", "")),
                      str(r.get("registers", "")), str(r.get("spill", "")), str(r.get("loop", "")),
                      str(r.get("reuse", "")), r.get("sass", ""))
    Console(width=200).print(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
