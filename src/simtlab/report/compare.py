"""Regression check between two sets of results (run ids or exported files).

Rows are matched by (family, kernel, problem). A kernel regressed when its
median time grew by more than the noise allows: the threshold is
max(floor, k * sqrt(spread_base^2 + spread_new^2)), with the spreads the
relative inter-quintile ranges each timing recorded. A kernel that was
verified before and now fails (wrong, compile or launch error) is a
regression whatever its speed.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Change", "compare_rows", "load_rows", "FLOOR", "K_SPREAD"]

FLOOR = 0.02  # 2%: below this, run-to-run drift of clocks and placement dominates
K_SPREAD = 3.0
_GOOD = ("ok", "reference")


@dataclass(frozen=True)
class Change:
    family: str
    kernel: str
    problem: str
    base_ms: float | None
    new_ms: float | None
    ratio: float | None  # new / base time
    threshold: float | None
    verdict: str  # faster | slower | same | regression | fixed | new | missing

    @property
    def is_regression(self) -> bool:
        return self.verdict == "regression"


def _float(v):
    return None if v in (None, "") else float(v)


def load_rows(source: str, db: Path | None = None) -> list[dict]:
    """Rows of a run id in the store, or of a file written by `simtlab results --export`."""
    if str(source).isdigit():
        from ..store import Store, default_path

        path = db or default_path()
        if not Path(path).exists():
            raise FileNotFoundError(f"no results database at {path}")
        rows = Store(path, readonly=True).results(run_id=int(source))
        if not rows:
            raise LookupError(f"run {source} has no results in {path}")
        return rows
    p = Path(source)
    if not p.exists():
        raise FileNotFoundError(f"{source} is neither a run id nor a file")
    try:
        if p.suffix == ".csv":
            with p.open(newline="") as f:
                return list(csv.DictReader(f))
        data = json.loads(p.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError, csv.Error, OSError) as exc:
        raise ValueError(f"{source} is not rows exported by `simtlab results --export json|csv` ({exc})") from None
    if not isinstance(data, list):
        raise ValueError(f"{source}: expected a JSON list of result rows")
    return data


def _key(r: dict) -> tuple[str, str, str]:
    return (r["family"], r.get("rung") or r.get("name"), r["problem"])


def compare_rows(base: list[dict], new: list[dict], floor: float = FLOOR, k: float = K_SPREAD) -> list[Change]:
    # Several rows per kernel and problem (a sweep): keep the best verified one of each side.
    def index(rows):
        out: dict = {}
        for r in rows:
            key = _key(r)
            ms = _float(r.get("median_ms"))
            good = r.get("status") in _GOOD and ms is not None
            cur = out.get(key)
            if cur is None or (good and (not cur[0] or ms < cur[1])):
                out[key] = (good, ms, _float(r.get("spread")) or 0.0, r.get("status"))
        return out

    b, n = index(base), index(new)
    changes = []
    for key in list(b) + [k_ for k_ in n if k_ not in b]:
        fam, kernel, problem = key
        if key not in n:
            changes.append(Change(fam, kernel, problem, b[key][1], None, None, None, "missing"))
            continue
        if key not in b:
            changes.append(Change(fam, kernel, problem, None, n[key][1], None, None, "new"))
            continue
        (bg, bms, bs, _), (ng, nms, ns, _) = b[key], n[key]
        if bg and not ng:
            changes.append(Change(fam, kernel, problem, bms, None, None, None, "regression"))
            continue
        if not bg:
            changes.append(Change(fam, kernel, problem, None, nms, None, None, "fixed" if ng else "same"))
            continue
        ratio = nms / bms
        threshold = max(floor, k * math.hypot(bs, ns))
        verdict = "regression" if ratio > 1 + threshold else ("faster" if ratio < 1 - threshold else "same")
        changes.append(Change(fam, kernel, problem, bms, nms, ratio, threshold, verdict))
    return changes
