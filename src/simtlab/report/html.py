"""A self-contained HTML report of stored results: the device and its measured
ceilings, every ladder's tables (latest full run per family), bar charts, the
roofline, and each rung's lesson and likely limiter. Images are embedded as
data URIs, styles inline: one file to mail or attach to a CI run."""

from __future__ import annotations

import base64
import html
import io
import json
import time
from pathlib import Path
from typing import Callable

from ..catalog import FAMILIES, family
from ..ladder import Row
from ..tools.clock_log import sustained

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}
h1{margin-bottom:0}h2{border-bottom:2px solid #ccc;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:13px}
td,th{border:1px solid #ddd;padding:3px 7px;text-align:right}th{background:#f3f3f3}
td.l,th.l{text-align:left}tr.ref td{background:#f6f9ff}.bad{color:#b00;font-weight:bold}
.meta{color:#555;font-size:13px}img{max-width:100%;border:1px solid #eee;margin:.5em 0}
dl.rungs dt{font-weight:bold;margin-top:.8em}dl.rungs dd{margin-left:1.2em}
"""


def _png(fig_writer) -> str:
    buf = io.BytesIO()
    fig_writer(buf)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _esc(x) -> str:
    return html.escape("" if x is None else str(x))


def _fmt(v, spec: str) -> str:
    return "" if v is None else format(v, spec)


def _latest_ladder_runs(store) -> dict[str, int]:
    return store.latest_ladder_runs()


def _lesson(fam: str, rung_id: str) -> str:
    """The rung's lesson; a stored row of a rung since removed from the catalog keeps its numbers."""
    try:
        return family(fam).rung(rung_id).lesson
    except KeyError:
        return "(a rung no longer in the catalog: see the results index)"


def _rows(store, run_id: int, fam: str) -> list[Row]:
    rows = []
    for r in store.results(run_id=run_id, family=fam):
        extra = json.loads(r["extra"]) if r.get("extra") else {}
        rows.append(Row(r["family"], r["problem"], r["rung"], r["stage"], r["status"],
                        lesson=_lesson(fam, r["rung"]) if r["stage"] else "",
                        params=json.loads(r["params"]) if r.get("params") else {}, median_ms=r["median_ms"],
                        spread=r["spread"], reps=r["reps"], gflops=r["gflops"], gbs=r["gbs"],
                        pct_of_reference=r["pct_of_reference"], rel_error=r["rel_error"], tolerance=r["tolerance"],
                        registers=r["registers"], shared_bytes=r["shared_bytes"], spill_bytes=r["spill_bytes"],
                        occupancy=r["occupancy"], limiter=extra.get("limiter"), error=r["error"],
                        sm_mhz=extra.get("sm_mhz"), watts=extra.get("watts_instant")))
    return rows


def _if_sustained(value: Callable) -> Callable:
    """A row's clock or power, shown only where its timing kept the GPU busy long enough to be the
    kernel's: NVML's samples during a short burst mostly land between repetitions, at the idle boost
    clock and power (a 0.19 ms tensor-core GEMM read "1980 MHz" while its own clock stamps and
    Nsight Compute put it at 1.57-1.63 GHz)."""
    return lambda r: value(r) if sustained(r.reps, r.median_ms) else None


def clock_columns(rows) -> list[tuple[str, Callable, str]]:
    """The (header, value of a row, format) of the clock and power columns that any row has a value
    for: runs made before they were sampled, or where NVML was missing, leave them out."""
    cols = (("MHz", _if_sustained(lambda r: r.sm_mhz), ".0f"), ("W", _if_sustained(lambda r: r.watts), ".0f"))
    return [c for c in cols if any(c[1](r) is not None for r in rows)]


def ladder_cells(rows: list[Row], metric: str) -> tuple[list[str], list[tuple[list[str], bool, bool]]]:
    """Header and, per row, its cells, whether it is a reference and whether it is good: shared by the
    HTML report and the generated docs."""
    unit = "TFLOP/s" if metric == "tflops" else "GB/s"
    ref = next((r.name for r in rows if r.is_reference and r.median_ms), "reference")
    clocks = clock_columns(rows)
    head = ["rung", unit, f"% of {ref}", "ms", "±%", *(c[0] for c in clocks), "regs", "smem B", "occ %", "rel err",
            "status", "lesson / error"]
    out = []
    for r in rows:
        value = (r.gflops / 1e3 if metric == "tflops" else r.gbs) if r.median_ms else None
        good = r.status in ("ok", "reference")
        out.append(([r.name.split("/")[-1], _fmt(value, ".2f" if metric == "tflops" else ".0f"),
                     _fmt(r.pct_of_reference, ".1f"), _fmt(r.median_ms, ".3f"),
                     _fmt(r.spread * 100 if r.spread is not None else None, ".1f"),
                     *(_fmt(value(r), spec) for _, value, spec in clocks), _fmt(r.registers, "d"),
                     _fmt(r.shared_bytes, "d"), _fmt(r.occupancy * 100 if r.occupancy is not None else None, ".0f"),
                     _fmt(r.rel_error, ".1e"), r.status, r.lesson if good else (r.error or "")],
                    r.is_reference, good))
    return head, out


_LEFT = {"rung", "status", "lesson / error"}


def _table(rows: list[Row], metric: str) -> str:
    head, body = ladder_cells(rows, metric)
    out = ["<table><tr>" + "".join(f'<th class="{"l" if h in _LEFT else ""}">{_esc(h)}</th>' for h in head) + "</tr>"]
    for cells, is_ref, good in body:
        out.append(f'<tr class="{"ref" if is_ref else ""}">' + "".join(
            f'<td class="{("l" if h in _LEFT else "") + ("" if good or h != "status" else " bad")}">{_esc(v)}</td>'
            for h, v in zip(head, cells)) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _explanations(fam_name: str, rows: list[Row]) -> str:
    from ..analyze.explain import COPY, copy_share, header_comment, limiter

    fam = family(fam_name)
    op = fam.op()
    items = []
    copy = {r.problem: r.gbs for r in rows if r.name == COPY and r.gbs}  # (the device copy's, where timed)
    for rung in fam.rungs:
        mine = [r for r in rows if r.name == rung.id and r.status == "ok"]
        best = max(mine, key=lambda r: r.gflops or r.gbs or 0, default=None)
        text = f"<dt>{_esc(rung.id)}: {_esc(rung.lesson)}</dt><dd>{_esc(header_comment(rung))}"
        if best is not None:
            problem = op.parse_size(best.problem.split()[0])
            facts = {"occupancy": best.occupancy or 0.0, "limiter": best.limiter or "",
                     "flop_per_requested_byte": (problem.flops / rung.requested_bytes(best.params, problem)
                                                 if problem.flops else 0.0)}
            share = copy_share({best.problem: {"gbs": best.gbs}}, copy)
            text += f"<br><b>likely limiter:</b> {_esc(limiter(fam, facts, best.pct_of_reference, share))}"
        items.append(text + "</dd>")
    return '<dl class="rungs">' + "\n".join(items) + "</dl>"


def build_report(store, runs: dict[str, int] | None = None, title: str = "simtlab report") -> str:
    from .. import __version__
    from ..analyze.roofline import ceilings_from_store, points_from_rows, roofline_chart
    from .plot import ladder_chart

    runs = runs or _latest_ladder_runs(store)
    if not runs:
        raise LookupError("the store holds no ladder runs: run `simtlab ladder FAMILY` first")
    run_info = {r["id"]: r for r in store.runs(10_000)}
    devices = {run_info[r]["device"] for r in runs.values() if r in run_info}
    device = sorted(d for d in devices if d)[0] if any(devices) else None
    parts = [f"<h1>{_esc(title)}</h1>",
             f'<p class="meta">simtlab {__version__}, generated {time.strftime("%Y-%m-%d %H:%M:%S %Z")} from '
             f"{_esc(store.path.name)}</p>"]
    some_run = run_info.get(next(iter(runs.values())))
    if some_run and some_run.get("device_json"):
        d = json.loads(some_run["device_json"])
        parts.append("<h2>Device</h2><table>" + "".join(
            f'<tr><th class="l">{_esc(k)}</th><td class="l">{_esc(v)}</td></tr>' for k, v in d.items()) + "</table>")
    if device:
        try:
            c = ceilings_from_store(store, device)
            parts.append(
                f"<p><b>Measured ceilings:</b> {c.bandwidth_gbs:.0f} GB/s (device copy), "
                f"{c.compute_gflops / 1e3:.2f} TFLOP/s (library GEMM); datasheet "
                f"{_fmt(c.datasheet_bandwidth_gbs, '.0f')} GB/s, "
                f"{_fmt((c.datasheet_compute_gflops or 0) / 1e3, '.1f')} TFLOP/s fp32. Ridge {c.ridge:.1f} FLOP/B.</p>")
            rows = [r for r in store.results() if r["run_id"] in set(runs.values())]
            pts = points_from_rows(rows, c)
            if pts:
                img = _png(lambda buf: roofline_chart(pts, c, buf, title=f"roofline, {device}"))
                parts.append(f'<h2>Roofline</h2><img alt="roofline" src="{img}">')
        except LookupError as exc:
            parts.append(f'<p class="meta">no roofline: {_esc(exc)}</p>')
    for fam_name in [f for f in FAMILIES if f in runs]:
        fam = family(fam_name)
        run_id = runs[fam_name]
        rows = _rows(store, run_id, fam_name)
        info = run_info.get(run_id, {})
        parts.append(f'<h2 id="{_esc(fam_name)}">{_esc(fam.name)}: {_esc(fam.title)}</h2>')
        parts.append(f'<p class="meta">run {run_id}, {_esc(info.get("started"))}, commit '
                     f'{_esc(info.get("git_commit"))}, <code>{_esc(info.get("command"))}</code></p>')
        for prob in dict.fromkeys(r.problem for r in rows):
            parts.append(f"<h3>{_esc(prob)}</h3>" + _table([r for r in rows if r.problem == prob], fam.metric))
        img = _png(lambda buf: ladder_chart(rows, fam.metric, buf, title=f"{fam.name} ladder"))
        parts.append(f'<img alt="{_esc(fam_name)} ladder chart" src="{img}">')
        parts.append("<h3>Rungs</h3>" + _explanations(fam_name, rows))
    body = "\n".join(parts)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_esc(title)}</title>'
            f"<style>{_CSS}</style></head><body>{body}</body></html>")


def write_report(store, path: str | Path, runs: dict[str, int] | None = None) -> Path:
    out = Path(path)
    out.write_text(build_report(store, runs))
    return out
