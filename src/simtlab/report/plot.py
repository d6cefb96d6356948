"""Bar chart of a ladder: one bar per rung per problem, references as lines."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")  # files only; no display needed
import matplotlib.pyplot as plt  # noqa: E402


def ladder_chart(rows: Sequence, metric: str, path: str | Path, title: str = "") -> Path:
    by_problem: dict[str, list] = defaultdict(list)
    for r in rows:
        by_problem[r.problem].append(r)
    problems = list(by_problem)
    rung_names = [r.name for r in rows if not r.is_reference]
    rung_names = list(dict.fromkeys(rung_names))
    unit = "TFLOP/s" if metric == "tflops" else "GB/s"

    def value(r):
        if not r.median_ms or r.status not in ("ok", "reference"):
            return 0.0
        return r.gflops / 1e3 if metric == "tflops" else r.gbs

    fig, ax = plt.subplots(figsize=(max(8, 1.1 * len(rung_names) * max(1, len(problems)) ** 0.5 + 4), 5))
    width = 0.8 / max(1, len(problems))
    colors = plt.get_cmap("tab10")
    for i, prob in enumerate(problems):
        vals = {r.name: value(r) for r in by_problem[prob]}
        xs = [j + i * width for j in range(len(rung_names))]
        ax.bar(xs, [vals.get(n, 0.0) for n in rung_names], width, label=prob, color=colors(i))
        for ref in (r for r in by_problem[prob] if r.is_reference and value(r) > 0):
            style = "--" if ref is next(r for r in by_problem[prob] if r.is_reference) else ":"
            ax.axhline(value(ref), color=colors(i), linestyle=style, linewidth=1)
            ax.annotate(f"{ref.name} {prob}", (len(rung_names) - 0.5, value(ref)), fontsize=7, ha="right",
                        va="bottom", color=colors(i))
    ax.set_xticks([j + width * (len(problems) - 1) / 2 for j in range(len(rung_names))])
    ax.set_xticklabels([n.split("/")[-1] for n in rung_names], rotation=30, ha="right")
    ax.set_ylabel(unit)
    ax.set_title(title)
    ax.legend(title="problem", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
