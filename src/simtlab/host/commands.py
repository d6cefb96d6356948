"""`simtlab transfers` and `simtlab graphs`: the host-side experiments, printed and stored."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table


def _gpu_or_exit(console: Console) -> None:
    from ..device import NoGpuError, require_gpu

    try:
        require_gpu()
    except NoGpuError as exc:
        from ..device import NO_GPU_HINT

        Console(stderr=True).print(f"error: {exc}; {NO_GPU_HINT}")
        raise typer.Exit(2)


def _store(db: Optional[Path]):
    from ..device import current_sm_clock_mhz, device_info
    from ..store import Store

    store = Store(db) if db else Store()
    dev = device_info()
    run_id = store.start_run(" ".join(["simtlab"] + [shlex.quote(a) for a in sys.argv[1:]]), dev,
                             current_sm_clock_mhz())
    return store, run_id, dev


def register(app: typer.Typer, console: Console) -> None:
    @app.command()
    def transfers(mib: int = typer.Option(256, min=1, help="bytes moved each way, in MiB"),
                  chunks: int = typer.Option(8, min=1, help="pipeline chunks"),
                  streams: int = typer.Option(4, min=1, help="pipeline streams"),
                  iters: Optional[int] = typer.Option(None, min=1, help="FMAs per element in the kernel "
                                                      "(default: calibrated so compute takes as long as H2D)"),
                  db: Optional[Path] = typer.Option(None, help="results database (default: the user store)"),
                  as_json: bool = typer.Option(False, "--json", help="machine-readable output")):
        """Host<->device bandwidth, pageable vs pinned, and a copy/compute pipeline on several streams
        against the same work done serially."""
        from .transfers import copy_bandwidth, pipeline

        _gpu_or_exit(console)
        nbytes = mib << 20
        copies = copy_bandwidth(nbytes)
        pipe = pipeline(nbytes, chunks, streams, iters)
        store, run_id, dev = _store(db)
        label = f"{mib}MiB"
        for c in copies:
            store.add_result(run_id, family="transfers", rung=c.name, problem=label, median_ms=c.ms, gbs=c.gbs,
                             status="ok")
        for name, key in (("serial", "serial_ms"), (f"overlapped {chunks}x{streams}", "overlapped_ms")):
            store.add_result(run_id, family="transfers", rung=name, problem=label, median_ms=pipe[key],
                             gbs=2 * nbytes / (pipe[key] * 1e-3) / 1e9, status="ok", extra=pipe)
        if as_json:
            print(json.dumps({"copies": [c.as_dict() for c in copies], "pipeline": pipe}, indent=2))
            return
        t = Table(title=f"host<->device copies, {mib} MiB, on {dev.name}", title_justify="left", header_style="bold")
        for col in ("copy", "ms", "GB/s"):
            t.add_column(col, justify="right" if col != "copy" else "left")
        for c in copies:
            t.add_row(c.name, f"{c.ms:.2f}", f"{c.gbs:.1f}")
        console.print(t)
        p = Table(title=f"copy in, compute ({pipe['iters']} FMA/element), copy out: {chunks} chunks on {streams} "
                        f"streams vs one stream", title_justify="left", header_style="bold")
        for col in ("stage / schedule", "ms"):
            p.add_column(col)
        for name, key in (("H2D (pinned)", "h2d_ms"), ("kernel", "compute_ms"), ("D2H (pinned)", "d2h_ms"),
                          ("serial: one stream", "serial_ms"), ("overlapped", "overlapped_ms")):
            p.add_row(name, f"{pipe[key]:.2f}")
        console.print(p)
        console.print(f"overlap hid {pipe['hidden_ms']:.2f} ms = {100 * pipe['hidden_share']:.0f}% of the shorter of "
                      f"copy ({pipe['h2d_ms'] + pipe['d2h_ms']:.2f} ms) and compute ({pipe['compute_ms']:.2f} ms); "
                      f"speed-up {pipe['speedup']:.2f}x; outputs identical, rel. error vs float64 "
                      f"{pipe['rel_error']:.1e}")

    @app.command()
    def graphs(steps: int = typer.Option(1000, min=1, help="kernels in the chain"),
               n: int = typer.Option(1024, min=1, help="elements each kernel updates"),
               db: Optional[Path] = typer.Option(None, help="results database (default: the user store)"),
               as_json: bool = typer.Option(False, "--json", help="machine-readable output")):
        """Launch overhead: a chain of tiny kernels launched one by one, replayed as a CUDA graph, and
        fused into one kernel: time per step."""
        from .graphs import launch_overhead

        _gpu_or_exit(console)
        res = launch_overhead(steps, n)
        store, run_id, dev = _store(db)
        for name, us in res["us_per_step"].items():
            store.add_result(run_id, family="graphs", rung=name, problem=f"{steps}x{n}", median_ms=us * steps / 1e3,
                             status="ok", extra={"us_per_step": us})
        if as_json:
            print(json.dumps(res, indent=2))
            return
        t = Table(title=f"{steps} dependent kernels over {n} floats on {dev.name}", title_justify="left",
                  header_style="bold")
        for col in ("schedule", "us per step", "vs one by one"):
            t.add_column(col)
        base = res["us_per_step"]["one by one"]
        for name, us in res["us_per_step"].items():
            t.add_row(name, f"{us:.2f}", f"{base / us:.1f}x")
        console.print(t)
        console.print(f"all three leave identical values (rel. error vs float64 {res['rel_error']:.1e})")
