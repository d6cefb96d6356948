"""Regenerate the sample outputs in README.md from the commands that print them (CPU, no GPU).

A sample is a fenced block between `<!-- sample: COMMAND -->` and `<!-- /sample -->`; its text is
the command's output with the pinned NVRTC, 100 columns wide, trailing spaces dropped.

    python benchmarks/readme_samples.py            # rewrite README.md's samples
    python benchmarks/readme_samples.py --check    # exit 1 where a sample differs from its command
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
SAMPLE = re.compile(r"(<!-- sample: (?P<cmd>[^>]+?) -->\n```\n)(?P<body>.*?)(```\n<!-- /sample -->)", re.DOTALL)
COLUMNS = "100"


def run(command: str) -> str:
    """The command's output as the README shows it (a `simtlab` command runs from this Python)."""
    args = shlex.split(command)
    if args[0] == "simtlab":
        args = [sys.executable, "-c", "import sys; from simtlab.cli import main; sys.exit(main())", *args[1:]]
    out = subprocess.run(args, capture_output=True, text=True, env={**os.environ, "COLUMNS": COLUMNS}, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"{command!r} failed ({out.returncode}): {out.stderr.strip()[:400]}")
    return "".join(line.rstrip() + "\n" for line in out.stdout.splitlines())


def samples(text: str) -> list[tuple[str, str]]:
    """(command, the text the README shows) for each sample block."""
    return [(m.group("cmd"), m.group("body")) for m in SAMPLE.finditer(text)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare only; exit 1 where a sample is stale")
    args = ap.parse_args()
    text = README.read_text()
    stale = []

    def refresh(m: re.Match) -> str:
        body = run(m.group("cmd"))
        if body != m.group("body"):
            stale.append(m.group("cmd"))
        return m.group(1) + body + m.group(4)

    new = SAMPLE.sub(refresh, text)
    if args.check:
        if stale:
            raise SystemExit(f"stale README samples: {stale} (run benchmarks/readme_samples.py)")
        print("README samples are current")
        return
    README.write_text(new)
    print(f"{len(samples(new))} samples written, {len(stale)} changed")


if __name__ == "__main__":
    main()
