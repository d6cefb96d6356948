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
    values: dict[str, dict[str, float]] = defaultdict(dict)  # kernel -> problem -> value
    for r in rows:
        values[r.name][r.problem] = _value(r, metric)
    problems = list(dict.fromkeys(r.problem for r in rows))
    refs = list(dict.fromkeys(r.name for r in rows if r.is_reference))
    rungs = list(dict.fromkeys(r.name for r in rows if not r.is_reference))
    kernels = refs + rungs
    unit = "TFLOP/s" if metric == "tflops" else "GB/s"

    fig, ax = plt.subplots(figsize=(min(18, 3 + 1.2 * len(kernels)), 5.5))
    width = 0.85 / max(1, len(problems))
    colors = plt.get_cmap("tab10")
    for i, prob in enumerate(problems):
        xs = [j + (i - (len(problems) - 1) / 2) * width for j in range(len(kernels))]
        ax.bar(xs, [values[k].get(prob, 0.0) for k in kernels], width, label=prob, color=colors(i % 10),
               hatch=None)
    for j in range(len(refs)):  # shade the reference groups
        ax.axvspan(j - 0.5, j + 0.5, color="0.92", zorder=-1)
    ax.set_xticks(range(len(kernels)))
    ax.set_xticklabels([k.split("/")[-1] for k in kernels], rotation=30, ha="right")
    ax.set_xlim(-0.6, len(kernels) - 0.4)
    ax.set_ylabel(unit)
    ax.set_title(title + ("  (shaded: references, timed in the same run)" if refs else ""))
    ax.legend(title="problem", fontsize=8, ncol=2 if len(problems) > 4 else 1)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110, format="png")  # a path or a binary file object
    plt.close(fig)
    return Path(path) if isinstance(path, (str, Path)) else path
