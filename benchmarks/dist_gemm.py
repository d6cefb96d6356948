"""Distributed GEMM on the GPUs of one host, launched with torchrun (one process per GPU):

    torchrun --nproc_per_node 2 benchmarks/dist_gemm.py --size 16384 --algo summa [--dtype bfloat16] [--json out.json]

Each rank makes its own blocks of A and B (seeded per row, so any world size sees the same
matrices), runs SUMMA or 1D row panels with NCCL broadcasts/all-gathers and simtlab's own GEMM
as the local one - the tuned CUDA-core rung for float32, the tensor-core rung for bfloat16 /
float16 inputs (fp32 sums and C; the blocks travel as PyTorch tensors) - checks its C block
against cuBLAS on the same rank (the fp32 product of the same, rounded, A rows and B columns),
and rank 0 prints the time (slowest rank, CUDA events, median of --reps) and TFLOP/s beside
cuBLAS on one GPU for the whole problem where it fits (SGEMM, or GemmEx with fp32 sums and C)."""

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
    ap.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32",
                    help="the inputs' type (bfloat16 / float16: the tensor-core rung, fp32 sums and C)")
    ap.add_argument("--json")
    args = ap.parse_args()
    import cupy
    import torch
    import torch.distributed as dist

    from simtlab.bench import time_gpu
    from simtlab.distributed.comm import TorchComm
    from simtlab.distributed.gemm import TorchArrays, row_panels, simtlab_accumulate, summa, tensor_core_accumulate
    from simtlab.distributed.partition import RowPanels, Summa
    from simtlab.ops import gemm_tc
    from simtlab.verify import compare

    local = int(os.environ.get("LOCAL_RANK", 0))
    cupy.cuda.Device(local).use()
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    comm = TorchComm()
    tc = args.dtype != "float32"
    xp, accumulate = (TorchArrays(torch.device("cuda", local)), tensor_core_accumulate) if tc else \
        (cupy, simtlab_accumulate)

    def narrow(x):
        """An fp32 block in the inputs' type: CuPy for fp32, PyTorch for fp16 / bf16 (bf16 from
        its bit pattern, rounded to nearest even)."""
        if not tc:
            return x
        if args.dtype == "float16":
            return torch.from_dlpack(x.astype(cupy.float16))
        return torch.from_dlpack(gemm_tc._narrow(x, "bfloat16").view(cupy.int16)).view(torch.bfloat16)

    def rounded(x):
        """The fp32 values the local GEMMs see (the reference's inputs)."""
        return gemm_tc._widen(gemm_tc._narrow(x, args.dtype)).astype(cupy.float32) if tc else x

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
        a = narrow(block(1, blocks["A"][0], blocks["A"][1], K))
        b = narrow(block(10**6, blocks["B"][0], blocks["B"][1], N))
        (r0, r1), (c0, c1) = blocks["C"]

        def run(c):
            summa(plan, comm, a, b, c, xp, accumulate)
    else:
        plan = RowPanels(M, N, K, comm.size)
        (r0, r1), (c0, c1) = plan.rows[comm.rank], (0, N)
        a = narrow(block(1, (r0, r1), (0, K), K))
        b = narrow(block(10**6, plan.b_rows[comm.rank], (0, N), N))

        def run(c):
            row_panels(plan, comm, a, b, c, xp, accumulate)

    c = cupy.empty((r1 - r0, c1 - c0), cupy.float32)
    c_local = torch.from_dlpack(c) if tc else c  # (the tensor-core path writes it as a PyTorch tensor)
    c.fill(cupy.nan)  # (nothing left unwritten passes)
    run(c_local)  # warm-up: compiles, NCCL channels
    torch.cuda.synchronize()
    # verification: this rank's C block against cuBLAS on one GPU (A rows @ B columns, fp32)
    ref = rounded(block(1, (r0, r1), (0, K), K)) @ rounded(block(10**6, (0, K), (c0, c1), N))
    verdict = compare(c, ref, gemm_tc.tolerance(gemm_tc.TcProblem(M, N, K, args.dtype)) if tc else 1e-4)
    del ref
    times = []
    for _ in range(args.reps):
        comm.barrier()
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        run(c_local)
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
        row = {"algo": args.algo, "dtype": args.dtype, "world": comm.size, "M": M, "N": N, "K": K, "ms": ms,
               "tflops": tflops, "verified": bool(ok.item()), "rank0_rel_error": verdict.rel_error}
        try:  # one-GPU cuBLAS on the whole problem, for the efficiency column (timed as the ladder times), on
            # inputs drawn as the blocks are (uniform in [-0.5, 0.5): at the power limit the values move the clock)
            A = cupy.random.random((M, K), dtype=cupy.float32) - 0.5
            B = cupy.random.random((K, N), dtype=cupy.float32) - 0.5
            if tc:  # GemmEx: 16-bit inputs, fp32 sums and C, as the tensor-core rung
                A, B = gemm_tc._narrow(A, args.dtype), gemm_tc._narrow(B, args.dtype)
                p = gemm_tc.TcProblem(M, N, K, args.dtype)
                one = gemm_tc._cublas(gemm_tc.Workspace.of(p, A, B, cupy.empty((M, N), cupy.float32)))
            else:
                one = lambda: A @ B  # noqa: E731
            row["cublas_one_gpu_ms"] = time_gpu(one, min_reps=args.reps, max_reps=args.reps).median_ms
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
