"""Rich tables for ladder rows, static reports and stored results."""

from __future__ import annotations

from typing import Iterable, Sequence

from rich.table import Table

from ..analyze.sass import loop_cycles

_STATUS_STYLE = {"ok": "green", "reference": "cyan", "wrong": "bold red", "compile-error": "red",
                 "launch-error": "red", "error": "red", "unsupported": "yellow"}


def _f(x, fmt: str) -> str:
    return "" if x is None else format(x, fmt)


def ladder_table(rows: Sequence, metric: str, reference: str | None, title: str = "") -> Table:
    """One table per problem: references first, then rungs in order."""
    from .html import clock_columns

    headline = "TFLOP/s" if metric == "tflops" else "GB/s"
    clocks = clock_columns(rows)
    t = Table(title=title, title_justify="left", header_style="bold")
    right = {"justify": "right"}
    for col, kw in (("rung", {}), (headline, right), (f"% of {reference or 'ref'}", right), ("ms", right),
                    ("±%", right), *((c[0], right) for c in clocks), ("regs", right), ("smem B", right),
                    ("occ", right), ("rel err", right), ("status", {}),
                    ("lesson", {"overflow": "fold", "max_width": 60})):
        t.add_column(col, **kw)
    for r in rows:
        value = (r.gflops / 1e3 if metric == "tflops" else r.gbs) if r.median_ms else None
        style = _STATUS_STYLE.get(r.status, "")
        note = r.lesson if r.status in ("ok", "reference") else (r.error or "")
        t.add_row(
            r.name.split("/")[-1],
            _f(value, ".2f" if metric == "tflops" else ".0f"),
            _f(r.pct_of_reference, ".1f"),
            _f(r.median_ms, ".3f"),
            _f(r.spread * 100 if r.spread is not None else None, ".1f"),
            *(_f(value(r), spec) for _, value, spec in clocks),
            _f(r.registers, "d"),
            _f(r.shared_bytes, "d"),
            _f(r.occupancy * 100 if r.occupancy is not None else None, ".0f"),
            _f(r.rel_error, ".1e"),
            f"[{style}]{r.status}[/]" if style else r.status,
            note,
        )
    return t


def _refusals(t: Table, entries: list[dict], columns: int) -> None:
    """Rungs that did not build: a short mark in the table and each whole reason under it (a
    reason cut to a column's width said nothing)."""
    reasons = []
    for e in entries:
        if e.get("error"):
            name = e["rung"].split("/")[-1]
            what = e.get("not_for", "GPU")  # (a problem the rung has no form for, or an architecture)
            mark = f"[yellow]not for this {what} (below)[/]" if e.get("unsupported") else "[red]failed (below)[/]"
            t.add_row(name, mark, *[""] * (columns - 2))
            reasons.append(f"{name}: {e['error'].splitlines()[0]}")
    if reasons:
        t.caption = "\n".join(reasons)
        t.caption_justify = "left"


def static_table(entries: Iterable[dict], arch: str) -> Table:
    t = Table(title=f"static report for {arch} (no GPU needed)", title_justify="left", header_style="bold")
    for col in ("rung", "path", "threads", "regs", "smem", "dyn smem", "spill B", "occ", "limited by"):
        t.add_column(col, justify="left" if col in ("rung", "path", "limited by") else "right")
    entries = list(entries)
    _refusals(t, entries, 9)
    for e in entries:
        name = e["rung"].split("/")[-1]
        if e.get("error"):
            continue
        spill = e["spill_bytes"]
        t.add_row(name, e["variant"], str(e["threads"]), str(e["registers"]), str(e["shared_static"]),
                  str(e["shared_dynamic"]), f"[red]{spill}[/]" if spill else "0",
                  f"{e['occupancy'] * 100:.0f}%", e["limiter"])
    return t


def dict_table(title: str, rows: Sequence[dict], left: Iterable[str] = ()) -> Table:
    """A benchmark script's rows (dicts of one shape) as they are: a column a key, the `left` ones
    left-justified."""
    left = set(left)
    t = Table(title=title)
    for key in rows[0]:
        t.add_column(key, justify="left" if key in left else "right")
    for row in rows:
        t.add_row(*(str(v) for v in row.values()))
    return t


def results_table(rows: Sequence[dict]) -> Table:
    t = Table(header_style="bold")
    for col in ("id", "run", "family", "rung", "problem", "ms", "GFLOP/s", "GB/s", "% ref", "rel err", "status"):
        t.add_column(col, justify="right" if col not in ("family", "rung", "problem", "status") else "left")
    for r in rows:
        t.add_row(str(r["id"]), str(r["run_id"]), r["family"], r["rung"], r["problem"], _f(r["median_ms"], ".3f"),
                  _f(r["gflops"], ".0f"), _f(r["gbs"], ".0f"), _f(r["pct_of_reference"], ".1f"),
                  _f(r["rel_error"], ".1e"), r["status"])
    return t


def sass_table(entries: Iterable[dict], arch: str) -> Table:
    t = Table(title=f"SASS report for {arch} (no GPU needed)", title_justify="left", header_style="bold")
    for col in ("rung", "path", "instr", "loop", "loop FMA%", "loop cycles", "global", "shared", "BAR", "LDL/STL",
                "lesson in SASS"):
        t.add_column(col, justify="left" if col in ("rung", "path", "global", "shared", "lesson in SASS") else "right")
    entries = list(entries)
    _refusals(t, entries, 11)
    for e in entries:
        name = e["rung"].split("/")[-1]
        if e.get("error"):
            continue
        mem = e["memory"]
        glob = " ".join(f"{k}x{v}" for k, v in sorted(mem.items()) if k.split(".")[0] in ("LDG", "STG", "LDGSTS"))
        shared = " ".join(f"{k}x{v}" for k, v in sorted(mem.items()) if k.split(".")[0] in ("LDS", "STS"))
        if e["variant"] == "predicated scalar":
            verdict = ""
        elif e["ok"]:
            verdict = "[green]" + (" ".join(e["expected"]) or "ok") + "[/]"
        else:
            verdict = "[red]missing " + " ".join(e["missing"]) + (" spills" if e["spill_instructions"] else "") + "[/]"
        t.add_row(name, e["variant"], str(e["instructions"]), str(e["loop_instructions"]),
                  f"{e['loop_fma_share'] * 100:.0f}", loop_cycles(e.get("loop_paths", [])), glob, shared,
                  str(e["barriers"]), str(e["spill_instructions"]), verdict)
    return t


def tune_table(outcome, metric: str = "tflops") -> Table:
    """The ten fastest configurations of a search (simtlab.tune.session.TuneOutcome), with the
    family's headline figure (TFLOP/s or GB/s) and, where the search profiled its builds, what each
    build says: registers, blocks an SM and the rounds of its work (tune.static)."""
    from ..space import Space

    p, flops = outcome.problem, metric == "tflops"
    profiles = outcome.profiles or {}
    same = sum(e.status == "same code" for e in outcome.result.evaluations)
    t = Table(header_style="bold", title=f"{outcome.rung.id} {p.label}: {outcome.valid} valid configurations, "
                                         f"{len(outcome.result.measured)} measured now, {outcome.history} from history"
                                         + (f", {same} compiled to code already measured" if same else ""),
              title_justify="left")
    built = ("regs", "blocks/SM", "rounds") if profiles else ()
    for col in ("ms", "TFLOP/s" if flops else "GB/s", *built, "configuration", "source"):
        t.add_column(col)
    ranked = outcome.ranked  # (sorted once)
    shipped = next((e for e in ranked if e.config == outcome.shipped), None) if outcome.shipped is not None else None
    if shipped is not None:  # what tuning gained over the shipped parameters
        best = ranked[0]
        t.caption = (f"the shipped configuration: {shipped.value:.4f} ms, " +
                     ("the fastest measured" if shipped is best else
                      f"{100 * (shipped.value / best.value - 1):.1f}% more than the fastest measured"))
        t.caption_justify = "left"
    for e in ranked[:10]:
        rate = p.flops / e.value / 1e9 if flops else p.bytes / e.value / 1e6
        prof = profiles.get(Space.key(e.config))
        facts = (str(prof.registers), str(prof.blocks_per_sm), f"{prof.rounds:.2f}") if prof else ("",) * len(built)
        t.add_row(f"{e.value:.4f}", f"{rate:.2f}", *facts, " ".join(f"{k}={v}" for k, v in e.config.items()), e.status)
    return t
