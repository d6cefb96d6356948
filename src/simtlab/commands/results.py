"""Commands over the results store: queries, merges, charts, reports, pages and comparisons."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import List, Optional

import typer

from ..catalog import family as get_family
from . import app, console, err, _fail, _existing_store, _family, _known_device, _known_runs, _output_file, _output_folder


@app.command()
def results(run: Optional[int] = typer.Option(None, help="only this run id"),
            family: Optional[str] = typer.Option(None, help="only this family"),
            status: Optional[str] = typer.Option(None, help="only rows with this status"),
            limit: Optional[int] = typer.Option(None, min=1, help="at most this many rows"),
            runs: bool = typer.Option(False, "--runs", help="list runs instead of results"),
            db: Optional[Path] = typer.Option(None, help="results database"),
            as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
            export: Optional[str] = typer.Option(None, help="write the rows as csv or json (to --output or stdout), "
                                                            "or the store's runs and results as jsonl text (-o)"),
            output: Optional[Path] = typer.Option(None, "-o", "--output", help="file for --export")):
    """Query the results store."""
    from ..store import rows_as_json

    if family is not None:
        _family(family)  # (a family that does not exist is named, not an empty table)
    store = _existing_store(db)
    if export not in (None, "csv", "json", "jsonl"):
        _fail(f"--export takes csv, json or jsonl, not {export!r}")
    if export == "jsonl":  # the store itself as text (its runs and their results), for committing
        if output is None:
            _fail("--export jsonl writes a file: give it with -o FILE.jsonl")
        n = store.write_text(output, None if run is None else [run])
        err.print(f"{n} results -> {output}")
        return
    if run is not None:
        _known_runs(store, [run])
    rows = store.runs(limit or 20) if runs else store.results(run, family, status, limit)
    if export:
        import csv
        import io

        if export == "json":
            text = rows_as_json(rows)
        else:
            buf = io.StringIO()
            writer = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else ["id"])
            writer.writeheader()
            writer.writerows(rows)
            text = buf.getvalue()
        if output:
            output.write_text(text)
            err.print(f"{len(rows)} rows -> {output}")
        else:
            sys.stdout.write(text)
        return
    if as_json:
        print(rows_as_json(rows))
        return
    if runs:
        from rich.table import Table

        t = Table(header_style="bold")
        for col in ("id", "started", "device", "cc", "commit", "command"):
            t.add_column(col)
        for r in rows:
            t.add_row(str(r["id"]), r["started"], r["device"] or "", r["compute_capability"] or "",
                      r["git_commit"] or "", r["command"] or "")
        total = store.count_runs()
        if total > len(rows):
            t.caption = f"the {len(rows)} most recent of {total} runs (--limit N for more)"
        console.print(t)
        return
    from ..report.table import results_table

    console.print(results_table(rows))


@app.command()
def merge(sources: List[Path] = typer.Argument(..., help="results databases to copy from"),
          db: Optional[Path] = typer.Option(None, help="results database to copy into (created if missing)")):
    """Copy the runs of other results databases (other machines, sessions) into one."""
    from ..store import Store, StoreError

    missing = [str(p) for p in sources if not p.is_file()]
    if missing:
        _fail(f"no results database at {', '.join(missing)}")
    store = Store(db)
    for src in sources:
        skipped: list[str] = []
        try:
            n = store.merge_from(src, skipped)
        except Exception as exc:  # say which file is the problem (the one merged into, or from); keep what was merged
            if isinstance(exc, StoreError) and exc.path == store.path:
                _fail(f"cannot merge {src} into {store.path}: {exc}")
            _fail(f"cannot merge {src}: {exc}")
        console.print(f"{src}: {n} run(s) merged into {store.path}" +
                      (f"; {len(skipped)} skipped, already there:" if skipped else ""))
        for line in skipped:
            console.print(f"  {line}")


@app.command()
def plot(rows_json: Path = typer.Argument(..., help="rows written by `simtlab ladder --json-out`"),
         output: Path = typer.Option(..., "-o", "--output", help="PNG to write"),
         title: str = typer.Option("", help="chart title")):
    """Redraw a ladder's bar chart from its saved rows (no GPU needed)."""
    from ..ladder import Row
    from ..report.plot import ladder_chart

    try:
        rows = [Row(**d) for d in json.loads(rows_json.read_text())]
    except (OSError, ValueError, TypeError) as exc:
        _fail(f"cannot read ladder rows from {rows_json}: {exc}")
    if not rows:
        _fail(f"{rows_json} holds no rows")
    fam = get_family(rows[0].family)
    ladder_chart(rows, fam.metric, output, title=title or f"{fam.name} ladder")
    console.print(f"chart: {output}")


@app.command()
def roofline(output: Path = typer.Option(..., "-o", "--output", help="PNG to write"),
             run: Optional[List[int]] = typer.Option(None, help="only these run ids (default: all runs of the device)"),
             device_name: Optional[str] = typer.Option(None, "--device", help="device name as stored (default: the latest run's)"),
             db: Optional[Path] = typer.Option(None, help="results database"),
             as_json: bool = typer.Option(False, "--json", help="print the points as JSON too")):
    """Roofline of stored results against the device's measured ceilings (no GPU needed)."""
    from ..analyze.roofline import ceilings_from_store, points_from_rows, roofline_chart
    _output_file(output, (".png",), "the roofline")
    store = _existing_store(db, "simtlab ladder elementwise` and `simtlab ladder gemm")
    _known_runs(store, run)
    _known_device(store, device_name)
    path = store.path
    runs = store.runs(1000)
    name = device_name or next((r["device"] for r in runs if r["device"]), None)
    if not name:
        _fail(f"{path} holds no runs with a device")
    try:
        ceilings = ceilings_from_store(store, name)
    except LookupError as exc:
        _fail(str(exc))
    wanted = set(run) if run else {r["id"] for r in runs if r["device"] == name}
    rows = [r for r in store.results() if r["run_id"] in wanted]
    points = points_from_rows(rows, ceilings)
    if not points:
        among = f"runs {', '.join(map(str, sorted(wanted)))}" if run else f"the runs of {name}"
        _fail(f"no fp32 results with rates among {among} to place on the roofline")
    roofline_chart(points, ceilings, output, title=f"roofline, {name} (ridge {ceilings.ridge:.1f} FLOP/B)")
    if as_json:
        print(json.dumps({"ceilings": ceilings.as_dict(),
                          "points": [{**p.__dict__, "pct_of_roof": p.pct_of_roof} for p in points]}, indent=2))
    console.print(f"roofline: {output} ({len(points)} points; {ceilings.source})")


@app.command()
def report(output: Path = typer.Option(..., "-o", "--output", help="HTML file to write"),
           run: Optional[List[int]] = typer.Option(None, help="ladder run ids to show (default: the latest per family)"),
           db: Optional[Path] = typer.Option(None, help="results database")):
    """One self-contained HTML file: device, ceilings, ladder tables and charts, roofline, explanations."""
    from ..report.html import write_report

    _output_file(output, (".html", ".htm"), "the report")  # (said before the work, not after it)
    store = _existing_store(db)
    _known_runs(store, run)
    path = store.path
    runs = None
    if run:
        runs = {}
        for rid in run:
            fams = {r["family"] for r in store.results(run_id=rid)}
            if not fams:
                _fail(f"run {rid} has no results in {path}")
            for fam in fams:
                runs[fam] = rid
    try:
        write_report(store, output, runs)
    except LookupError as exc:
        _fail(str(exc))
    console.print(f"report: {output} ({output.stat().st_size // 1024} KiB)")


@app.command()
def docs(output: Path = typer.Option(..., "-o", "--output", help="folder for the pages (this repository's are docs/)"),
         db: Optional[Path] = typer.Option(None, help="results database")):
    """One Markdown page per family (lessons, tables, charts) generated from the store."""
    from ..report.docs import write_docs

    store = _existing_store(db)
    pages = write_docs(store, _output_folder(output))
    console.print(f"{len(pages)} pages in {output}")


@app.command()
def compare(base: str = typer.Argument(..., help="baseline: a run id in the store, or an exported .json/.csv"),
            new: str = typer.Argument(..., help="candidate: a run id or an exported file"),
            db: Optional[Path] = typer.Option(None, help="results database for run ids"),
            floor: float = typer.Option(0.02, help="smallest slowdown that can count (fraction)"),
            as_json: bool = typer.Option(False, "--json", help="machine-readable output")):
    """Per kernel and size: the change from BASE to NEW against a noise-aware threshold.
    Exits 1 when anything regressed (slower beyond the noise, or no longer verified)."""
    from ..report.compare import compare_rows, load_rows

    if not (math.isfinite(floor) and 0 <= floor < 10):  # (NaN or infinity would let every slowdown pass)
        _fail(f"--floor {floor}: give the smallest slowdown that counts as a fraction, 0 to 10 (0.02 = 2%)")
    try:
        changes = compare_rows(load_rows(base, db), load_rows(new, db), floor=floor)
    except (FileNotFoundError, LookupError, ValueError, KeyError) as exc:
        _fail(str(exc))
    if as_json:
        print(json.dumps([{**c.__dict__} for c in changes], indent=2))
    else:
        from rich.table import Table

        t = Table(header_style="bold", title=f"{base} -> {new}", title_justify="left")
        for col in ("family", "kernel", "problem", "base ms", "new ms", "change", "threshold", "verdict"):
            t.add_column(col, justify="right" if "ms" in col or col in ("change", "threshold") else "left")
        style = {"regression": "bold red", "faster": "green", "fixed": "green", "missing": "yellow"}
        for c in changes:
            t.add_row(c.family, c.kernel, c.problem, f"{c.base_ms:.4f}" if c.base_ms else "",
                      f"{c.new_ms:.4f}" if c.new_ms else "", f"{(c.ratio - 1) * 100:+.1f}%" if c.ratio else "",
                      f"±{c.threshold * 100:.1f}%" if c.threshold else "",
                      f"[{style[c.verdict]}]{c.verdict}[/]" if c.verdict in style else c.verdict)
        console.print(t)
    regressions = [c for c in changes if c.is_regression]
    if regressions:
        err.print(f"{len(regressions)} regression(s)", soft_wrap=True)
        raise typer.Exit(1)
