"""simtlab.spmv as users call it, beside the library calls they would make instead (GPU): a CSR
matrix of each row profile the SpMV ladder measures (uniform, power-law and banded rows), as a
torch.sparse_csr tensor (int64 indices, torch's default, and int32) and as a
cupyx.scipy.sparse.csr_matrix, times a float32 vector:

    simtlab.spmv(A, x)     beside   A @ x  (torch.sparse: cuSPARSE through PyTorch)
    simtlab.spmv(Ac, xc)   beside   Ac @ xc (cupyx: cuSPARSE through CuPy)
    plan(x), plan = simtlab.spmv_plan(A)    beside   A @ x (a matrix prepared once, multiplied often)

A plan is made outside the timed call (as a user makes it once for many products); the time it
took is reported beside its row (wall clock, synchronized, after a first plan compiled rung 6).

Each call is timed by triton.testing.do_bench (L2 cleared before each repetition, median), the
contenders interleaved over ROUNDS rounds; a ratio is the median of the rounds' ratios. GB/s count
the bytes an SpMV must move (offsets, columns and values once, x once a nonzero at most - counted
once - and y written). Each simtlab result is checked against the library's (relative error).

    python benchmarks/spmv_ops.py [--json out.json] [--rows 4194304] [--profiles uniform,powerlaw,banded]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import cupy
import torch
import triton

import simtlab
from simtlab.ops import spmv as spmv_ops

ROUNDS = 3


def _ms(fn) -> float:
    return triton.testing.do_bench(fn, warmup=10, rep=50, return_mode="median")


def _error(ours, ref) -> float:
    ours, ref = cupy.asarray(ours).astype(cupy.float64), cupy.asarray(ref).astype(cupy.float64)
    return float(cupy.linalg.norm(ours - ref) / max(float(cupy.linalg.norm(ref)), 1e-300))


def _contenders(ws):
    """(name, call) pairs for one matrix: simtlab and the library on each container."""
    n = ws.p.n
    crow, col = torch.from_dlpack(ws.row_ptr), torch.from_dlpack(ws.cols)
    vals, x = torch.from_dlpack(ws.vals), torch.from_dlpack(ws.x)
    a64 = torch.sparse_csr_tensor(crow.long(), col.long(), vals, (n, n))
    a32 = torch.sparse_csr_tensor(crow, col, vals, (n, n))
    ac = ws.matrix()
    simtlab.spmv_plan(a64)  # (the first plan compiles rung 6: not a plan's cost)
    torch.cuda.synchronize()
    start = time.perf_counter()
    plan = simtlab.spmv_plan(a64)
    torch.cuda.synchronize()
    made_ms = (time.perf_counter() - start) * 1e3
    plan_c = simtlab.spmv_plan(ac)
    return {
        "torch.sparse (int64)": (lambda: a64 @ x, lambda: simtlab.spmv(a64, x)),
        "torch.sparse (int32)": (lambda: a32 @ x, lambda: simtlab.spmv(a32, x)),
        "cupyx (cuSPARSE)": (lambda: ac @ ws.x, lambda: simtlab.spmv(ac, ws.x)),
        "torch.sparse, plan": (lambda: a64 @ x, lambda: plan(x), made_ms),
        "cupyx, plan": (lambda: ac @ ws.x, lambda: plan_c(ws.x)),
    }


def measure(rows: int, profile: str) -> dict:
    p = spmv_ops.parse_size(f"{rows}:{profile}")
    ws = spmv_ops.workspace(p, seed=7)
    moved = 4 * (p.n + 1) + 8 * p.nnz + 4 * p.n + 4 * p.n  # offsets, columns + values, x once, y
    out = {"rows": p.n, "profile": profile, "nnz": int(p.nnz), "bytes": moved, "pairs": {}}
    for name, (library, ours, *made) in _contenders(ws).items():
        error = _error(ours(), library())
        rounds = [(_ms(library), _ms(ours)) for _ in range(ROUNDS)]
        lib_ms, our_ms = (statistics.median(r[i] for r in rounds) for i in (0, 1))
        out["pairs"][name] = {"ms": {"library": lib_ms, "simtlab": our_ms},
                              "gbs": {"library": moved / lib_ms / 1e6, "simtlab": moved / our_ms / 1e6},
                              "speedup": statistics.median(lib / ours_ for lib, ours_ in rounds),
                              "error_vs_library": error}
        if made:
            out["pairs"][name]["plan_made_ms"] = made[0]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--rows", type=int, default=1 << 22)
    ap.add_argument("--profiles", default="uniform,powerlaw,banded")
    args = ap.parse_args()
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": []}
    print(f"device: {result['device']}; torch {result['torch']}")
    print(f"{'profile':10s} {'nnz':>10s}  {'beside':22s} {'library GB/s':>12s} {'simtlab GB/s':>12s} "
          f"{'x library':>9s}  rel err")
    for profile in args.profiles.split(","):
        row = measure(args.rows, profile)
        result["rows"].append(row)
        for name, pair in row["pairs"].items():
            made = f"  (plan made in {pair['plan_made_ms']:.1f} ms)" if "plan_made_ms" in pair else ""
            print(f"{profile:10s} {row['nnz']:>10d}  {name:22s} {pair['gbs']['library']:12.0f} "
                  f"{pair['gbs']['simtlab']:12.0f} {pair['speedup']:9.2f}  {pair['error_vs_library']:.1e}{made}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
