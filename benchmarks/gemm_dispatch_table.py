"""The measured table simtlab.gemm_tc dispatches by (GPU): every candidate of
simtlab.ops.gemm_dispatch (rung 6, and rung 7 at each named tile and split) timed on a grid of
shapes - bf16 in and out, row-major operands, M, N from 1 to 16384 and K from 64 to 262144, cut to
what a few hundred microseconds hold - with L2 cleared before each repetition (median of REPS).

It writes the table (`--out`, committed as src/simtlab/ops/tables/gemm_tc_sm_<cc>.json) and grades
the dispatcher's rule for unseen shapes on the table itself: each measured shape left out in
turn, the candidate its nearest neighbour picks against the shape's own fastest (leave-one-out),
beside the rule's choice and rung 6 alone.

    python benchmarks/gemm_dispatch_table.py --out gemm_tc_sm_90.json [--quick]
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
MAX_FLOPS = 2.5e11  # (shapes beyond: rung 6's, the large class)
MAX_BYTES = 3e9
REPS = 5


def grid(quick: bool = False) -> list[tuple[int, int, int]]:
    sides = SIDES[::2] if quick else SIDES
    out = []
    for m, n, k in itertools.product(sides, sides, DEPTHS):
        if 2 * m * n * k <= MAX_FLOPS and 2 * (m * k + k * n + m * n) <= MAX_BYTES:
            out.append((m, n, k))
    return out


def worth_timing(name: str, m: int, n: int, k: int) -> bool:
    """Candidates that cannot win are left out: a rung 7 tile whose short side is 8x the short side
    of C or more (but the 8-wide ones), or a split whose blocks get under 2 slices."""
    if not name.startswith("r7:"):
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
    ap.add_argument("--quick", action="store_true", help="every other side length")
    ap.add_argument("--run", default="unnamed", help="the run's name, recorded in the table")
    args = ap.parse_args()

    import torch

    from simtlab.arrays import array_lib
    from simtlab.catalog import family
    from simtlab.device import device_info
    from simtlab.launch import build, choose_params, prepare
    from simtlab.ops import gemm_dispatch as gd
    from simtlab.ops.gemm_tc import DT, OUT, TcProblem, split_layout
    from simtlab.ops.gemm_tc_split import SplitKernel
    from simtlab.plans import TcPlan

    info = device_info(torch.cuda.current_device())
    lib = array_lib(torch.empty(1, device="cuda"))
    fam = family("gemm_tc")
    cands = gd.candidates()
    flush = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")  # (over twice the L2)
    stream = torch.cuda.current_stream().cuda_stream
    shapes = grid(args.quick)
    print(f"{torch.cuda.get_device_name()}: {len(shapes)} shapes x up to {len(cands)} candidates", flush=True)

    # every rung 7 build the grid needs, compiled first (NVRTC in this process's worker)
    t0 = time.time()
    built = {}

    def kernel(name, p):
        rung, params = cands[name]
        full = {**params, "DT": DT[p.dtype], "OUT": OUT[p.out], **split_layout(p, p.N > p.M).params}
        key = tuple(sorted(full.items()))
        if key not in built:
            built[key] = build(fam.rung("split_k"), full, info.arch)
        return SplitKernel(built[key], p, info, prepare)

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
        p = TcProblem(m, n, k, "bfloat16", 1, "bfloat16")
        A = (torch.rand(m, k, device="cuda") * 2 - 1).to(torch.bfloat16)
        B = (torch.rand(k, n, device="cuda") * 2 - 1).to(torch.bfloat16)
        C = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        ref = (A.float() @ B.float())
        us = {}
        for name in cands:
            if not worth_timing(name, m, n, k):
                continue
            try:
                if name == gd.RUNG6:
                    plan = TcPlan(lib, A, B, C, "bfloat16", rung="wgmma_cluster")
                    fn = lambda: plan(A, B, C)  # noqa: E731
                else:
                    kern = kernel(name, p)
                    pa, pb, pc = A.data_ptr(), B.data_ptr(), C.data_ptr()
                    fn = lambda: kern.launch(pa, pb, pc, stream)  # noqa: E731
                C.fill_(float("nan"))
                fn()
                torch.cuda.synchronize()
                err = float((C.float() - ref).norm() / max(float(ref.norm()), 1e-30))
                if not err <= 1e-2:  # (NaN fails too: a wrong candidate is never recorded as fast)
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
            print(f"[{i + 1}/{len(shapes)}] {m}x{n}x{k}: {best} {us[best]:.1f} us (rung 6 "
                  f"{us.get(gd.RUNG6, float('nan')):.1f})", flush=True)
    table = write(args, info, cands, rows)
    print(f"wrote {args.out}: {len(rows)} shapes in {time.time() - t0:.0f} s")
    print(grade(table))
    return 0


def write(args, info, cands, rows) -> dict:
    import torch

    cc = info.compute_capability
    table = {"device": torch.cuda.get_device_name(), "arch": f"sm_{cc[0]}{cc[1]}", "sms": info.sms, "run": args.run,
             "date": time.strftime("%Y-%m-%d"), "dtype": "bfloat16", "out": "bfloat16", "layout": "nn",
             "candidates": {k: {"rung": r, "params": p} for k, (r, p) in cands.items()}, "rows": rows}
    with open(args.out, "w") as f:
        json.dump(table, f, indent=None, separators=(",", ":"))
    return table


def grade(table: dict) -> str:
    """Leave-one-out: each row's time under the nearest other row's pick, the rule's pick and rung
    6, as a share of its own fastest (1.0 = the best candidate)."""
    from simtlab.ops import gemm_dispatch as gd
    from simtlab.ops.gemm_tc import TcProblem

    loss = {"nearest neighbour": [], "rule": [], "rung 6 alone": []}
    for row in table["rows"]:
        best = min(row["us"].values())
        other, _ = gd.nearest(table, row["M"], row["N"], row["K"], exclude=row)
        picks = {"nearest neighbour": gd.fastest(other) if other else None,
                 "rule": gd.rule(TcProblem(row["M"], row["N"], row["K"], "bfloat16", 1, "bfloat16"), table["sms"]),
                 "rung 6 alone": gd.RUNG6}
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
