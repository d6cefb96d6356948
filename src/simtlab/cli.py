"""The `simtlab` command line."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from .catalog import FAMILIES, family as get_family

app = typer.Typer(help="simtlab: hand-written CUDA kernels, verified, timed, explained.", no_args_is_help=True,
                  add_completion=False, pretty_exceptions_enable=False)
console = Console()
err = Console(stderr=True)


def _fail(message: str, code: int = 2) -> None:
    err.print(f"[red]error:[/] {message}", soft_wrap=True)
    raise typer.Exit(code)


def _message(exc: Exception) -> str:
    return str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)


def _target(fam, arch: Optional[str], rung_keys) -> tuple:
    """The architecture to build for (this GPU's unless given) and the chosen rungs (None: all)."""
    from .compile import normalise_arch
    from .device import NoGpuError

    try:
        rungs = [fam.rung(r) for r in rung_keys] if rung_keys else None
        return normalise_arch(arch), rungs
    except (NoGpuError, ValueError, KeyError) as exc:
        _fail(_message(exc) + ("" if arch else " (or pass --arch sm_90)"))


def _existing_store(db: Optional[Path], first: str = "simtlab ladder FAMILY"):
    """The results store at `db` (or the default), refusing clearly where none exists yet."""
    from .store import Store, default_path

    path = db or default_path()
    if not Path(path).exists():
        _fail(f"no results database at {path} yet: run `{first}` first")
    return Store(path, readonly=True)


class _Steps:
    """A progress bar on stderr, one step a rung, shown only on a terminal (gone once done):
    `with _Steps(n, "compiling") as step: work(on_rung=step)`."""

    def __init__(self, total: int, what: str):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=err, transient=True, disable=not err.is_terminal)
        self.what, self.total, self.task, self.started = what, total, None, False

    def __enter__(self):
        self.progress.__enter__()
        self.task = self.progress.add_task(self.what, total=self.total)
        return self

    def __call__(self, rung) -> None:
        """The next rung starts (so the one before it is done)."""
        self.progress.update(self.task, advance=int(self.started), description=f"{self.what} {rung.id}")
        self.started = True

    def finished(self, label: str) -> None:
        """One step done (steps that run side by side report as they end)."""
        self.progress.update(self.task, advance=1, description=f"{self.what} ({label} done)")

    def __exit__(self, *exc):
        return self.progress.__exit__(*exc)


def _command_line() -> str:
    return " ".join(["simtlab"] + [shlex.quote(a) for a in sys.argv[1:]])


def _family(name: str):
    try:
        return get_family(name)
    except KeyError as exc:
        _fail(exc.args[0])


@app.command()
def device(as_json: bool = typer.Option(False, "--json", help="machine-readable output")):
    """The GPU's properties that matter for kernels."""
    from .device import NoGpuError, current_sm_clock_mhz, device_info

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
def kernels(as_json: bool = typer.Option(False, "--json", help="machine-readable output"),
            family: Optional[str] = typer.Option(None, help="only this family")):
    """The catalog: every ladder and its rungs."""
    fams = [_family(family)] if family else list(FAMILIES.values())
    if as_json:
        out = [{"family": f.name, "title": f.title, "reference": f.reference, "metric": f.metric,
                "default_sizes": list(f.default_sizes),
                "rungs": [{"id": r.id, "stage": r.stage, "name": r.name, "source": r.source, "kernel": r.kernel,
                           "template_params": list(r.template_params), "defaults": dict(r.defaults),
                           "arch_defaults": {k: dict(v) for k, v in r.arch_defaults.items()},
                           "tunable": list(r.tunable), "vec_variant": r.vec_variant,
                           "min_cc": ".".join(map(str, r.min_cc)), "lesson": r.lesson} for r in f.rungs]}
               for f in fams]
        print(json.dumps(out, indent=2))
        return
    from rich.table import Table

    for f in fams:
        t = Table(title=f"{f.name}: {f.title}  (reference: {f.reference})", title_justify="left", header_style="bold")
        for col in ("#", "rung", "source", "parameters", "lesson"):
            t.add_column(col, overflow="fold")
        for r in f.rungs:
            t.add_row(str(r.stage), r.name, r.source, " ".join(f"{k}={v}" for k, v in r.defaults.items()), r.lesson)
        console.print(t)


@app.command("compile")
def compile_cmd(family: str = typer.Argument(..., help="kernel family, e.g. gemm"),
                arch: Optional[str] = typer.Option(None, help="target, e.g. sm_90 (default: this GPU's)"),
                rung: Optional[List[str]] = typer.Option(None, help="only these rungs (name or stage)"),
                size: Optional[str] = typer.Option(None, help="problem used for launch geometry/occupancy"),
                as_json: bool = typer.Option(False, "--json", help="machine-readable output")):
    """Compile every rung through NVRTC and report registers, shared memory, spills, occupancy (no GPU needed)."""
    from .analyze.static import static_report

    fam = _family(family)
    target, rungs = _target(fam, arch, rung)
    with _Steps(len(rungs or fam.rungs), f"compiling for {target}") as step:
        entries = static_report(fam, target, rungs, size, on_rung=step)
    if as_json:
        print(json.dumps(entries, indent=2, default=str))
    else:
        from .report.table import static_table

        console.print(static_table(entries, target))
    if any(e.get("error") and not e.get("unsupported") for e in entries):  # a rung that cannot run here is no failure
        raise typer.Exit(1)


@app.command()
def sass(family: str = typer.Argument(..., help="kernel family, e.g. gemm"),
         arch: Optional[str] = typer.Option(None, help="target, e.g. sm_90 (default: this GPU's)"),
         rung: Optional[List[str]] = typer.Option(None, help="only these rungs (name or stage)"),
         as_json: bool = typer.Option(False, "--json", help="machine-readable output")):
    """Instruction-level report (no GPU needed): access widths, barriers, spills, main-loop FMA share,
    the main loop's cycles per path from its control codes, and whether each rung's lesson shows up
    in the machine code."""
    from .analyze.sass import SassUnavailable
    from .analyze.static import sass_report

    fam = _family(family)
    target, rungs = _target(fam, arch, rung)
    try:
        with _Steps(len(rungs or fam.rungs), f"disassembling for {target}") as step:
            entries = sass_report(fam, target, rungs, on_rung=step)
    except SassUnavailable as exc:
        _fail(str(exc))
    if as_json:
        print(json.dumps(entries, indent=2))
    else:
        from .report.table import sass_table

        console.print(sass_table(entries, target))
    if not all(e.get("ok") for e in entries if e.get("variant") != "predicated scalar"):
        raise typer.Exit(1)


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
           isolate: bool = typer.Option(True, help="measure in a child process, so a hang or a sticky CUDA error "
                                                   "costs one rung (its row stored with the reason)"),
           timeout: float = typer.Option(300.0, help="seconds a rung may take (compile, check and timing) "
                                                     "before its process is killed; with --isolate")):
    """Verify and time every rung of a ladder beside its reference; store every row."""
    from .device import NoGpuError, current_sm_clock_mhz, device_info
    from .api_calls import api_references
    from .ladder import LadderOptions, run_ladder, run_ladder_isolated
    from .report.table import ladder_table
    from .store import Store

    fam = _family(family)
    if not timeout > 0:
        _fail(f"--timeout {timeout:g}: give a positive number of seconds")
    try:
        dev = device_info()
    except NoGpuError as exc:
        err.print(f"simtlab ladder needs a GPU: {exc}", soft_wrap=True, highlight=False)
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
        rows = run(fam, sizes, rungs, store, run_id, LadderOptions(alpha=alpha, beta=beta, seed=seed, target_ms=target_ms),
                   on_row=lambda r: progress.advance(task), on_step=lambda s: progress.update(task, description=s))
    for prob in ([] if quiet else dict.fromkeys(r.problem for r in rows)):
        sub = [r for r in rows if r.problem == prob]
        ref = next((r.name for r in sub if r.is_reference and r.median_ms), None)
        console.print(ladder_table(sub, fam.metric, ref, title=f"{fam.name} {prob} on {dev.name}"))
    if plot:
        from .report.plot import ladder_chart

        ladder_chart(rows, fam.metric, plot, title=f"{fam.name} ladder on {dev.name}")
        if not quiet:
            console.print(f"chart: {plot}")
    if json_out:
        json_out.write_text(json.dumps([r.as_dict() for r in rows], indent=2, default=str))
    bad = [r for r in rows if r.status not in ("ok", "reference", "unsupported")]
    if bad:
        err.print(f"[red]{len(bad)} row(s) failed:[/] " + ", ".join(f"{r.name} {r.problem}: {r.status}" for r in bad))
        raise typer.Exit(1)


@app.command("plan")
def plan_cmd(family: str = typer.Argument(..., help="kernel family, e.g. gemm"),
             gpu: Optional[str] = typer.Option(None, help="plan for this GPU's datasheet: h200, h100, a100, l40s, rtx4090, v100"),
             arch: Optional[str] = typer.Option(None, help="target architecture (default: the GPU's, or this machine's)"),
             size: Optional[str] = typer.Option(None, help="problem size (default: the family's largest default)"),
             as_json: bool = typer.Option(False, "--json", help="machine-readable output")):
    """What each rung would look like on a GPU, with no GPU: resources, occupancy, bytes per FLOP, the roof."""
    from .analyze.plan import plan
    from .analyze.roofline import datasheet_ceilings, gpu_spec
    from .compile import normalise_arch
    from .device import NoGpuError

    fam = _family(family)
    try:
        spec = gpu_spec(gpu) if gpu else None
        target = normalise_arch(arch or (spec.arch if spec else None))
        problem = fam.op().parse_size(size or fam.default_sizes[-1])
        ceilings = datasheet_ceilings(spec, problem.dtype) if spec else None
        result = plan(fam, target, ceilings, size, sms=spec.sms if spec else None)
    except (NoGpuError, ValueError) as exc:
        _fail(f"{exc} (pass --gpu h200 or --arch sm_90)")
    if as_json:
        print(json.dumps(result, indent=2, default=str))
        return
    from rich.table import Table

    head = f"{fam.name} {result['problem']} for {spec.name if spec else target}: {result['flops'] / 1e9:.3g} GFLOP, " \
           f"{result['min_bytes'] / 1e6:.4g} MB minimal traffic, intensity {result['intensity']:.2f} FLOP/B"
    if ceilings and fam.metric == "gbs":
        head += f"; {result['bound']}, roof {ceilings.bandwidth_gbs:.0f} GB/s (datasheet)"
    elif ceilings:
        head += f"; {result['bound']}, roof {result['roof_gflops'] / 1e3:.2f} TFLOP/s (datasheet)"
    t = Table(title=head, title_justify="left", header_style="bold")
    cols = ["rung", "threads", "regs", "smem B", "spill B", "occ", "limited by", "FLOP / requested B"]
    cols += ["rounds (idle)"] if spec else []  # wave quantization needs the GPU's SM count
    for col in cols + ["lesson"]:
        t.add_column(col, justify="left" if col in ("rung", "limited by", "lesson") else "right",
                     overflow="fold", max_width=50 if col == "lesson" else None)
    for e in result["rungs"]:
        if e.get("error"):
            t.add_row(e["rung"].split("/")[-1], f"[red]{e['error'][:60]}[/]", *[""] * (len(cols) - 1))
            continue
        w = e.get("waves")
        rounds = [f"{w['rounds']:.2f} ({w['idle_share']:.0%})" if w else ""] if spec else []
        t.add_row(e["rung"].split("/")[-1], str(e["threads"]), str(e["registers"]),
                  str(e["shared_static"] + e["shared_dynamic"]), str(e["spill_bytes"]), f"{e['occupancy'] * 100:.0f}%",
                  e["limiter"], f"{e['flop_per_requested_byte']:.2f}", *rounds, e["lesson"])
    console.print(t)


@app.command("explain")
def explain_cmd(family: str = typer.Argument(..., help="kernel family"),
                rung: str = typer.Argument(..., help="rung name or stage"),
                arch: Optional[str] = typer.Option(None, help="target for the static facts (default: this GPU's)"),
                size: Optional[str] = typer.Option(None, help="problem for geometry and intensity"),
                db: Optional[Path] = typer.Option(None, help="results database for measured effects"),
                device_name: Optional[str] = typer.Option(None, "--device", help="only results of this device"),
                as_json: bool = typer.Option(False, "--json", help="machine-readable output")):
    """Why a rung is as fast as it is: lesson, predicted and measured effect, limiter."""
    from .analyze.explain import explain
    from .store import Store, default_path

    fam = _family(family)
    target, (r,) = _target(fam, arch, [rung])
    path = db or default_path()
    store = Store(path, readonly=True) if Path(path).exists() else None
    page = explain(fam, r, target, store, device_name, size)
    if as_json:
        print(json.dumps(page, indent=2, default=str))
        return
    from rich.panel import Panel
    from rich.table import Table

    from rich.markup import escape

    console.print(Panel(f"[bold]{escape(page['lesson'])}[/]\n\n{escape(page['header'])}", title=page["rung"],
                        title_align="left"))
    t = Table(title=f"static facts on {page['arch']}, {page['problem']}", title_justify="left", header_style="bold")
    t.add_column("")
    if page["previous"]:
        t.add_column(page["previous"].split("/")[-1], justify="right")
    t.add_column(page["rung"].split("/")[-1], justify="right")
    keys = [("registers", "{}"), ("shared_bytes", "{}"), ("occupancy", "{:.0%}"), ("limiter", "{}"),
            ("flop_per_requested_byte", "{:.2f}"), ("sass_memory", "{}"), ("barriers", "{}"),
            ("loop_instructions", "{}"), ("loop_fma_share", "{:.0%}"), ("loop_cycles", "{}"), ("rounds", "{}")]
    for key, fmt in keys:
        if key not in page["static"]:
            continue
        def cell(facts):
            v = facts.get(key)
            if isinstance(v, dict):
                return " ".join(f"{k}x{n}" for k, n in sorted(v.items()))
            return fmt.format(v) if v is not None else ""
        cells = ([cell(page["static_previous"])] if page["previous"] else []) + [cell(page["static"])]
        t.add_row(key.replace("_", " "), *cells)
    console.print(t)
    if page["measured"]:
        m = Table(title="measured (best verified result per problem in the store)", title_justify="left",
                  header_style="bold")
        for col in ("problem", "ms", "TFLOP/s" if fam.metric == "tflops" else "GB/s", "% of reference",
                    "speedup over previous"):
            m.add_column(col, justify="left" if col == "problem" else "right")
        for prob, v in page["measured"].items():
            value = v["gflops"] / 1e3 if fam.metric == "tflops" else v["gbs"]
            sp = page["speedup_over_previous"].get(prob)
            m.add_row(prob, f"{v['median_ms']:.3f}", f"{value:.2f}", f"{v['pct_of_reference'] or 0:.1f}",
                      f"{sp:.2f}x" if sp else "")
        console.print(m)
    else:
        console.print("no measurements of this rung in the store yet: `simtlab ladder " + fam.name + "` on a GPU")
    console.print(f"[bold]limiter:[/] {page['limiter']}")


@app.command()
def access(name: Optional[str] = typer.Argument(None, help="one shipped analysis (substring match); default: all"),
           as_json: bool = typer.Option(False, "--json", help="machine-readable output")):
    """The ladders' key memory accesses and branches, analysed per warp (no GPU needed):
    global sectors per request, shared-memory bank conflicts, divergent paths."""
    from .analyze.access import ANALYSES, run_analysis

    names = [n for n in ANALYSES if name is None or name.lower() in n.lower()]
    if not names:
        _fail(f"no shipped analysis matches {name!r}; try `simtlab access`")
    results = [run_analysis(n) for n in names]
    if as_json:
        print(json.dumps(results, indent=2))
        return
    from rich.table import Table

    t = Table(header_style="bold", title="per-warp access analysis", title_justify="left")
    for col in ("access", "kind", "cost", "efficiency"):
        t.add_column(col)
    for r in results:
        if r["kind"] == "global":
            cost, eff = f"{r['sectors_per_request']} sectors / request", f"{r['efficiency']:.0%} of fetched bytes used"
        elif r["kind"] == "shared":
            cost = f"{r['wavefronts']} wavefronts ({r['ways']}-way)"
            eff = f"{r['conflicts']} bank conflicts" if r["conflicts"] else "conflict-free"
        else:
            cost = f"{r['paths']} path(s){' (divergent)' if r['divergent'] else ''}"
            eff = f"{r['taken']}/{r['active']} lanes do the work"
        from rich.markup import escape

        t.add_row(escape(r["analysis"]), r["kind"], cost, eff)
    console.print(t)


@app.command()
def roofline(output: Path = typer.Option(..., "-o", "--output", help="PNG to write"),
             run: Optional[List[int]] = typer.Option(None, help="only these run ids (default: all runs of the device)"),
             device_name: Optional[str] = typer.Option(None, "--device", help="device name as stored (default: the latest run's)"),
             db: Optional[Path] = typer.Option(None, help="results database"),
             as_json: bool = typer.Option(False, "--json", help="print the points as JSON too")):
    """Roofline of stored results against the device's measured ceilings (no GPU needed)."""
    from .analyze.roofline import ceilings_from_store, points_from_rows, roofline_chart
    store = _existing_store(db, "simtlab ladder elementwise` and `simtlab ladder gemm")
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
    roofline_chart(points, ceilings, output, title=f"roofline, {name} (ridge {ceilings.ridge:.1f} FLOP/B)")
    if as_json:
        print(json.dumps({"ceilings": ceilings.as_dict(),
                          "points": [{**p.__dict__, "pct_of_roof": p.pct_of_roof} for p in points]}, indent=2))
    console.print(f"roofline: {output} ({len(points)} points; {ceilings.source})")


@app.command("tune")
def tune_cmd(family: str = typer.Argument(..., help="kernel family: any with a rung that declares a search space "
                                                    "(gemm, gemm_tc, conv2d, elementwise, reduction)"),
             rung: str = typer.Option("tuned", help="the rung to tune (name or stage)"),
             size: str = typer.Option("4096", help="problem size"),
             strategy: str = typer.Option("model", help="model (gradient-boosted cost model), tpe (Optuna), "
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
             db: Optional[Path] = typer.Option(None, help="results database"),
             as_json: bool = typer.Option(False, "--json", help="machine-readable output")):
    """Search a rung's parameters on this GPU; every verified evaluation is stored, and the rungs
    that read the store (gemm's tuned rung, simtlab.gemm) use the fastest one for this device and size."""
    from rich.progress import Progress

    from .device import NoGpuError, current_sm_clock_mhz, device_info
    from .report.table import tune_table
    from .store import Store
    from .tune.session import TuneSettings, rung_space, tune_rung
    from .tune.strategies import STRATEGIES

    fam = _family(family)
    settings = TuneSettings(strategy, budget, time_budget, jobs, timeout, isolate, gpus, warm_start, seed, fresh,
                            target_ms)
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

        try:
            outcome = tune_rung(fam, r, size, Store(db), dev, settings, _command_line(), current_sm_clock_mhz(),
                                on_start=start, on_eval=lambda e: progress.advance(task))
        except ValueError as exc:
            _fail(_message(exc))
    if as_json:
        rest = [e for e in outcome.result.evaluations if e.value is None]
        print(json.dumps([{"config": e.config, "ms": e.value, "status": e.status, "error": e.error}
                          for e in outcome.ranked + rest], indent=2))
        return
    console.print(tune_table(outcome, fam.metric))
    if outcome.failed:
        kinds = ", ".join(f"{sum(e.status == k for e in outcome.failed)} {k}" for k in ("failed", "timeout", "crashed")
                          if any(e.status == k for e in outcome.failed))
        console.print(f"{len(outcome.failed)} configuration(s) skipped ({kinds}; reasons are in the store)")


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
    from .store import rows_as_json

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
        console.print(t)
        return
    from .report.table import results_table

    console.print(results_table(rows))


@app.command()
def merge(sources: List[Path] = typer.Argument(..., help="results databases to copy from"),
          db: Optional[Path] = typer.Option(None, help="results database to copy into (created if missing)")):
    """Copy the runs of other results databases (other machines, sessions) into one."""
    from .store import Store

    missing = [str(p) for p in sources if not p.is_file()]
    if missing:
        _fail(f"no results database at {', '.join(missing)}")
    store = Store(db)
    for src in sources:
        try:
            n = store.merge_from(src)
        except Exception as exc:  # a corrupt or foreign file: say which, keep what was merged
            _fail(f"cannot merge {src}: {exc}")
        console.print(f"{src}: {n} run(s) merged into {store.path}")


@app.command()
def plot(rows_json: Path = typer.Argument(..., help="rows written by `simtlab ladder --json-out`"),
         output: Path = typer.Option(..., "-o", "--output", help="PNG to write"),
         title: str = typer.Option("", help="chart title")):
    """Redraw a ladder's bar chart from its saved rows (no GPU needed)."""
    from .ladder import Row
    from .report.plot import ladder_chart

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
def sanitize(family: str = typer.Argument(..., help="kernel family"),
             rung: Optional[List[str]] = typer.Option(None, help="only these rungs (default: all)"),
             tool: Optional[List[str]] = typer.Option(None, help="memcheck, racecheck, synccheck, initcheck (repeatable; default: all four)"),
             size: Optional[str] = typer.Option(None, help="problem (default: the family's small odd check size)"),
             timeout: float = typer.Option(300.0, help="seconds per rung and tool"),
             jobs: int = typer.Option(1, min=1, help="sanitizer processes at once (they share the GPU)"),
             as_json: bool = typer.Option(False, "--json", help="machine-readable output")):
    """Run compute-sanitizer over the rungs on a small odd problem; exit 1 on any error."""
    from .device import NoGpuError, require_gpu
    from .tools.nvtools import SANITIZER_TOOLS, ToolUnavailable, find_tool, sanitize_rung

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
    from .device import NoGpuError, current_sm_clock_mhz, device_info
    from .store import Store
    from .tools.nvtools import DEFAULT_METRICS, ToolUnavailable, find_tool, profile_rung

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


@app.command()
def report(output: Path = typer.Option(..., "-o", "--output", help="HTML file to write"),
           run: Optional[List[int]] = typer.Option(None, help="ladder run ids to show (default: the latest per family)"),
           db: Optional[Path] = typer.Option(None, help="results database")):
    """One self-contained HTML file: device, ceilings, ladder tables and charts, roofline, explanations."""
    from .report.html import write_report

    if not output.parent.is_dir():  # (said before the work, not after it)
        _fail(f"cannot write {output}: the folder {output.parent} does not exist")
    store = _existing_store(db)
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
    from .report.docs import write_docs
    pages = write_docs(_existing_store(db), output)
    console.print(f"{len(pages)} pages in {output}")


@app.command()
def compare(base: str = typer.Argument(..., help="baseline: a run id in the store, or an exported .json/.csv"),
            new: str = typer.Argument(..., help="candidate: a run id or an exported file"),
            db: Optional[Path] = typer.Option(None, help="results database for run ids"),
            floor: float = typer.Option(0.02, help="smallest slowdown that can count (fraction)"),
            as_json: bool = typer.Option(False, "--json", help="machine-readable output")):
    """Per kernel and size: the change from BASE to NEW against a noise-aware threshold.
    Exits 1 when anything regressed (slower beyond the noise, or no longer verified)."""
    from .report.compare import compare_rows, load_rows

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


from .host.commands import register as _register_host  # noqa: E402  (commands that need `app`)

_register_host(app, console)


# Exit codes: 0 success, 1 a detected regression (`compare`) or a failed check, 2 a usage or input
# error, 3 a damaged or unreadable results store, 4 anything unexpected (--debug shows its traceback).
EXIT_INPUT, EXIT_STORE, EXIT_INTERNAL = 2, 3, 4


def _one_line(exc: Exception) -> str:
    return (_message(exc).strip().splitlines() or [type(exc).__name__])[0]


def main(argv: Optional[List[str]] = None) -> int:
    """The `simtlab` command: every error is one line on stderr naming the problem, with the exit
    codes above; `--debug` (anywhere on the line) lets the traceback through instead."""
    import sqlite3

    from .compile import CompileError
    from .device import NoGpuError
    from .store import StoreError

    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    args = [a for a in args if a != "--debug"]
    try:  # (usage errors are the command-line parser's own: one line, exit 2)
        app(args=args, prog_name="simtlab")
        return 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    except Exception as exc:
        if debug:
            raise
        if isinstance(exc, StoreError):
            err.print(f"[red]error:[/] {_one_line(exc)}", soft_wrap=True)
            return EXIT_STORE
        if isinstance(exc, sqlite3.Error):
            from .store import default_path

            err.print(f"[red]error:[/] the results store ({default_path()}) is damaged or unreadable: "
                      f"{_one_line(exc)}", soft_wrap=True)
            return EXIT_STORE
        if isinstance(exc, (ValueError, TypeError, KeyError, LookupError, OSError, NoGpuError, CompileError)):
            err.print(f"[red]error:[/] {_one_line(exc)}", soft_wrap=True)
            return EXIT_INPUT
        err.print(f"[red]internal error:[/] {type(exc).__name__}: {_one_line(exc)} (run again with --debug for "
                  "the traceback)", soft_wrap=True)
        return EXIT_INTERNAL


def entry() -> None:  # pragma: no cover - the console script
    sys.exit(main())
