"""Kahan-compensated fp32 GEMM against the plain one: relative error vs float64 and time, at
growing K, beside cuBLAS SGEMM. Inputs are uniform in [0, 1) (every product positive: the plain
sum's rounding error grows with K, the worst case compensation is for), and in [-1, 1).

    python benchmarks/kahan_table.py [--mn 256] [--k 1024 --k 16384 --k 262144] [--json rows.json]
"""

from __future__ import annotations

import argparse
import json

from rich.console import Console
from rich.table import Table


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mn", type=int, default=256)
    ap.add_argument("--k", type=int, action="append")
    ap.add_argument("--json")
    args = ap.parse_args()
    import cupy

    import simtlab
    from simtlab.bench import time_gpu
    from simtlab.device import device_info
    from simtlab.verify import relative_error

    ks = args.k or [1024, 16384, 262144]
    rows = []
    t = Table(title=f"plain vs Kahan fp32 GEMM, M = N = {args.mn}, on {device_info().name}", title_justify="left",
              header_style="bold")
    for col in ("inputs", "K", "cuBLAS err", "plain err", "Kahan err", "plain ms", "Kahan ms", "Kahan cost"):
        t.add_column(col)
    for dist in ("[0,1)", "[-1,1)"):
        for K in ks:
            rng = cupy.random.default_rng(K)
            A = rng.random((args.mn, K), dtype=cupy.float32)
            B = rng.random((K, args.mn), dtype=cupy.float32)
            if dist == "[-1,1)":
                A, B = A * 2 - 1, B * 2 - 1
            ref = A.astype(cupy.float64) @ B.astype(cupy.float64)
            C = cupy.empty((args.mn, args.mn), cupy.float32)
            errs = {"cublas": relative_error(A @ B, ref),
                    "plain": relative_error(simtlab.gemm(A, B, C, rung="warptiling"), ref),
                    "kahan": relative_error(simtlab.gemm(A, B, C, kahan=True), ref)}
            ms_plain = time_gpu(lambda: simtlab.gemm(A, B, C, rung="warptiling"), target_ms=100).median_ms
            ms_kahan = time_gpu(lambda: simtlab.gemm(A, B, C, kahan=True), target_ms=100).median_ms
            row = {"inputs": dist, "M": args.mn, "N": args.mn, "K": K, **{f"{k}_rel_error": v for k, v in errs.items()},
                   "plain_ms": ms_plain, "kahan_ms": ms_kahan}
            rows.append(row)
            t.add_row(dist, str(K), f"{errs['cublas']:.2e}", f"{errs['plain']:.2e}", f"{errs['kahan']:.2e}",
                      f"{ms_plain:.3f}", f"{ms_kahan:.3f}", f"{ms_kahan / ms_plain:.2f}x")
    Console(width=160).print(t)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
