"""One table over several spaces from strategy_benchmark.py's --json files: a row per strategy, a
column per space, each cell the gap to the optimum at 10% of the space (mean / worst over the
seeds), and how many spaces the tuner's goal holds on (10%: mean <= 1%, worst <= 3%; 5%: mean <= 2%).

    python benchmarks/strategy_summary.py scores/*.json [--md out.md]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from simtlab.tune.replay import goal_misses


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scores", type=Path, nargs="+")
    ap.add_argument("--md", type=Path)
    args = ap.parse_args()
    spaces = [json.loads(p.read_text()) for p in args.scores]
    strategies = list(dict.fromkeys(r["strategy"] for s in spaces for r in s["rows"]))
    seeds = sorted({r["seeds"] for s in spaces for r in s["rows"]})

    def row(space, strategy, fraction):
        return next((r for r in space["rows"] if r["strategy"] == strategy and abs(r["fraction"] - fraction) < 1e-9), None)

    lines = [f"Gap to the optimum at 10% of each space, mean / worst over {', '.join(map(str, seeds))} seeds "
             "(ours at the command's batch, 15). Goal: 10% mean <= 1% and worst <= 3%, 5% mean <= 2%.", "",
             "| strategy | " + " | ".join(f"{s['meta'].get('rung', s['table'])} {s['meta'].get('problem', '')} "
                                          f"({s['size']})" for s in spaces) + " | goal held |",
             "|---|" + "---|" * (len(spaces) + 1)]
    for strategy in strategies:
        cells, held = [], 0
        for s in spaces:
            r10, r5 = row(s, strategy, 0.10), row(s, strategy, 0.05)
            if r10 is None:
                cells.append("")
                continue
            held += r5 is not None and not goal_misses(r10["mean_gap"], r10["worst_gap"], r5["mean_gap"])
            cells.append(f"{100 * r10['mean_gap']:+.2f}% / {100 * r10['worst_gap']:+.2f}%")
        lines.append(f"| {strategy} | " + " | ".join(cells) + f" | {held} of {sum(c != '' for c in cells)} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.md:
        args.md.write_text(text)


if __name__ == "__main__":
    main()
