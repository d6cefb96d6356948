"""Does a warm start pay? Tuned at one size, tuned again at another whose optimum is a different
configuration: evaluations the default strategy needs to come within 1% of the second size's
optimum, cold against warm (the first size's 8 fastest configurations measured first, as `simtlab
tune` does with what the store holds for other sizes), replayed on the committed tables as the
command runs (batch 15, the table shuffled per seed).

    python benchmarks/warm_start_benchmark.py [--seeds 30] [--md out.md] [--pair N ...]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from simtlab.tune.replay import evaluations_to_reach, load_table, top_configs

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
PAIRS = [("gemm_tuned_h200_2048", "gemm_tuned_h200_4096x4096x1024"),
         ("gemm_tuned_h200_4096x4096x1024", "gemm_tuned_h200_2048"),
         ("gemm_tc_wgmma_cluster_h200_4096_bf16", "gemm_tc_wgmma_cluster_h200_8192x1024x8192_bf16"),
         ("gemm_tc_wgmma_cluster_h200_8192x1024x8192_bf16", "gemm_tc_wgmma_cluster_h200_4096_bf16"),
         ("conv2d_pipelined_h200_8192_r3", "conv2d_pipelined_h200_8192_r1"),
         ("conv2d_pipelined_h200_8192_r1", "conv2d_pipelined_h200_8192_r3"),
         ("gemm_warptiling_h200_2048", "gemm_warptiling_h200_4096"),
         ("gemm_warptiling_h200_2048", "gemm_warptiling_h200_4096x4096x1024")]
BUDGET = 0.25  # of the target table: a seed not within 1% by then counts as "not reached"


def summary(runs: list[int | None]) -> str:
    reached = [n for n in runs if n is not None]
    if not reached:
        return "none within 1%"
    cap = "" if len(reached) == len(runs) else f", {len(runs) - len(reached)} not within {BUDGET:.0%}"
    return f"median {statistics.median(reached):.0f}, mean {statistics.fmean(reached):.1f}, max {max(reached)}{cap}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument("--md", type=Path)
    ap.add_argument("--pair", type=int, action="append", help="only these pairs (0-based, repeatable)")
    args = ap.parse_args()
    lines = [f"Evaluations to come within 1% of the target size's optimum, over {args.seeds} seeds (the default "
             f"strategy, batch 15; a seed stops counting at {BUDGET:.0%} of the table).", "",
             "| tuned at | then at | optimum the same? | cold | warm (8 best of the first size first) |",
             "|---|---|---|---|---|"]
    for i, (source, target) in enumerate(PAIRS):
        if args.pair and i not in args.pair:
            continue
        src, dst = (load_table(FIXTURES / f"{n}.json") for n in (source, target))
        same = top_configs(src, 1) == top_configs(dst, 1)
        cold = evaluations_to_reach(dst, seeds=args.seeds, budget=BUDGET)
        warm = evaluations_to_reach(dst, seeds=args.seeds, warm_start=top_configs(src), budget=BUDGET)
        lines.append(f"| {src.meta['problem']} | {dst.meta['problem']} ({dst.meta['rung']}) | {'yes' if same else 'no'} | "
                     f"{summary(cold)} | {summary(warm)} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.md:
        args.md.write_text(text)


if __name__ == "__main__":
    main()
