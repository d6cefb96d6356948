"""What a caller of simtlab.gemm_tc / simtlab.gemm gets, beside the PyTorch call they would make
instead, in one process (GPU):

1. host cost of a call: 400 calls enqueued back to back on a 256^2 problem while the GPU sleeps
   in a kernel queued before them (so the host's own time is measured, not the GPU's: the launch
   queue holds about a thousand launches, and cuBLAS's fp32 call makes two), with the
   same tensors every call, with eight pairs in turn, and with a new pair every call (every
   address new: tensor maps encoded anew); prepared plans beside them (and bound to their
   operands: plan.bind(A, B, C), one driver launch a call), and the pieces of a call timed alone. Medians of nine interleaved rounds.
2. time of a call with L2 cleared before each (triton.testing.do_bench, median), simtlab and torch
   interleaved over nine rounds, the public function exactly as a user calls it: nothing prepared
   outside the timed call; each result checked against torch's. The share of torch's speed is the
   median of the rounds' own ratios (each round times both back to back, so a clock or power state
   that drifts between rounds cancels, as the host costs' ratios do); the medians of the times
   beside it.
3. a bf16 MLP training step (four 4096x4096 layers, 8192 tokens) through simtlab.torch.matmul and
   through torch, both compiled with torch.compile: loss and gradients compared, step times.

    python benchmarks/api_bench.py [--json api.json] [--only host,call,mlp]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import time
from functools import partial

import torch
import triton

import simtlab

ROUNDS = 9
SLEEP_CYCLES = 200_000_000  # ~100 ms at 1.98 GHz: longer than any 400 calls take to enqueue


def _ms(fn) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


HOST_ROUNDS, HOST_CALLS = 15, 400


def host_samples(variants: dict, rounds: int, calls: int) -> dict[str, list[float]]:
    """Microseconds of host time a call of each variant, one sample a round: `calls` calls enqueued
    back to back while the GPU sleeps in a kernel queued before them, the variants in turn each
    round (each called once first: plans made, kernels loaded)."""
    for fn in variants.values():
        fn()
    torch.cuda.synchronize()
    samples: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            torch.cuda.synchronize()
            torch.cuda._sleep(SLEEP_CYCLES)  # the GPU busy until every call below is enqueued
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            samples[name].append((t1 - t0) / calls * 1e6)
    return samples


def host_costs(rounds: int = HOST_ROUNDS, calls: int = HOST_CALLS) -> list[dict]:
    """Microseconds of host time per call, 256^2 bf16 (and fp32)."""
    n = 256
    dev = "cuda"

    def pair(dtype):
        return torch.randn(n, n, device=dev).to(dtype), torch.randn(n, n, device=dev).to(dtype)

    a, b = pair(torch.bfloat16)
    c16 = torch.empty(n, n, device=dev, dtype=torch.bfloat16)
    eight = [pair(torch.bfloat16) for _ in range(8)]
    fresh = [pair(torch.bfloat16) for _ in range(calls)]  # every call a new address
    a32, b32 = pair(torch.float32)
    plan = simtlab.gemm_tc_plan(a, b, out_dtype="bfloat16")
    plan_c = simtlab.gemm_tc_plan(a, b, c16, out_dtype="bfloat16")
    plan32 = simtlab.gemm_plan(a32, b32)
    c32 = torch.empty(n, n, device=dev)
    plan32_c = simtlab.gemm_plan(a32, b32, c32)

    def cycling(pairs, call):
        it = itertools.cycle(pairs)
        return lambda: call(*next(it))

    variants = {
        "torch.mm bf16": lambda: torch.mm(a, b),
        "simtlab.gemm_tc bf16": lambda: simtlab.gemm_tc(a, b, out_dtype="bfloat16"),
        "torch.mm bf16, out=C": lambda: torch.mm(a, b, out=c16),
        "simtlab.gemm_tc bf16, C given": lambda: simtlab.gemm_tc(a, b, c16, out_dtype="bfloat16"),
        "torch.mm bf16, 8 pairs in turn": cycling(eight, torch.mm),
        "simtlab.gemm_tc bf16, 8 pairs in turn": cycling(eight, lambda x, y: simtlab.gemm_tc(x, y, out_dtype="bfloat16")),
        "torch.mm bf16, a new pair every call": cycling(fresh, torch.mm),
        "simtlab.gemm_tc bf16, a new pair every call": cycling(fresh,
                                                               lambda x, y: simtlab.gemm_tc(x, y, out_dtype="bfloat16")),
        "plan(A, B) bf16": lambda: plan(a, b),
        "plan(A, B, C) bf16": lambda: plan_c(a, b, c16),
        "plan(A, B) bf16, a new pair every call": cycling(fresh, plan),
        "bound plan: plan.bind(A, B, C)() bf16": plan_c.bind(a, b, c16),
        "torch.mm fp32": lambda: torch.mm(a32, b32),
        "simtlab.gemm fp32": lambda: simtlab.gemm(a32, b32),
        "plan(A, B) fp32": lambda: plan32(a32, b32),
        "bound plan: plan.bind(A, B, C)() fp32": plan32_c.bind(a32, b32, c32),
    }
    # the pieces of a call, each alone (what the table's differences are made of)
    from simtlab.arrays import array_lib

    lib = array_lib(a)
    direct = plan_c._direct.launch
    pa, pb, pc, stream = lib.ptr(a), lib.ptr(b), lib.ptr(c16), lib.stream(0)
    pieces = {
        "piece: read 3 operands' kinds (dtype, shape, strides, device)": lambda: (lib.key(a), lib.key(b), lib.key(c16)),
        "piece: 3 addresses, the current stream and device": lambda: (lib.ptr(a), lib.ptr(b), lib.ptr(c16),
                                                                     lib.stream(0), lib.current_device()),
        "piece: allocate C (A.new_empty)": lambda: plan._new_c(a),
        "piece: the launch alone (maps kept, one cuLaunchKernel)": lambda: direct(pa, pb, pc, stream),
    }
    variants.update(pieces)
    variants.update(launch_anatomy(a))
    samples = host_samples(variants, rounds, calls)
    # Against torch.mm round by round (the two were timed seconds apart, under the same load), then
    # the median of those ratios: the host's drift between rounds, large on a shared machine, cancels.
    rows = []
    base = {"bf16": samples["torch.mm bf16"], "fp32": samples["torch.mm fp32"]}
    for name, xs in samples.items():
        us = statistics.median(xs)
        ref = base["fp32" if "fp32" in name else "bf16"]
        rows.append({"call": name, "us_per_call": round(us, 2), "min_us": round(min(xs), 2),
                     "spread_pct": round(100 * (max(xs) - min(xs)) / us, 1),
                     "x_torch_mm": round(statistics.median(x / r for x, r in zip(xs, ref)), 2)})
    return rows


def _operand(rows, cols, transposed, dtype, batch=None):
    lead = (batch,) if batch else ()
    if transposed:
        return _operand(cols, rows, False, dtype, batch).transpose(-1, -2)
    return (torch.rand(*lead, rows, cols, device="cuda") * 2 - 1).to(dtype)


ANATOMY = r"""
struct __align__(64) Map { unsigned long long bits[16]; };
extern "C" __global__ void small(int x) {}
extern "C" __global__ void big(int m, int n, int k, int b, const __grid_constant__ Map ma, const __grid_constant__ Map mb,
                               const __grid_constant__ Map mc, float* c) {}
extern "C" __global__ void __cluster_dims__(2, 1, 1) paired(int x) {}
extern "C" __global__ void __cluster_dims__(2, 1, 1) paired_big(int m, int n, int k, int b,
    const __grid_constant__ Map ma, const __grid_constant__ Map mb, const __grid_constant__ Map mc, float* c) {}
"""


def launch_anatomy(a) -> dict:
    """What a launch costs by what it carries: empty kernels launched like rung 6 (132 blocks of 384
    threads) with 4 bytes of parameters or rung 6's 440 (three 128-byte tensor maps), alone or in
    clusters of 2; and the ways to allocate a C."""
    import cupy

    from simtlab.driver import I32, MAP, PTR, PackedLaunch
    from simtlab.launch import function_handle

    module = cupy.RawModule(code=ANATOMY, options=("-std=c++17",))
    maps = (torch.zeros(64, dtype=torch.int64))  # (host memory: what the map parameters point at)
    out = {}
    for name, kinds in (("small", (I32,)), ("big", (I32,) * 4 + (MAP,) * 3 + (PTR,)), ("paired", (I32,)),
                        ("paired_big", (I32,) * 4 + (MAP,) * 3 + (PTR,))):
        packed = PackedLaunch(function_handle(module.get_function(name)), (132, 1, 1), (384, 1, 1), 0, kinds)
        for i, kind in enumerate(kinds):
            if kind == MAP:
                packed.point_map(i, maps.data_ptr() + 128 * (i - 4) + (-maps.data_ptr() % 64))
        out[f"piece: launch an empty kernel, {name} parameters"] = partial(packed.launch, 0)
    dev = torch.device("cuda", 0)
    out["piece: torch.empty(shape, dtype=, device=torch.device)"] = lambda: torch.empty((256, 256), dtype=torch.bfloat16,
                                                                                         device=dev)
    out["piece: A.new_empty(shape)"] = lambda: a.new_empty((256, 256))
    out["piece: torch.empty_like(A)"] = lambda: torch.empty_like(a)
    return out


CALL_CASES = [  # (label, dtype, batch, M, N, K, layout, target % of torch)
    ("bf16 4096^3", torch.bfloat16, None, 4096, 4096, 4096, "nn", 100),
    ("fp16 4096^3", torch.float16, None, 4096, 4096, 4096, "nn", 100),
    ("bf16 8192^3", torch.bfloat16, None, 8192, 8192, 8192, "nn", 100),
    ("fp16 8192^3", torch.float16, None, 8192, 8192, 8192, "nn", 100),
    ("bf16 2048^3", torch.bfloat16, None, 2048, 2048, 2048, "nn", 97),
    ("bf16 8192x1024x8192", torch.bfloat16, None, 8192, 1024, 8192, "nn", 97),
    ("bf16 16384x16384x1024", torch.bfloat16, None, 16384, 16384, 1024, "nn", 97),
    ("bf16 batched 64x512^3 (bmm)", torch.bfloat16, 64, 512, 512, 512, "nn", 97),
    ("bf16 4096^3 NT (B.T)", torch.bfloat16, None, 4096, 4096, 4096, "nt", 95),
    ("bf16 4096^3 TN (A.T)", torch.bfloat16, None, 4096, 4096, 4096, "tn", 95),
    ("bf16 4096^3 TT", torch.bfloat16, None, 4096, 4096, 4096, "tt", 95),
    ("fp32 4096^3", torch.float32, None, 4096, 4096, 4096, "nn", 95),
    ("fp32 8192^3", torch.float32, None, 8192, 8192, 8192, "nn", 95),
    ("fp32 4097x4095x4093", torch.float32, None, 4097, 4095, 4093, "nn", 90),
]


def call_times(rounds: int = ROUNDS, only: str | None = None) -> list[dict]:
    from simtlab.ops import gemm_tc

    torch.backends.cuda.matmul.allow_tf32 = False  # torch's fp32 matmul as SGEMM (its default)
    rows = []
    for label, dtype, batch, M, N, K, layout, target in CALL_CASES:
        if only and not any(part in label for part in only.split(",")):
            continue
        torch.manual_seed(M + N + K)
        A = _operand(M, K, layout[0] == "t", dtype, batch)
        B = _operand(K, N, layout[1] == "t", dtype, batch)
        if dtype == torch.float32:
            ours, theirs = (lambda: simtlab.gemm(A, B)), (lambda: torch.mm(A, B))
        else:
            name = str(dtype).removeprefix("torch.")
            ours = lambda: simtlab.gemm_tc(A, B, out_dtype=name)  # noqa: E731 (C in the inputs' type, as torch's)
            theirs = (lambda: torch.bmm(A, B)) if batch else (lambda: torch.matmul(A, B))
        got, want = ours().float(), theirs().float()
        diff = float((got - want).norm() / want.norm())
        if dtype == torch.float32:
            bound = 2e-6
        else:
            p = gemm_tc.TcProblem(M, N, K, str(dtype).removeprefix("torch."), batch or 1,
                                  str(dtype).removeprefix("torch."))
            bound = 2 * gemm_tc.tolerance(p)  # two products, each within the family's bound of the exact one
        ms_ours, ms_theirs = [], []
        for _ in range(rounds):
            ms_ours.append(_ms(ours))
            ms_theirs.append(_ms(theirs))
        o, t = statistics.median(ms_ours), statistics.median(ms_theirs)
        paired = statistics.median(th / ou for ou, th in zip(ms_ours, ms_theirs))  # round by round
        flops = 2 * M * N * K * (batch or 1)
        rows.append({"call": label, "simtlab_ms": round(o, 4), "torch_ms": round(t, 4), "pct_of_torch": round(100 * paired, 1),
                     "pct_of_medians": round(100 * t / o, 1),
                     "target_pct": target, "simtlab_tflops": round(flops / o / 1e9, 1),
                     "torch_tflops": round(flops / t / 1e9, 1), "diff_vs_torch": f"{diff:.1e}",
                     "ok": diff <= bound, "spread_pct": round(100 * (max(ms_ours) - min(ms_ours)) / o, 1),
                     # (rung 6's parameters for the shape: the store's fastest row there, or the shipped ones)
                     **({} if dtype == torch.float32 else {"params": simtlab.gemm_tc_plan(A, B, out_dtype=name).params})})
        print(rows[-1], flush=True)
        A = B = got = want = None  # (freed before the next case's operands)
        torch.cuda.empty_cache()
    return rows


def mlp_step(layers: int = 4, width: int = 4096, tokens: int = 8192, rounds: int = ROUNDS) -> dict:
    """A bf16 MLP's training step (forward, MSE loss, backward) through simtlab.torch.matmul and
    through torch.matmul, each compiled with torch.compile; the same weights and batch."""
    import simtlab.torch as st

    torch.manual_seed(0)
    x = (torch.randn(tokens, width, device="cuda") / 2).to(torch.bfloat16)
    target = torch.randn(tokens, width, device="cuda")
    weights = [(torch.randn(width, width, device="cuda") / width ** 0.5).to(torch.bfloat16) for _ in range(layers)]

    def forward(mm):
        def loss(x, target, *ws):
            h = x
            for i, w in enumerate(ws):
                h = mm(h, w)
                if i < len(ws) - 1:
                    h = torch.relu(h)
            return ((h.float() - target) ** 2).mean()
        return torch.compile(loss, fullgraph=True)

    results = {}
    for name, mm in (("simtlab", st.matmul), ("torch", torch.matmul)):
        ws = [w.clone().requires_grad_() for w in weights]
        fwd = forward(mm)

        def step():
            for w in ws:
                w.grad = None
            fwd(x, target, *ws).backward()

        step()  # compile
        loss = fwd(x, target, *ws)
        loss.backward()
        results[name] = {"loss": float(loss), "grads": [w.grad.float() for w in ws], "step": step}
    grad_diff = max(float((g - r).norm() / r.norm()) for g, r in zip(results["simtlab"]["grads"],
                                                                      results["torch"]["grads"]))
    loss_diff = abs(results["simtlab"]["loss"] - results["torch"]["loss"]) / abs(results["torch"]["loss"])
    ms = {"simtlab": [], "torch": []}
    for _ in range(rounds):
        for name in ms:
            ms[name].append(_ms(results[name]["step"]))
    o, t = statistics.median(ms["simtlab"]), statistics.median(ms["torch"])
    paired = statistics.median(th / ou for ou, th in zip(ms["simtlab"], ms["torch"]))  # round by round
    flops = 3 * layers * 2 * tokens * width * width  # forward, and the two products of each layer's backward
    return {"layers": layers, "width": width, "tokens": tokens, "simtlab_ms": round(o, 3), "torch_ms": round(t, 3),
            "pct_of_torch": round(100 * paired, 1), "simtlab_tflops": round(flops / o / 1e9, 1),
            "torch_tflops": round(flops / t / 1e9, 1), "loss_simtlab": results["simtlab"]["loss"],
            "loss_torch": results["torch"]["loss"], "loss_rel_diff": f"{loss_diff:.1e}",
            "max_grad_rel_diff": f"{grad_diff:.1e}", "ok": grad_diff <= 2e-2 and loss_diff <= 1e-2}


def _table(title: str, rows: list[dict]) -> None:
    from rich.console import Console

    from simtlab.report.table import dict_table

    Console(width=220).print(dict_table(title, rows, left=("call",)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write every figure here")
    ap.add_argument("--only", default="host,call,mlp", help="which parts: host, call, mlp")
    ap.add_argument("--case", help="only the call rows whose label contains one of these (comma-separated)")
    args = ap.parse_args()
    parts = set(args.only.split(","))
    props = torch.cuda.get_device_properties(0)
    out = {"device": props.name, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "commit": os.environ.get("SIMTLAB_COMMIT", "unknown"), "torch": torch.__version__,
           "command": "python benchmarks/api_bench.py " + " ".join(f"--{k} {v}" for k, v in vars(args).items() if v)}
    print(out, flush=True)
    if "host" in parts:
        out["host"] = host_costs()
        _table(f"host cost per call, 256^2 ({HOST_CALLS} calls back to back, the GPU asleep; median of {HOST_ROUNDS} rounds, x_torch_mm round by round)", out["host"])
    if "call" in parts:
        out["call"] = call_times(only=args.case)
    if "mlp" in parts:
        out["mlp"] = mlp_step()
        print(out["mlp"], flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    if "host" in parts:
        _table(f"host cost per call, 256^2 ({HOST_CALLS} calls back to back, the GPU asleep; median of {HOST_ROUNDS} rounds, x_torch_mm round by round)", out["host"])
    if "call" in parts:
        _table(f"time per call, L2 cleared (do_bench median; {ROUNDS} interleaved rounds: pct_of_torch the median of the rounds' ratios)", out["call"])
    if "mlp" in parts:
        _table("bf16 MLP training step, torch.compile", [{k: v for k, v in out["mlp"].items()}])


if __name__ == "__main__":
    main()
