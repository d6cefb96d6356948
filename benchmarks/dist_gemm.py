"""Distributed fp32 GEMM on the GPUs of one host, launched with torchrun (one process per GPU):

    torchrun --nproc_per_node 2 benchmarks/dist_gemm.py --size 16384 --algo summa [--json out.json]

Each rank makes its own blocks of A and B (seeded per block, so any world size sees the same
matrices), runs SUMMA or 1D row panels with NCCL broadcasts/all-gathers and simtlab's tuned rung
as the local GEMM, checks its C block against cuBLAS on the same rank (A rows @ B columns, one
GPU), and rank 0 prints the time (slowest rank, CUDA events, median of --reps) and TFLOP/s beside
cuBLAS on one GPU for the whole problem where it fits."""

from __future__ import annotations

import argparse
import json
import os
import statistics


def block(seed: int, rows: tuple[int, int], cols: tuple[int, int], full_cols: int):
    """Rows x cols of a matrix whose row r is generated from seed + r: identical for any split."""
    import cupy

    out = cupy.empty((rows[1] - rows[0], cols[1] - cols[0]), cupy.float32)
    for k, r in enumerate(range(*rows)):
        out[k] = cupy.random.default_rng(seed + r).random(full_cols, dtype=cupy.float32)[cols[0]:cols[1]] - 0.5
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="8192", help="N or MxNxK")
    ap.add_argument("--algo", choices=("summa", "rows"), default="summa")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    import cupy
    import torch
    import torch.distributed as dist

    from simtlab.distributed.comm import TorchComm
    from simtlab.distributed.gemm import row_panels, simtlab_accumulate, summa
    from simtlab.distributed.partition import RowPanels, Summa
    from simtlab.verify import compare

    local = int(os.environ.get("LOCAL_RANK", 0))
    cupy.cuda.Device(local).use()
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    comm = TorchComm()
    dims = [int(x) for x in args.size.lower().split("x")]
    M, N, K = dims * 3 if len(dims) == 1 else dims
    if args.algo == "summa":
        plan = Summa(M, N, K, comm.size)
        pr, pc = plan.grid
        for i in range(pr):  # every rank creates every group, in the same order
            comm.group(tuple(plan.rank(i, j) for j in range(pc)))
        for j in range(pc):
            comm.group(tuple(plan.rank(i, j) for i in range(pr)))
        blocks = plan.blocks(comm.rank)
        a = block(1, blocks["A"][0], blocks["A"][1], K)
        b = block(10**6, blocks["B"][0], blocks["B"][1], N)
        (r0, r1), (c0, c1) = blocks["C"]

        def run(c):
            summa(plan, comm, a, b, c, cupy, simtlab_accumulate)
    else:
        plan = RowPanels(M, N, K, comm.size)
        (r0, r1), (c0, c1) = plan.rows[comm.rank], (0, N)
        a = block(1, (r0, r1), (0, K), K)
        b = block(10**6, plan.b_rows[comm.rank], (0, N), N)

        def run(c):
            row_panels(plan, comm, a, b, c, cupy, simtlab_accumulate)

    c = cupy.empty((r1 - r0, c1 - c0), cupy.float32)
    run(c)  # warm-up: compiles, NCCL channels
    torch.cuda.synchronize()
    # verification: this rank's C block against cuBLAS on one GPU (A rows @ B columns)
    a_rows = block(1, (r0, r1), (0, K), K)
    b_cols = block(10**6, (0, K), (c0, c1), N)
    ref = a_rows @ b_cols
    verdict = compare(c, ref, 1e-4)
    times = []
    for _ in range(args.reps):
        comm.barrier()
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        run(c)
        end.record()
        end.synchronize()
        t = torch.tensor([cupy.cuda.get_elapsed_time(start, end)], device="cuda")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank sets the pace
        times.append(float(t))
    ok = torch.tensor([1 if verdict.ok else 0], device="cuda")
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    ms = statistics.median(times)
    if comm.rank == 0:
        tflops = 2 * M * N * K / (ms * 1e-3) / 1e12
        row = {"algo": args.algo, "world": comm.size, "M": M, "N": N, "K": K, "ms": ms, "tflops": tflops,
               "verified": bool(ok.item()), "rank0_rel_error": verdict.rel_error}
        try:  # one-GPU cuBLAS on the whole problem, for the efficiency column
            A, B = cupy.random.random((M, K), dtype=cupy.float32), cupy.random.random((K, N), dtype=cupy.float32)
            A @ B
            s, e = cupy.cuda.Event(), cupy.cuda.Event()
            s.record()
            A @ B
            e.record()
            e.synchronize()
            row["cublas_one_gpu_ms"] = cupy.cuda.get_elapsed_time(s, e)
            row["vs_one_gpu_cublas"] = row["cublas_one_gpu_ms"] / ms
        except cupy.cuda.memory.OutOfMemoryError:
            row["cublas_one_gpu_ms"] = None
        print(json.dumps(row))
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(row) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
