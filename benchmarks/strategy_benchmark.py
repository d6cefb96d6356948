"""Search strategies against a brute-force table measured on the H200: simtlab's (random, the
gradient-boosted cost model, Optuna TPE) and, side by side, Kernel Tuner's own strategies in its
simulation mode on the same table (its cache format, same space, same budgets). Ours run as
`simtlab tune` runs them (its batch on the H200 host, the table's order shuffled per seed). Best
found after 5%, 10% and 20% of the evaluations, over SEEDS seeds: mean, median and worst gap to the
optimum, and the share of seeds that found it.

    python benchmarks/strategy_benchmark.py tests/fixtures/gemm_tuned_h200_2048.json [--seeds 100] [--batch N] [--md out.md]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import tempfile
import time
import warnings
from pathlib import Path

from simtlab.tune.replay import (H200_HOST_CPUS, StrategyScore, Table, command_batch_for, command_configs,
                                 load_table, score)

OURS = ("random", "model", "tpe")
# greedy_ils is left out: on this restricted space it kept revisiting cached points without spending
# its budget (over 10 minutes for one 52-evaluation run); every run also gets a time limit.
KERNEL_TUNER = ("random_sample", "genetic_algorithm", "bayes_opt", "pso", "simulated_annealing", "diff_evo")
KT_TIME_LIMIT_S = 120
FRACTIONS = (0.05, 0.10, 0.20)


def kernel_tuner_scores(table: Table, strategies, seeds: int) -> list[StrategyScore]:
    """Kernel Tuner in simulation mode: the table written as its cache file, the configurations the
    command would search as its restriction, `max_fevals` as the budget; each seed sets NumPy's and Python's generators."""
    import numpy as np
    import kernel_tuner

    names = table.params
    tune_params = {n: sorted({dict(k)[n] for k in table.times}) for n in names}
    entries = {}
    for k, ms in table.times.items():
        c = dict(k)
        entries[",".join(str(c[n]) for n in names)] = {
            **c, "time": ms if ms is not None else "RuntimeFailedConfig",
            "compile_time": 0, "verification_time": 0, "benchmark_time": 0}
    # the configurations `simtlab tune` would search (those the launch refuses at the table's size left
    # out, as for ours): what a Kernel Tuner user's restriction would allow
    valid = {",".join(str(c[n]) for n in names) for c in command_configs(table)}
    # Kernel Tuner passes restriction functions the parameters by name
    restriction = eval(f"lambda {', '.join(names)}: ','.join(map(str, ({', '.join(names)},))) in valid",
                       {"valid": valid})
    n = len(table.times)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache.json"
        cache.write_text(json.dumps({"device_name": table.meta.get("device", "GPU"), "kernel_name": "kernel",
                                     "problem_size": [1], "tune_params_keys": names, "tune_params": tune_params,
                                     "objective": "time", "cache": entries}))
        for strategy in strategies:
            for f in FRACTIONS:
                budget = max(1, round(f * n))
                gaps = []
                for seed in range(seeds):
                    np.random.seed(seed)
                    random.seed(seed)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        results, _ = kernel_tuner.tune_kernel(
                            "kernel", "", (1,), [], tune_params, strategy=strategy, restrictions=[restriction],
                            strategy_options={"max_fevals": budget, "time_limit": KT_TIME_LIMIT_S}, simulation_mode=True, cache=str(cache),
                            quiet=True, verbose=False)
                    times = [r["time"] for r in results if isinstance(r.get("time"), float)]
                    gaps.append(min(times) / table.optimum - 1 if times else float("inf"))
                out.append(StrategyScore(f"kernel_tuner:{strategy}", f, budget, statistics.fmean(gaps), max(gaps),
                                         seeds, statistics.median(gaps), sum(g <= 0 for g in gaps) / len(gaps)))
    return out


def markdown(table: Table, rows: list[StrategyScore], seconds: dict) -> str:
    meta = table.meta
    lines = [f"Strategies on the recorded {meta.get('rung', '')} table at {meta.get('problem', '')} "
             f"({len(table.times)} valid configurations, optimum {table.optimum:.4f} ms; "
             f"{meta.get('device', '')}, commit {meta.get('commit', '')}, {meta.get('date', '')}). "
             f"Gap = best found / optimum - 1 over {rows[0].seeds} seeds; ours at batch {rows[0].batch}, "
             "the table shuffled per seed. Cells: mean / median / worst gap, share of seeds at the optimum.", "",
             "| strategy | " + " | ".join(f"{100 * f:.0f}% ({max(1, round(f * len(table.times)))} evals)"
                                          for f in FRACTIONS) + " | replay time |",
             "|---|" + "---|" * (len(FRACTIONS) + 1)]
    for name in dict.fromkeys(r.strategy for r in rows):
        cells = []
        for f in FRACTIONS:
            r = next(r for r in rows if r.strategy == name and r.fraction == f)
            median = "" if r.median_gap != r.median_gap else f" / +{100 * r.median_gap:.2f}%"
            found = "" if r.found_share != r.found_share else f", {100 * r.found_share:.0f}% found"
            cells.append(f"+{100 * r.mean_gap:.2f}%{median} / +{100 * r.worst_gap:.2f}%{found}")
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {seconds[name]:.0f} s |")
    return "\n".join(lines) + "\n"


def _value(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("table", type=Path)
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--batch", type=int, default=command_batch_for(H200_HOST_CPUS),
                    help="proposals at once (default: what simtlab tune uses on the H200 host)")
    ap.add_argument("--md", type=Path, help="write the table as markdown here")
    ap.add_argument("--json", type=Path, help="write the scores here (benchmarks/strategy_summary.py reads several)")
    ap.add_argument("--no-kernel-tuner", action="store_true")
    ap.add_argument("--only", default=",".join(OURS), help="which of ours to run (comma-separated)")
    ap.add_argument("--model-option", action="append", default=[], metavar="KEY=VALUE",
                    help="a CostModel option for a replay of another setting (explore, local, design, members, kappa)")
    args = ap.parse_args()
    table = load_table(args.table)
    options = {k: _value(v) for k, v in (o.split("=", 1) for o in args.model_option)}
    rows, seconds = [], {}
    for name in args.only.split(","):
        t0 = time.monotonic()
        rows += score(table, [name], FRACTIONS, args.seeds, args.batch, model=options)
        seconds[name] = time.monotonic() - t0
        print(f"{name}: {seconds[name]:.0f} s", flush=True)
    if not args.no_kernel_tuner:
        for name in KERNEL_TUNER:
            t0 = time.monotonic()
            try:
                rows += kernel_tuner_scores(table, [name], args.seeds)
            except Exception as exc:  # one peer strategy failing does not hide the others
                print(f"kernel_tuner:{name} failed: {type(exc).__name__}: {exc}")
                continue
            seconds[f"kernel_tuner:{name}"] = time.monotonic() - t0
            print(f"kernel_tuner:{name}: {seconds[f'kernel_tuner:{name}']:.0f} s", flush=True)
    text = markdown(table, rows, seconds)
    print(text)
    if args.json:
        args.json.write_text(json.dumps({"table": args.table.stem, "size": len(table.times), "meta": table.meta,
                                         "rows": [dataclasses.asdict(r) for r in rows]}))
    if args.md:
        args.md.write_text(text)


if __name__ == "__main__":
    main()
