"""Choosing the cost model's setting without grading it on the spaces it was chosen on: every
candidate setting replayed (as `simtlab tune` runs it: batch 15, the table shuffled per seed,
SEEDS seeds) on every committed measured space, then, space by space, the setting that does best
on the *other* spaces is scored on the one left out (leave one space out).

"Best on the others": fewest goal misses over them (a miss: at 10% of the space a mean gap above
1% or a worst above 3%, or at 5% a mean above 2%), then the lowest mean gap at 10% averaged over
them. If one setting wins every fold, its left-out scores are what the default holds on spaces it
was not chosen on.

    python benchmarks/strategy_loo.py [--seeds 100] [--jobs 2] [--json out.json] [--md out.md]
"""

from __future__ import annotations

import argparse
import json
import statistics
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from simtlab.tune.replay import goal_misses

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
# name -> CostModel options (the first is the default before this comparison). The cost model gets
# each configuration's static profile where the table has them committed (tests/fixtures/static/),
# as `simtlab tune` computes them; "static": None withholds them.
SETTINGS = {
    "parameters only (explore 2, local 3, spread)": {"explore": 2, "local": 3, "design": "spread", "static": None},
    "static profiles, first batch spread over all": {"explore": 2, "local": 3, "design": "spread",
                                                     "most_idle": None},
    "static profiles, first batch without points idling over 20%": {"explore": 2, "local": 3, "design": "spread",
                                                                    "most_idle": 0.2},
}
FRACTIONS = (0.05, 0.10)


def replay(job):
    path, name, options, seeds = job
    from simtlab.tune.replay import load_table, score

    t = load_table(path)
    rows = {r.fraction: r for r in score(t, ["model"], FRACTIONS, seeds, model=options)}
    return path, name, {"mean5": rows[0.05].mean_gap, "worst5": rows[0.05].worst_gap,
                        "mean10": rows[0.10].mean_gap, "worst10": rows[0.10].worst_gap,
                        "found10": rows[0.10].found_share}


def misses(s: dict) -> int:
    return goal_misses(s["mean10"], s["worst10"], s["mean5"])


def choose(results: dict, spaces: list[str]) -> str:
    """The setting with the fewest goal misses over `spaces`, then the lowest mean gap at 10%."""
    return min(results, key=lambda n: (sum(misses(results[n][s]) for s in spaces),
                                       statistics.fmean(results[n][s]["mean10"] for s in spaces)))


def cell(s: dict) -> str:
    return (f"{100 * s['mean10']:+.2f}% / {100 * s['worst10']:+.2f}% ({100 * s['found10']:.0f}% found); "
            f"5%: {100 * s['mean5']:+.2f}%")


def markdown(results: dict, spaces: list[str], seeds: int) -> str:
    names = list(results)
    lines = [f"Cells: at 10% of the space, mean / worst gap to the optimum over {seeds} seeds (share of seeds "
             "that found it); at 5%, the mean gap. Goal: 10% mean <= 1%, worst <= 3%; 5% mean <= 2%.", "",
             "| space | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for s in spaces:
        lines.append(f"| {s} | " + " | ".join(("**" if misses(results[n][s]) else "") + cell(results[n][s]) +
                                              ("**" if misses(results[n][s]) else "") for n in names) + " |")
    lines.append("| goal misses | " + " | ".join(str(sum(misses(results[n][s]) for s in spaces)) for n in names) + " |")
    lines += ["", "Leave one space out: the setting chosen on the other spaces, scored on the one left out.", "",
              "| left out | chosen on the others | its score there | goal |", "|---|---|---|---|"]
    for s in spaces:
        n = choose(results, [o for o in spaces if o != s])
        lines.append(f"| {s} | {n} | {cell(results[n][s])} | {'missed' if misses(results[n][s]) else 'met'} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", type=Path, help="write the scores here (and read them back with --from-json)")
    ap.add_argument("--from-json", type=Path, help="only print the tables from an earlier --json")
    ap.add_argument("--md", type=Path)
    args = ap.parse_args()
    if args.from_json:
        data = json.loads(args.from_json.read_text())
        results, seeds = data["results"], data["seeds"]
    else:
        tables = sorted(FIXTURES.glob("*_h200_*.json"))
        jobs = [(str(p), n, o, args.seeds) for p in tables for n, o in SETTINGS.items()]
        results = {n: {} for n in SETTINGS}
        with ProcessPoolExecutor(args.jobs) as pool:
            for path, name, s in pool.map(replay, jobs):
                results[name][Path(path).stem] = s
                print(f"{Path(path).stem:48} {name:40} {cell(s)}", flush=True)
        seeds = args.seeds
        if args.json:
            args.json.write_text(json.dumps({"seeds": seeds, "settings": SETTINGS, "results": results}, indent=1))
    spaces = sorted(next(iter(results.values())))
    text = markdown(results, spaces, seeds)
    print(text)
    if args.md:
        args.md.write_text(text)


if __name__ == "__main__":
    main()
