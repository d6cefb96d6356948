"""Commands that need a GPU: the device, ladders, tuning, sanitizers and profiles."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import List, Optional

import typer

from ..tune.strategies import DEFAULT_STRATEGY
from . import app, console, err, _fail, _message, _Steps, _command_line, _family, EXIT_INPUT


@app.command()
def device(as_json: bool = typer.Option(False, "--json", help="machine-readable output")):
    """The GPU's properties that matter for kernels."""
    from ..device import NoGpuError, current_sm_clock_mhz, device_info

    try:
        info = device_info()
    except NoGpuError as exc:
        if as_json:  # (machine-readable even when there is no GPU to describe)
            print(json.dumps({"gpu": None, "error": str(exc)}, indent=2))
            raise typer.Exit(EXIT_INPUT)
        _fail(str(exc))
    d = info.as_dict()
    d["sm_clock_now_mhz"] = current_sm_clock_mhz()
    if as_json:
        print(json.dumps(d, indent=2))
        return
    from rich.table import Table

    t = Table(title=f"{info.name} ({info.arch})", title_justify="left", show_header=False)
    rows = [
        ("SMs", info.sms), ("registers / SM", info.regs_per_sm), ("registers / block", info.regs_per_block),
        ("shared memory / SM", f"{info.smem_per_sm // 1024} KiB"),
        ("shared memory / block", f"{info.smem_per_block // 1024} KiB (opt-in {info.smem_per_block_optin // 1024} KiB, "
                                  f"{info.smem_reserved_per_block} B reserved)"),
        ("threads / SM", info.max_threads_per_sm), ("blocks / SM", info.max_blocks_per_sm),
        ("L2 cache", f"{info.l2_bytes / 2**20:.0f} MiB"), ("memory", f"{info.memory_bytes / 2**30:.1f} GiB"),
        ("memory bus", f"{info.memory_bus_bits} bit @ {info.memory_clock_mhz} MHz "
                       f"(datasheet {info.datasheet_bandwidth_gbs:.0f} GB/s)"),
        ("SM clock (max)", f"{info.sm_clock_mhz} MHz" + (f", now {d['sm_clock_now_mhz']} MHz" if d["sm_clock_now_mhz"] else "")),
        ("fp32 peak (datasheet)", f"{info.peak_fp32_tflops:.1f} TFLOP/s"),
        ("driver / runtime", f"{info.driver_version} / {info.runtime_version}"),
    ]
    for k, v in rows:
        t.add_row(k, str(v))
    console.print(t)


@app.command()
def ladder(family: str = typer.Argument(..., help="kernel family, e.g. gemm or elementwise"),
           size: Optional[List[str]] = typer.Option(None, "--size", "-s", help="problem size(s); repeatable"),
           rung: Optional[List[str]] = typer.Option(None, help="only these rungs (name or stage)"),
           alpha: float = typer.Option(1.0, help="GEMM alpha"),
           beta: float = typer.Option(0.0, help="GEMM beta"),
           dtype: Optional[str] = typer.Option(None, help="element type check (the CUDA-core ladders are fp32; "
                                                          "gemm_tc takes fp16 or bf16 from the size, e.g. 4096:bf16)"),
           seed: Optional[int] = typer.Option(None, help="fix the input seed (default: fresh random inputs)"),
           target_ms: float = typer.Option(400.0, help="measured time per kernel and size"),
           db: Optional[Path] = typer.Option(None, help="results database (default: $SIMTLAB_DB or user data dir)"),
           plot: Optional[Path] = typer.Option(None, help="write a bar chart of the ladder (PNG)"),
           quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar or tables; failures only"),
           json_out: Optional[Path] = typer.Option(None, "--json-out", help="also write the rows as JSON"),
           stored: bool = typer.Option(True, "--stored/--shipped", help="the rungs that read the store (gemm 10, "
                                       "gemm_tc 6, conv2d 6) take its fastest verified row for this GPU and size "
                                       "(what simtlab tune found), or run at their shipped parameters"),
           isolate: bool = typer.Option(True, help="measure in a child process, so a hang or a sticky CUDA error "
                                                   "costs one rung (its row stored with the reason)"),
           timeout: float = typer.Option(300.0, help="seconds a rung may take (compile, check and timing) "
                                                     "before its process is killed; with --isolate")):
    """Verify and time every rung of a ladder beside its reference; store every row."""
    from ..device import NoGpuError, current_sm_clock_mhz, device_info
    from ..api_calls import api_references
    from ..ladder import LadderOptions, run_ladder, run_ladder_isolated
    from ..report.table import ladder_table
    from ..store import Store

    fam = _family(family)
    if not timeout > 0:
        _fail(f"--timeout {timeout:g}: give a positive number of seconds")
    try:
        dev = device_info()
    except NoGpuError as exc:
        err.print(f"simtlab ladder needs a GPU: {_message(exc)}", soft_wrap=True, highlight=False)
        raise typer.Exit(2)
    op = fam.op()
    if dtype is not None and dtype != op.DTYPE:
        _fail(f"the {fam.name} ladder computes in {op.DTYPE}; --dtype {dtype} is not available for it")
    sizes = list(size) if size else list(fam.default_sizes)
    try:
        for s in sizes:
            op.parse_size(s, alpha=alpha, beta=beta)
        rungs = [fam.rung(r) for r in rung] if rung else None
    except (ValueError, KeyError) as exc:
        _fail(_message(exc))
    store = Store(db)
    run_id = store.start_run(_command_line(), dev, current_sm_clock_mhz())
    if not quiet:
        console.print(f"[bold]{fam.name}[/] on {dev.name} ({dev.arch}), run {run_id} -> {store.path}")
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    n_refs = len(op.references() + api_references(fam.name))
    total = len(sizes) * (n_refs + len(rungs or fam.rungs))
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=console, transient=True, disable=quiet) as progress:
        task = progress.add_task("starting", total=total)
        run = (lambda *a, **k: run_ladder_isolated(*a, timeout_s=timeout, **k)) if isolate else run_ladder
        opts = LadderOptions(alpha=alpha, beta=beta, seed=seed, target_ms=target_ms, stored=stored)
        rows = run(fam, sizes, rungs, store, run_id, opts,
                   on_row=lambda r: progress.advance(task), on_step=lambda s: progress.update(task, description=s))
    for prob in ([] if quiet else dict.fromkeys(r.problem for r in rows)):
        sub = [r for r in rows if r.problem == prob]
        ref = next((r.name for r in sub if r.is_reference and r.median_ms), None)
        console.print(ladder_table(sub, fam.metric, ref, title=f"{fam.name} {prob} on {dev.name}"))
    if plot:
        from ..report.plot import ladder_chart

        ladder_chart(rows, fam.metric, plot, title=f"{fam.name} ladder on {dev.name}")
        if not quiet:
            console.print(f"chart: {plot}")
    if json_out:
        json_out.write_text(json.dumps([r.as_dict() for r in rows], indent=2, default=str))
    bad = [r for r in rows if r.status not in ("ok", "reference", "unsupported")]
    if bad:
        err.print(f"[red]{len(bad)} row(s) failed:[/] " + ", ".join(f"{r.name} {r.problem}: {r.status}" for r in bad))
        raise typer.Exit(1)


@app.command("tune")
def tune_cmd(family: str = typer.Argument(..., help="kernel family: any with a rung that declares a search space "
                                                    "(gemm, gemm_tc, conv2d, scan, spmv, sort, ...)"),
             rung: str = typer.Option("tuned", help="the rung to tune (name or stage)"),
             size: str = typer.Option("4096", help="problem size"),
             strategy: str = typer.Option(DEFAULT_STRATEGY, help="model (gradient-boosted cost model), tpe (Optuna), "
                                                         "random or brute"),
             budget: int = typer.Option(40, min=1, help="evaluations for this problem in all, those in the store "
                                                         "included: a resumed search runs what is left"),
             time_budget: Optional[float] = typer.Option(None, help="stop starting evaluations after this many seconds"),
             jobs: int = typer.Option(0, help="compiler processes running ahead of the GPU (0: CPUs - 1)"),
             timeout: float = typer.Option(60.0, help="seconds an evaluation may take before its process is killed"),
             isolate: bool = typer.Option(True, help="measure in a killable child process (hangs become timeouts)"),
             gpus: Optional[str] = typer.Option(None, help="measure on these GPUs at once, one child process each: "
                                                           "all, or a list such as 0,1 (default: the current GPU)"),
             warm_start: bool = typer.Option(True, help="measure first the best configurations stored for other "
                                                        "sizes or devices"),
             seed: int = typer.Option(0, help="strategy seed"),
             fresh: bool = typer.Option(False, "--fresh", help="ignore earlier evaluations in the store"),
             target_ms: float = typer.Option(150.0, help="measured time per evaluation"),
             profile: bool = typer.Option(True, help="model: build the whole space first, so the cost model sees "
                                                     "each build's registers, occupancy and rounds of work "
                                                     "(--no-profile starts measuring at once)"),
             db: Optional[Path] = typer.Option(None, help="results database"),
             as_json: bool = typer.Option(False, "--json", help="machine-readable output")):
    """Search a rung's parameters on this GPU; every verified evaluation is stored, and the rungs
    that read the store (gemm 10 and simtlab.gemm, gemm_tc 6 and simtlab.gemm_tc, conv2d 6) use the
    fastest one for this device and size; after the search the shipped configuration is measured
    once too, so they never run slower than they ship."""
    from rich.progress import Progress

    from ..device import NoGpuError, current_sm_clock_mhz, device_info
    from ..report.table import tune_table
    from ..store import Store
    from ..tune.session import TuneSettings, rung_space, tune_rung
    from ..tune.strategies import STRATEGIES

    for name, value, can_be_none in (("--timeout", timeout, False), ("--target-ms", target_ms, False),
                                     ("--time-budget", time_budget, True)):
        if not (can_be_none and value is None) and not (math.isfinite(value) and value > 0):
            _fail(f"{name} {value}: give a positive number of {'milliseconds' if 'ms' in name else 'seconds'}")
    if jobs < 0:
        _fail(f"--jobs {jobs}: give a count of compiler processes, 0 for the CPUs less one")
    fam = _family(family)
    settings = TuneSettings(strategy, budget, time_budget, jobs, timeout, isolate, gpus, warm_start, seed, fresh,
                            target_ms, profile)
    try:
        r = fam.rung(rung)
        fam.op().parse_size(size)
        if r.space is None:
            rung_space(fam, r, 0)  # (names the rungs that have one)
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r}; choose from {', '.join(STRATEGIES)}")
        dev = device_info()
    except (KeyError, ValueError, NoGpuError) as exc:
        _fail(_message(exc))
    with Progress(console=console, transient=True) as progress:
        task = None

        def start(total):
            nonlocal task
            task = progress.add_task(f"{r.id} {size} {strategy}", total=total)
            if total == 0:
                err.print(f"the budget of {budget} is spent (evaluations of {r.id} at {size} are stored): showing "
                          "them; raise --budget to search further, or --fresh to start over")

        building = None

        def build_all(total):  # the cost model's static profiles: every configuration built first
            nonlocal building
            building = progress.add_task(f"building {total} configurations", total=total)

        try:
            outcome = tune_rung(fam, r, size, Store(db), dev, settings, _command_line(), current_sm_clock_mhz(),
                                on_start=start, on_eval=lambda e: progress.advance(task), on_static=build_all,
                                on_static_done=lambda: progress.advance(building))
        except ValueError as exc:
            _fail(_message(exc))
    if as_json:
        rest = [e for e in outcome.result.evaluations if e.value is None]
        print(json.dumps([{"config": e.config, "ms": e.value, "status": e.status, "error": e.error}
                          for e in outcome.ranked + rest], indent=2))
        return
    console.print(tune_table(outcome, fam.metric))
    if outcome.refused:
        reason, _ = max(outcome.refused.items(), key=lambda kv: kv[1])
        console.print(f"{sum(outcome.refused.values())} configuration(s) of the space refused at {size} before the "
                      f"search, not evaluated (e.g. {reason})")
    if outcome.failed:
        kinds = ", ".join(f"{sum(e.status == k for e in outcome.failed)} {k}" for k in ("failed", "timeout", "crashed")
                          if any(e.status == k for e in outcome.failed))
        console.print(f"{len(outcome.failed)} configuration(s) skipped ({kinds}; reasons are in the store)")


@app.command()
def sanitize(family: str = typer.Argument(..., help="kernel family"),
             rung: Optional[List[str]] = typer.Option(None, help="only these rungs (default: all)"),
             tool: Optional[List[str]] = typer.Option(None, help="memcheck, racecheck, synccheck, initcheck (repeatable; default: all four)"),
             size: Optional[str] = typer.Option(None, help="problem (default: the family's small odd check size)"),
             timeout: float = typer.Option(300.0, help="seconds per rung and tool"),
             jobs: int = typer.Option(1, min=1, help="sanitizer processes at once (they share the GPU)"),
             as_json: bool = typer.Option(False, "--json", help="machine-readable output")):
    """Run compute-sanitizer over the rungs on a small odd problem; exit 1 on any error."""
    from ..device import NoGpuError, require_gpu
    from ..tools.nvtools import SANITIZER_TOOLS, ToolUnavailable, find_tool, sanitize_rung

    fam = _family(family)
    try:
        rungs = [fam.rung(r) for r in rung] if rung else list(fam.rungs)
        tools = list(tool) if tool else list(SANITIZER_TOOLS)
        bad = [t for t in tools if t not in SANITIZER_TOOLS]
        if bad:
            raise ValueError(f"unknown sanitizer tool(s) {', '.join(bad)}; choose from {', '.join(SANITIZER_TOOLS)}")
        require_gpu()
        find_tool("compute-sanitizer")
    except (KeyError, ValueError, NoGpuError, ToolUnavailable) as exc:
        _fail(_message(exc))
    problem = size or fam.check_size
    from concurrent.futures import ThreadPoolExecutor

    pairs = [(r, t) for r in rungs for t in tools]
    with _Steps(len(pairs), "compute-sanitizer") as steps, ThreadPoolExecutor(jobs) as pool:
        def one(pair):  # (each job is a subprocess: the threads only wait on it)
            result = sanitize_rung(fam.name, pair[0].name, pair[1], problem, timeout)
            steps.finished(f"{pair[0].id} {pair[1]}")
            return result

        results = list(pool.map(one, pairs))
    if as_json:
        print(json.dumps([r.as_dict() for r in results], indent=2))
    else:
        from rich.markup import escape
        from rich.table import Table

        t = Table(header_style="bold", title=f"compute-sanitizer, {fam.name} {problem}", title_justify="left")
        for col in ("rung", "tool", "errors", "summary", "first error"):
            t.add_column(col)
        for r in results:
            errs = "?" if r.errors is None else str(r.errors)
            t.add_row(r.rung, r.tool, f"[green]{errs}[/]" if r.clean else f"[red]{errs}[/]", escape(r.summary),
                      escape(r.first_error[:100]))
        console.print(t)
    if not all(r.clean for r in results):
        raise typer.Exit(1)


@app.command()
def profile(family: str = typer.Argument(..., help="kernel family"),
            rung: str = typer.Argument(..., help="rung name or stage"),
            size: Optional[str] = typer.Option(None, help="problem (default: the family's largest default)"),
            metrics: Optional[str] = typer.Option(None, help="comma-separated ncu metrics (default: a key set)"),
            db: Optional[Path] = typer.Option(None, help="results database to store the metrics in"),
            as_json: bool = typer.Option(False, "--json", help="machine-readable output")):
    """Nsight Compute on one rung (clocks left alone); stores its key metrics."""
    from ..device import NoGpuError, current_sm_clock_mhz, device_info
    from ..store import Store
    from ..tools.nvtools import DEFAULT_METRICS, ToolUnavailable, find_tool, profile_rung

    fam = _family(family)
    try:
        r = fam.rung(rung)
        dev = device_info()
        find_tool("ncu")
    except (KeyError, NoGpuError, ToolUnavailable) as exc:
        _fail(_message(exc))
    problem = size or fam.default_sizes[-1]
    chosen = tuple(m.strip() for m in metrics.split(",")) if metrics else DEFAULT_METRICS
    try:
        parsed = profile_rung(fam.name, r.name, r.kernel, problem, chosen)
    except RuntimeError as exc:
        _fail(str(exc), 1)
    store = Store(db)
    run_id = store.start_run(_command_line(), dev, current_sm_clock_mhz())
    label = fam.op().parse_size(problem).label
    store.add_result(run_id, family=fam.name, rung=r.id, stage=None, problem=label, status="profile",
                     extra={"ncu": parsed})
    if as_json:
        print(json.dumps(parsed, indent=2))
        return
    from rich.table import Table

    for launch, values in parsed.items():
        t = Table(title=f"{r.id} {label}: {launch[:90]}", title_justify="left", header_style="bold")
        t.add_column("metric")
        t.add_column("value", justify="right")
        for k, v in values.items():
            t.add_row(k, f"{v:,.2f}" if isinstance(v, float) else str(v))
        console.print(t)


SETUP_KEYS = {"args", "reference", "outputs", "inouts", "grid", "block", "shared", "template", "tolerance"}


def load_setup(path: Path) -> dict:
    """A setup file's `setup()` result: the kernel's arguments and what to check them against. Its
    keys: args (a tuple: CuPy arrays, numbers), grid and block (tuples, or functions of the
    arguments), reference (a function of the arguments in float64, returning the written ones),
    outputs / inouts (argument indices, as Kernel.verify takes them), and optionally shared,
    template (template arguments) and tolerance."""
    import runpy

    if not path.is_file():
        _fail(f"no setup file at {path}")
    try:
        space = runpy.run_path(str(path))
    except Exception as exc:  # (the user's file: its own error, named)
        _fail(f"{path} raised {type(exc).__name__}: {exc}")
    fn = space.get("setup")
    if not callable(fn):
        _fail(f"{path} defines no setup() returning the kernel's args, grid, block, reference and outputs")
    try:
        spec = fn()
    except Exception as exc:
        _fail(f"{path}: setup() raised {type(exc).__name__}: {exc}")
    if not isinstance(spec, dict):
        _fail(f"{path}: setup() returned a {type(spec).__name__}; return a dict with args, grid, block, reference, "
              "outputs")
    unknown, missing = set(spec) - SETUP_KEYS, {"args", "grid", "block"} - set(spec)
    if unknown or missing:
        _fail(f"{path}: setup()'s dict " + (f"has unknown keys {sorted(unknown)}" if unknown else "") +
              ("; " if unknown and missing else "") + (f"lacks {sorted(missing)}" if missing else "") +
              f" (keys: {', '.join(sorted(SETUP_KEYS))})")
    if "reference" in spec and not (spec.get("outputs") or spec.get("inouts")):
        _fail(f"{path}: a reference needs outputs=[...] or inouts=[...]: the arguments the kernel writes")
    return spec


@app.command("check")
def check_cmd(source: Path = typer.Argument(..., help="your .cu file"),
              name: str = typer.Argument(..., help="the kernel's name in it"),
              setup: Path = typer.Option(..., help="a Python file whose setup() gives the arguments and the reference "
                                                   "(see `simtlab check --help`)"),
              target_ms: float = typer.Option(100.0, help="time spent timing"),
              as_json: bool = typer.Option(False, "--json", help="machine-readable output")):
    """Your own kernel on a GPU: verified against the reference its setup file gives (outputs
    poisoned, inouts kept; a second poison tells unwritten elements from computed NaN), timed
    (CUDA events, L2 flushed, median) and explained (registers, occupancy, SASS). The setup file
    defines setup() returning a dict: args (CuPy arrays and numbers), grid and block (tuples or
    functions of the arguments), reference (a function of the arguments in float64 returning what
    the kernel writes), outputs / inouts (indices), and optionally shared, template, tolerance.
    Exits 1 when the result is wrong."""
    from ..device import NoGpuError, require_gpu
    from ..kernel import Kernel

    if not source.is_file():
        _fail(f"no CUDA source at {source}")
    if not (math.isfinite(target_ms) and target_ms > 0):
        _fail(f"--target-ms {target_ms}: give a positive number of milliseconds")
    try:
        require_gpu()
    except NoGpuError as exc:
        _fail(f"simtlab check runs the kernel: {_message(exc)}; `simtlab explain {source} {name} --arch sm_90` "
              "reports it without one")
    spec = load_setup(source.parent / setup if not setup.is_absolute() and not setup.is_file() else setup)
    try:
        k = Kernel(source, name, spec.get("template"), grid=spec["grid"], block=spec["block"],
                   shared=spec.get("shared", 0))
        args = tuple(spec["args"])
        verdict = None
        if "reference" in spec:
            verdict = k.verify(spec["reference"], *args, outputs=spec.get("outputs", ()), inouts=spec.get("inouts", ()),
                               tol=spec.get("tolerance"))
        timing = k.time(*args, target_ms=target_ms)
        facts = k.explain(*args)
    except (ValueError, TypeError) as exc:
        _fail(f"{source.name}: {exc}")
    verdicts = verdict if isinstance(verdict, list) else [verdict] if verdict is not None else []
    ok = all(v.ok for v in verdicts)
    out = {"kernel": facts["kernel"], "verified": [{"ok": v.ok, "rel_error": v.rel_error, "tolerance": v.tolerance,
                                                    "reason": v.reason} for v in verdicts],
           "median_ms": timing.median_ms, "spread": timing.spread, "reps": timing.reps,
           "registers": facts["registers"], "occupancy": facts.get("occupancy"), "limiter": facts.get("limiter")}
    if as_json:
        print(json.dumps(out, indent=2, default=str))
    else:
        for i, v in enumerate(verdicts):
            mark = "[green]ok[/]" if v.ok else "[red]WRONG[/]"
            console.print(f"written argument {i}: {mark} (error {v.rel_error:.2e}, tolerance {v.tolerance:.2e})"
                          + (f": {v.reason}" if v.reason else ""))
        occ = f", occupancy {facts['occupancy']:.0%} ({facts['limiter']})" if facts.get("occupancy") is not None else ""
        console.print(f"{facts['kernel']}: {timing.median_ms:.4f} ms median of {timing.reps} (spread "
                      f"{timing.spread:.1%}), {facts['registers']} registers{occ}")
    if not ok:
        raise typer.Exit(1)
