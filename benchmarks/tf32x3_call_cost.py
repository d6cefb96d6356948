"""Where the time of a large `simtlab.gemm(precision="tf32x3")` call goes besides the kernels: the
same product timed as a user calls it (C and the split's scratch allocated by the call), with C
given, through a plan with C given, and as a kernel call on scratch allocated once - interleaved
over rounds (L2 cleared, triton's do_bench median), each round's value printed, with the caching
allocator's counters (device allocations and frees, retries) over each method's rounds.

    python benchmarks/tf32x3_call_cost.py --size 8192 --rounds 5 [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
import triton

import simtlab

COUNTERS = ("num_device_alloc", "num_device_free", "num_alloc_retries")


def _counters() -> dict:
    stats = torch.cuda.memory_stats()
    return {k: stats.get(k, 0) for k in COUNTERS}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    n = args.size
    g = torch.Generator(device="cuda").manual_seed(1)
    A, B = torch.randn(n, n, device="cuda", generator=g), torch.randn(n, n, device="cuda", generator=g)
    C = torch.empty(n, n, device="cuda")
    plan = simtlab.gemm_plan(A, B, C, precision="tf32x3")
    kernel = plan.split
    scratch = torch.empty(kernel.parts_bytes // 4, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    methods = {
        "simtlab.gemm(A, B) (allocates C and scratch)": lambda: simtlab.gemm(A, B, precision="tf32x3"),
        "simtlab.gemm(A, B, C) (allocates scratch)": lambda: simtlab.gemm(A, B, C, precision="tf32x3"),
        "plan(A, B, C) (allocates scratch)": lambda: plan(A, B, C),
        "kernel call, scratch allocated once": lambda: kernel.run(A.data_ptr(), n, B.data_ptr(), n, C.data_ptr(), 1.0,
                                                                  0.0, scratch.data_ptr(), stream),
    }
    times = {k: [] for k in methods}
    counts = {k: dict.fromkeys(COUNTERS, 0) for k in methods}
    for _ in range(args.rounds):
        for name, fn in methods.items():
            before = _counters()
            times[name].append(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))
            after = _counters()
            for k in COUNTERS:
                counts[name][k] += after[k] - before[k]
    rows = []
    flops = 2 * n ** 3
    for name, t in times.items():
        med = statistics.median(t)
        row = {"method": name, "size": n, "median_ms": round(med, 4), "tflops": round(flops / med / 1e9, 1),
               "rounds_ms": [round(x, 4) for x in t], "spread_pct": round(100 * (max(t) - min(t)) / med, 1),
               **counts[name]}
        print(row, flush=True)
        rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
