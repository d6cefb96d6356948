"""The access analyzer's predictions against Nsight Compute's counters on the H200 (issue: every
prediction within 10%). Reads the raw captures of benchmarks/ncu_capture.sh - a folder or the
ncu.tar.gz a device run returns - so it runs anywhere:

    python benchmarks/access_vs_ncu.py benchmarks/results/<run>/ncu [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
import tempfile
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from simtlab.analyze.validate import evaluate

LIMIT = 0.10


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("capture", help="folder of ncu CSVs, or the ncu.tar.gz of a device run")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args()
    src = Path(args.capture)
    with tempfile.TemporaryDirectory() as tmp:
        if src.is_file():
            with tarfile.open(src) as tar:
                tar.extractall(tmp, filter="data")
            src = Path(tmp)
        rows = evaluate(src)
    t = Table(title="access analyzer vs Nsight Compute (H200)", title_justify="left", header_style="bold")
    for col in ("check", "quantity", "predicted", "measured", "difference", "note"):
        t.add_column(col, justify="right" if col in ("predicted", "measured", "difference") else "left")
    for r in rows:
        ok = r["difference"] is not None and r["difference"] <= LIMIT
        diff = "-" if r["difference"] is None else f"[{'green' if ok else 'red'}]{100 * r['difference']:.1f}%[/]"
        t.add_row(escape(r["check"]), r["quantity"], f"{r['predicted']:.3f}",
                  "-" if r["measured"] is None else f"{r['measured']:.3f}", diff, escape(r["note"]))
    Console(width=200).print(t)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    bad = [r for r in rows if r["difference"] is None or r["difference"] > LIMIT]
    print(f"{len(rows) - len(bad)} of {len(rows)} predictions within {100 * LIMIT:.0f}% of the counters")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
