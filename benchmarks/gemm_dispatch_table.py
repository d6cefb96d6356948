"""The measured tables simtlab.gemm_tc and simtlab.gemm dispatch by (GPU): every candidate of
simtlab.ops.gemm_dispatch (gemm_tc: rung 6, and rung 7 at each named tile and split, bf16 in and
out; gemm: rung 10, and rung 14 likewise, fp32) timed on a grid of shapes - row-major operands, M,
N from 1 to 16384 and K from 64 to 262144, cut to what a few hundred microseconds hold - with L2
cleared before each repetition (median of REPS), each candidate's result checked first.

It writes the table (`--out`, committed as src/simtlab/ops/tables/FAMILY_sm_<cc>.json) and grades
the dispatcher's rule for unseen shapes on the table itself: each measured shape left out in
turn, the candidate its nearest neighbour picks against the shape's own fastest (leave-one-out),
beside the rule's choice and the big-tile rung alone.

    python benchmarks/gemm_dispatch_table.py --family gemm_tc --out gemm_tc_sm_90.json [--quick]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time

SIDES = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
DEPTHS = (64, 512, 4096, 32768, 262144)
MAX_FLOPS = {"gemm_tc": 2.5e11, "gemm": 4e10}  # (beyond: the big-tile rung's, the large class; fp32 is ~15x slower)
MAX_BYTES = 3e9
REPS = 5


def grid(quick: bool = False, family: str = "gemm_tc") -> list[tuple[int, int, int]]:
    sides = SIDES[::2] if quick else SIDES
    element = 4 if family == "gemm" else 2
    out = []
    for m, n, k in itertools.product(sides, sides, DEPTHS):
        if 2 * m * n * k <= MAX_FLOPS[family] and element * (m * k + k * n + m * n) <= MAX_BYTES:
            out.append((m, n, k))
    return out


def worth_timing(name: str, m: int, n: int, k: int) -> bool:
    """Candidates that cannot win are left out: a split tile whose short side is 8x the short side
    of C or more (but the 8-wide ones), or a split whose blocks get under 2 slices."""
    if not name.startswith(("r7:", "r14:")):
        return True
    _, tile, s = name.split(":")
    bm, bn = map(int, tile.split("x"))
    short = min(m, n)
    if bn > 8 and bn >= 8 * short:
        return False
    return -(-k // 64) // int(s[1:]) >= 2


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--family", choices=("gemm_tc", "gemm"), default="gemm_tc")
    ap.add_argument("--quick", action="store_true", help="every other side length")
    ap.add_argument("--run", default="unnamed", help="the run's name, recorded in the table")
    args = ap.parse_args()

    import torch

    from simtlab.arrays import array_lib
    from simtlab.catalog import family
    from simtlab.device import device_info
    from simtlab.launch import build, prepare
    from simtlab.ops import gemm_dispatch as gd
    from simtlab.ops.gemm_tc import TcProblem
    from simtlab.ops.split import F32SplitKernel, SplitKernel
    from simtlab.ops.gemm_plans import GemmPlan, TcPlan, _Shape

    info = device_info(torch.cuda.current_device())
    lib = array_lib(torch.empty(1, device="cuda"))
    d = gd.TC if args.family == "gemm_tc" else gd.FP32
    fp32 = d is gd.FP32
    fam = family(d.family)
    cands = gd.candidates(d)
    dtype = torch.float32 if fp32 else torch.bfloat16
    flush = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")  # (over twice the L2)
    stream = torch.cuda.current_stream().cuda_stream
    shapes = grid(args.quick, args.family)
    print(f"{torch.cuda.get_device_name()}: {len(shapes)} shapes x up to {len(cands)} candidates", flush=True)

    # every rung 7 build the grid needs, compiled first (NVRTC in this process's worker)
    t0 = time.time()
    built = {}

    def kernel(name, p):
        rung, params = cands[name]
        full = {**params, **gd.split_problem_params(p, params, d)}
        key = tuple(sorted(full.items()))
        if key not in built:
            built[key] = build(fam.rung("split_k"), full, info.arch)
        return (F32SplitKernel if fp32 else SplitKernel)(built[key], p, info, prepare)

    def timed(fn) -> float:
        fn()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(REPS)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(REPS)]
        for s, e in zip(starts, ends):
            flush.zero_()
            s.record()
            fn()
            e.record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e3

    rows = []
    for i, (m, n, k) in enumerate(shapes):
        p = _Shape(m, n, k) if fp32 else TcProblem(m, n, k, "bfloat16", 1, "bfloat16")
        A = (torch.rand(m, k, device="cuda") * 2 - 1).to(dtype)
        B = (torch.rand(k, n, device="cuda") * 2 - 1).to(dtype)
        C = torch.empty(m, n, device="cuda", dtype=dtype)
        ref = A.double() @ B.double() if fp32 else A.float() @ B.float()
        us = {}
        for name in cands:
            if not worth_timing(name, m, n, k):
                continue
            try:
                if name == d.big_name:
                    plan = (GemmPlan(lib, A, B, C, rung="tuned") if fp32 else
                            TcPlan(lib, A, B, C, "bfloat16", rung="wgmma_cluster"))
                    fn = lambda: plan(A, B, C)  # noqa: E731
                else:
                    kern = kernel(name, p)
                    pa, pb, pc = A.data_ptr(), B.data_ptr(), C.data_ptr()
                    fn = lambda: kern.launch(pa, pb, pc, stream)  # noqa: E731
                C.fill_(float("nan"))
                fn()
                torch.cuda.synchronize()
                err = float((C.double() - ref).norm() / max(float(ref.norm()), 1e-30))
                if not err <= (1e-5 if fp32 else 1e-2):  # (NaN fails too: a wrong candidate is never recorded as fast)
                    print(f"  {name} at {m}x{n}x{k}: error {err:.2e}, left out", flush=True)
                    continue
                us[name] = round(timed(fn), 3)
            except Exception as exc:
                print(f"  {name} at {m}x{n}x{k}: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}", flush=True)
        del A, B, C, ref
        if us:
            rows.append({"M": m, "N": n, "K": k, "us": us})
            if len(rows) % 50 == 0:  # (a run cut short keeps what it measured)
                write(args, info, cands, rows)
            best = min(us, key=us.get)
            print(f"[{i + 1}/{len(shapes)}] {m}x{n}x{k}: {best} {us[best]:.1f} us ({d.big_name} "
                  f"{us.get(d.big_name, float('nan')):.1f})", flush=True)
    table = write(args, info, cands, rows)
    print(f"wrote {args.out}: {len(rows)} shapes in {time.time() - t0:.0f} s")
    print(grade(table, d))
    return 0


def write(args, info, cands, rows) -> dict:
    import torch

    cc = info.compute_capability
    kind = "float32" if args.family == "gemm" else "bfloat16"
    table = {"device": torch.cuda.get_device_name(), "arch": f"sm_{cc[0]}{cc[1]}", "sms": info.sms, "run": args.run,
             "family": args.family, "date": time.strftime("%Y-%m-%d"), "dtype": kind, "out": kind, "layout": "nn",
             "candidates": {k: {"rung": r, "params": p} for k, (r, p) in cands.items()}, "rows": rows}
    with open(args.out, "w") as f:
        json.dump(table, f, indent=None, separators=(",", ":"))
    return table


def grade(table: dict, d=None) -> str:
    """Leave-one-out: each row's time under the nearest other row's pick, the rule's pick and the
    big-tile rung, as a share of its own fastest (1.0 = the best candidate)."""
    from simtlab.ops import gemm_dispatch as gd
    from simtlab.ops.gemm_plans import _Shape

    d = d or gd.TC
    alone = f"{d.big_name} alone"
    loss = {"nearest neighbour": [], "rule": [], alone: []}
    for row in table["rows"]:
        best = min(row["us"].values())
        other, _ = gd.nearest(table, row["M"], row["N"], row["K"], exclude=row)
        picks = {"nearest neighbour": gd.fastest(other) if other else None,
                 "rule": gd.rule(_Shape(row["M"], row["N"], row["K"]), table["sms"], d), alone: d.big_name}
        for what, name in picks.items():
            t = row["us"].get(name)
            loss[what].append(best / t if t else 0.0)
    lines = ["left out in turn: the pick's speed as a share of the shape's fastest candidate",
             "| pick | mean | median | within 5% | worst |", "|---|---|---|---|---|"]
    for what, xs in loss.items():
        lines.append(f"| {what} | {100 * statistics.mean(xs):.1f}% | {100 * statistics.median(xs):.1f}% | "
                     f"{sum(x >= 0.95 for x in xs)}/{len(xs)} | {100 * min(xs):.1f}% |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
