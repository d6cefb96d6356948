"""fp32 GEMM on the tensor cores (3xTF32): accuracy and speed of `simtlab.gemm(precision="tf32x3")`
beside what a user would call instead, in one process (GPU, sm_90):

1. accuracy, against the float64 product of the same fp32 inputs: the relative Frobenius error
   ||C - ref|| / ||ref|| and the largest elementwise error measured against that element's scale,
   max |C - ref| / (|A| @ |B|) (the bound every dot product's rounding is stated in; an error
   relative to |ref| alone is unbounded where a sum cancels to ~0). Rows: N(0,1) inputs,
   uniform [0, 1) (positive sums), K from 16 to 16384, A's rows scaled by 2^30 and 2^-30 in
   turn (wide dynamic range), A (or B) near the smallest normal fp32, and Inf / NaN in A (where SGEMM's
   C is not finite, the same entries must be: "nonfinite_mismatch" counts those that differ).
   Beside simtlab: cuBLAS SGEMM (torch.mm, TF32 off), cuBLAS TF32 (one pass), Triton tf32x3.
2. speed, L2 cleared before each call (triton.testing.do_bench, median), the four calls
   interleaved over five rounds; the split pre-pass alone (its two kernels) beside them. With
   --f16x3: simtlab.gemm(precision="f16x3") - rung 13, the same split with fp16 parts, rows and
   columns scaled - beside them.

    python benchmarks/tf32x3_table.py [--json out.json] [--only accuracy,speed]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch
import triton

import simtlab
from simtlab.launch import LaunchError
from simtlab.references.triton_gemm import triton_tf32x3_runner

ROUNDS = 5
SPEED_SIZES = ((2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (8192, 1024, 8192), (4097, 4095, 4093))


def _sgemm(A, B):
    torch.backends.cuda.matmul.allow_tf32 = False
    return torch.mm(A, B)


def _tf32(A, B):
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        return torch.mm(A, B)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False


def _triton(A, B):
    C = torch.empty(A.shape[0], B.shape[1], device=A.device)
    triton_tf32x3_runner(A, B, C)()
    return C


def _ours(A, B):
    return simtlab.gemm(A, B, precision="tf32x3")


def _ours_rung_12(A, B):
    return simtlab.gemm(A, B, rung="tf32x3_mma", precision="tf32x3")


METHODS = [("simtlab tf32x3", _ours), ("cuBLAS SGEMM", _sgemm), ("cuBLAS TF32", _tf32), ("Triton tf32x3", _triton)]


def _kernel_call(rung_name: str, overrides: dict):
    """Rung 11 ("tf32x3") or 13 ("f16x3") at its size defaults and `overrides` (a promotion period
    SPLIT, the last round in chunks of K SK, kept pieces KEEP), called through its kernel object
    (split kernels and main loop, scratch from torch): labelled as such in the tables."""
    from simtlab.catalog import family
    from simtlab.device import device_info
    from simtlab.launch import build, prepare
    from simtlab.ops import f16x3, gemm, tf32x3

    module, kind = (tf32x3, tf32x3.Tf32x3Gemm) if rung_name == "tf32x3" else (f16x3, f16x3.F16x3Gemm)
    kernels = {}

    def call(A, B):
        M, K = A.shape
        N = B.shape[1]
        k = kernels.get((M, N, K))
        if k is None:
            rung, info = family("gemm").rung(rung_name), device_info()
            defaults = module.size_defaults(gemm.GemmProblem(M, N, K), info)
            params = {**defaults, **overrides}
            if defaults.get("EPI") == 0:  # (C's rows not whole 16-byte units: no TMA stores, whatever the variant)
                params["EPI"] = 0
            k = kernels[(M, N, K)] = kind(build(rung, params, info.arch), M, N, K, info, prepare)
        C = torch.empty(M, N, device=A.device)
        scratch = torch.empty(-(-k.parts_bytes // 4), device=A.device)
        k.run(A.data_ptr(), K, B.data_ptr(), N, C.data_ptr(), 1.0, 0.0, scratch.data_ptr(),
              torch.cuda.current_stream().cuda_stream)
        return C

    return call


def _inputs(kind: str, M: int, N: int, K: int, seed: int):
    g = torch.Generator(device="cuda").manual_seed(seed)
    if kind == "uniform":
        return (torch.rand(M, K, device="cuda", generator=g), torch.rand(K, N, device="cuda", generator=g))
    A = torch.randn(M, K, device="cuda", generator=g)
    B = torch.randn(K, N, device="cuda", generator=g)
    if kind == "rows 2^+-30":
        scale = torch.where(torch.arange(M, device="cuda") % 2 == 0, 2.0 ** 30, 2.0 ** -30)
        A *= scale[:, None]
    elif kind.startswith("near min normal"):
        A = (1 + torch.rand(M, K, device="cuda", generator=g)) * 2.0 ** -125  # [2^-125, 2^-124)
        B = 0.5 + torch.rand(K, N, device="cuda", generator=g) / 2  # positive: sums of normal numbers
        if kind.endswith("B"):  # (B tiny, A ordinary: the same values, the roles swapped)
            A, B = (0.5 + torch.rand(M, K, device="cuda", generator=g) / 2,
                    (1 + torch.rand(K, N, device="cuda", generator=g)) * 2.0 ** -125)
    elif kind == "inf/nan":
        idx = torch.randint(0, M * K, (64,), device="cuda", generator=g)
        A.view(-1)[idx[:32]] = float("inf")
        A.view(-1)[idx[32:48]] = float("-inf")
        A.view(-1)[idx[48:]] = float("nan")
    return A, B


ACCURACY_ROWS = (("N(0,1)", 4096, 4096, 4096), ("uniform", 2048, 2048, 4096), ("N(0,1)", 1024, 1024, 16),
                 ("N(0,1)", 1024, 1024, 32), ("N(0,1)", 1024, 1024, 64), ("N(0,1)", 1024, 1024, 128),
                 ("N(0,1)", 1024, 1024, 256), ("N(0,1)", 1024, 1024, 4096), ("N(0,1)", 1024, 1024, 16384),
                 ("rows 2^+-30", 2048, 2048, 2048), ("near min normal", 2048, 2048, 2048),
                 ("near min normal B", 2048, 2048, 2048),
                 ("inf/nan", 1024, 1024, 1024))


def accuracy() -> list[dict]:
    rows = []
    for kind, M, N, K in ACCURACY_ROWS:
        A, B = _inputs(kind, M, N, K, seed=M + N + K)
        ref = A.double() @ B.double()
        scale = A.double().abs().nan_to_num(posinf=0.0) @ B.double().abs()
        finite = torch.isfinite(ref)
        for name, fn in METHODS:
            try:
                C = fn(A, B).double()
            except LaunchError as e:  # (a variant that cannot take this shape: said, not timed)
                print(f"{name} at {M}x{N}x{K}: {e}", flush=True)
                continue
            err = (C - ref).where(finite, torch.zeros_like(ref))
            frob = float(err.norm() / ref.where(finite, torch.zeros_like(ref)).norm())
            elem = float((err.abs() / scale.where(scale > 0, torch.ones_like(scale))).max())
            mismatch = int((torch.isfinite(C) != finite).sum() + (torch.isnan(C) != torch.isnan(ref)).sum())
            rows.append({"inputs": kind, "M": M, "N": N, "K": K, "method": name, "rel_frobenius": f"{frob:.2e}",
                         "max_rel_to_scale": f"{elem:.2e}", "nonfinite_mismatch": mismatch})
            print(rows[-1], flush=True)
        del A, B, ref, scale
        torch.cuda.empty_cache()
    return rows


def _ms(fn) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


def speed() -> list[dict]:
    rows = []
    for M, N, K in SPEED_SIZES:
        A, B = _inputs("N(0,1)", M, N, K, seed=1)
        C = torch.empty(M, N, device="cuda")
        plan = simtlab.gemm_plan(A, B, C, precision="tf32x3")
        kernel, scratch = plan.split, torch.empty(plan.split.parts_bytes // 4, device="cuda")

        def split_only(A=A, B=B, K=K, N=N, kernel=kernel, scratch=scratch):  # (the plan's pre-pass alone)
            kernel.split(A.data_ptr(), K, B.data_ptr(), N, scratch.data_ptr(), torch.cuda.current_stream().cuda_stream)

        calls = dict(METHODS)
        calls["split pre-pass alone"] = None
        times = {name: [] for name in calls}
        for name, fn in list(calls.items()):  # (a variant that cannot take this shape: said, left out)
            try:
                if fn is not None:
                    fn(A, B)
            except LaunchError as e:
                print(f"{name} at {M}x{N}x{K}: {e}", flush=True)
                del calls[name], times[name]
        for _ in range(ROUNDS):
            for name, fn in calls.items():
                times[name].append(_ms(split_only if fn is None else (lambda fn=fn, A=A, B=B: fn(A, B))))
        med = {name: statistics.median(t) for name, t in times.items()}
        flops = 2 * M * N * K
        row = {"size": f"{M}x{N}x{K}"}
        for name, ms in med.items():
            row[f"{name} ms"] = round(ms, 4)
            if name != "split pre-pass alone":
                row[f"{name} TFLOP/s"] = round(flops / ms / 1e9, 1)
        row["x SGEMM"] = round(med["cuBLAS SGEMM"] / med["simtlab tf32x3"], 2)
        row["x Triton tf32x3"] = round(med["Triton tf32x3"] / med["simtlab tf32x3"], 2)
        for name in med:
            if name.startswith(("rung 13", "simtlab f16x3")):
                row[f"{name} x SGEMM"] = round(med["cuBLAS SGEMM"] / med[name], 2)
        row["spread_pct"] = round(100 * (max(times["simtlab tf32x3"]) - min(times["simtlab tf32x3"]))
                                  / med["simtlab tf32x3"], 1)
        rows.append(row)
        print(row, flush=True)
        del A, B, C, plan, scratch
        torch.cuda.empty_cache()
    return rows


def _table(title: str, rows: list[dict]) -> None:
    from rich.console import Console

    from simtlab.report.table import dict_table

    Console(width=250).print(dict_table(title, rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write every figure here")
    ap.add_argument("--only", default="accuracy,speed", help="which parts: accuracy, speed")
    ap.add_argument("--rung12", action="store_true",
                    help="also simtlab.gemm(rung='tf32x3_mma'): rung 12, the sm_80 path (mma.sync, split in registers)")
    ap.add_argument("--splits", default="", help="rung 11 also at these promotion periods (kernel calls), e.g. 2,4")
    ap.add_argument("--variant", action="append", default=[],
                    help="rung 11 also built with these parameters (a kernel call), e.g. SK=1,KEEP=3 (repeatable)")
    ap.add_argument("--f16x3", action="store_true", help="also simtlab.gemm(precision='f16x3'): rung 13 (fp16 parts)")
    ap.add_argument("--f16x3-splits", default="", help="rung 13 also at these promotion periods (kernel calls), e.g. 2")
    args = ap.parse_args()
    if args.f16x3:
        METHODS.append(("simtlab f16x3", lambda A, B: simtlab.gemm(A, B, precision="f16x3")))
    for split in filter(None, args.f16x3_splits.split(",")):
        METHODS.append((f"rung 13 SPLIT {split} (kernel call)", _kernel_call("f16x3", {"SPLIT": int(split)})))
    parts = set(args.only.split(","))
    if args.rung12:
        METHODS.append(("simtlab rung 12 (sm_80 path)", _ours_rung_12))
    for variant in [f"SPLIT={split}" for split in filter(None, args.splits.split(","))] + args.variant:
        overrides = {k: int(v) for k, v in (item.split("=") for item in variant.split(","))}
        label = " ".join(f"{k} {v}" for k, v in overrides.items())
        METHODS.append((f"rung 11 {label} (kernel call)", _kernel_call("tf32x3", overrides)))
    out = {"device": torch.cuda.get_device_properties(0).name, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "commit": os.environ.get("SIMTLAB_COMMIT", "unknown"), "torch": torch.__version__,
           "command": "python benchmarks/tf32x3_table.py " + " ".join(f"--{k} {v}" for k, v in vars(args).items() if v)}
    if "accuracy" in parts:
        out["accuracy"] = accuracy()
    if "speed" in parts:
        out["speed"] = speed()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    if "accuracy" in parts:
        _table("accuracy against the float64 product (fp32 inputs)", out["accuracy"])
    if "speed" in parts:
        _table("time per call, L2 cleared (do_bench median; median of 5 interleaved rounds)", out["speed"])


if __name__ == "__main__":
    main()
