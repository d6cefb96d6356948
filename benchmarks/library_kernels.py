"""Which kernels the libraries run for a GEMM shape, and how long each takes on the GPU: torch.mm /
torch.bmm (cuBLAS / cuBLASLt) and simtlab.gemm_tc (bf16 in and out, as torch), through torch.profiler (CUPTI), L2 not flushed.
The kernel names say cuBLAS's choice (tile, cluster, stages), what a per-shape default should
be weighed against.

    python3 benchmarks/library_kernels.py --shape 64x512x512x512 --shape 2048x2048x2048
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict


def _operands(shape: str, dtype):
    import torch

    dims = [int(v) for v in shape.split("x")]
    batch, (M, N, K) = (dims[0], dims[1:]) if len(dims) == 4 else (0, dims)
    lead = (batch,) if batch else ()
    a = torch.randn(*lead, M, K, device="cuda", dtype=dtype)
    b = torch.randn(*lead, K, N, device="cuda", dtype=dtype)
    return a, b


def kernels(fn, reps: int = 50) -> list[dict]:
    """The GPU kernels `fn` launches: name, launches, mean microseconds a launch."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    total: dict[str, list[float]] = defaultdict(list)
    for e in prof.events():
        if e.device_type.name == "CUDA":
            total[e.name].append(e.device_time)
    return [{"kernel": k, "launches": len(v), "us": round(sum(v) / len(v), 2)} for k, v in
            sorted(total.items(), key=lambda kv: -sum(kv[1]))]


def main() -> None:
    import torch

    import simtlab

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", action="append", required=True, help="MxNxK or BATCHxMxNxK")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    rows = []
    for shape in args.shape:
        a, b = _operands(shape, torch.bfloat16)
        for who, fn in (("torch", lambda: torch.matmul(a, b)), ("simtlab", lambda: simtlab.gemm_tc(a, b, out_dtype="bfloat16"))):
            for k in kernels(fn):
                row = {"shape": shape, "who": who, **k}
                print(row)
                rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
