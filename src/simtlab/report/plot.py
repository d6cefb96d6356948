"""Bar chart of a ladder: one group of bars per kernel (references first), one bar per problem."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")  # files only; no display needed
import matplotlib.pyplot as plt  # noqa: E402


def _value(r, metric: str) -> float:
    if not r.median_ms or r.status not in ("ok", "reference"):
        return 0.0
    return r.gflops / 1e3 if metric == "tflops" else r.gbs


def ladder_chart(rows: Sequence, metric: str, path, title: str = ""):
    """Each rung's rate beside its references, a bar a problem, on a logarithmic axis: a ladder
    spans two or three orders of magnitude (a naive rung at 1% of the library), which a linear
    axis flattens into invisible bars beside the top ones, while on a log axis every rung's step
    is the same-sized climb for the same factor. The family's reference (the first, in shaded
    columns) is also drawn across the chart as a dashed line per problem, so each bar reads as its
    share of it."""
    values: dict[str, dict[str, float]] = defaultdict(dict)  # kernel -> problem -> value
    for r in rows:
        values[r.name][r.problem] = _value(r, metric)
    problems = list(dict.fromkeys(r.problem for r in rows))
    refs = list(dict.fromkeys(r.name for r in rows if r.is_reference))
    rungs = list(dict.fromkeys(r.name for r in rows if not r.is_reference))
    kernels = refs + rungs
    unit = "TFLOP/s" if metric == "tflops" else "GB/s"

    fig, ax = plt.subplots(figsize=(min(18, 3 + 1.2 * len(kernels)), 5.5), layout="constrained")
    width = 0.85 / max(1, len(problems))
    colors = plt.get_cmap("tab10")
    shown = [v for k in kernels for v in values[k].values() if v > 0]
    for i, prob in enumerate(problems):
        xs = [j + (i - (len(problems) - 1) / 2) * width for j in range(len(kernels))]
        heights = [values[k].get(prob, 0.0) for k in kernels]
        ax.bar([x for x, h in zip(xs, heights) if h > 0], [h for h in heights if h > 0], width, label=prob,
               color=colors(i % 10))
        ref = values[refs[0]].get(prob, 0.0) if refs else 0.0
        if ref > 0:
            ax.axhline(ref, color=colors(i % 10), linestyle="--", linewidth=0.9, alpha=0.8)
    for j in range(len(refs)):  # shade the reference groups
        ax.axvspan(j - 0.5, j + 0.5, color="0.92", zorder=-1)
    if shown:
        ax.set_yscale("log")
        ax.set_ylim(min(shown) / 2, max(shown) * 2)
    ax.set_xticks(range(len(kernels)))
    ax.set_xticklabels([k.split("/")[-1] for k in kernels], rotation=30, ha="right")
    ax.set_xlim(-0.6, len(kernels) - 0.4)
    ax.set_ylabel(f"{unit} (log scale)")
    note = f"  (shaded: references; dashed: {refs[0].split('/')[-1]} per problem)" if refs else ""
    ax.set_title(title + note, fontsize=10)
    ax.legend(title="problem", fontsize=8, ncol=2 if len(problems) > 4 else 1)
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.savefig(path, dpi=110, format="png", bbox_inches="tight")  # a path or a binary file object
    plt.close(fig)
    return Path(path) if isinstance(path, (str, Path)) else path
