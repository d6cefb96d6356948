"""Commands that need no GPU: the catalog, compiled kernels and what their code says."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from . import app, console, _fail, _target, _Steps, _family, _known_device
from ..catalog import FAMILIES

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

    from ..report.docs import how_to_check

    for f in fams:
        t = Table(title=f"{f.name}: {f.title}  (reference: {f.reference})", title_justify="left", header_style="bold")
        for col in ("#", "rung", "source", "parameters", "lesson"):
            t.add_column(col, overflow="fold")
        for r in f.rungs:
            t.add_row(str(r.stage), r.name, r.source, " ".join(f"{k}={v}" for k, v in r.defaults.items()), r.lesson)
        t.caption = how_to_check(f)  # (report.docs: the family pages say the same)
        t.caption_justify = "left"
        console.print(t)



@app.command("compile")
def compile_cmd(family: str = typer.Argument(..., help="kernel family, e.g. gemm"),
                arch: Optional[str] = typer.Option(None, help="target, e.g. sm_90 (default: this GPU's)"),
                rung: Optional[List[str]] = typer.Option(None, help="only these rungs (name or stage)"),
                size: Optional[str] = typer.Option(None, help="problem used for launch geometry/occupancy"),
                as_json: bool = typer.Option(False, "--json", help="machine-readable output")):
    """Compile every rung through NVRTC and report registers, shared memory, spills, occupancy (no GPU needed)."""
    from ..analyze.static import static_report

    fam = _family(family)
    target, rungs = _target(fam, arch, rung)
    with _Steps(len(rungs or fam.rungs), f"compiling for {target}") as step:
        entries = static_report(fam, target, rungs, size, on_rung=step)
    if as_json:
        print(json.dumps(entries, indent=2, default=str))
    else:
        from ..report.table import static_table

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
    from ..analyze.sass import SassUnavailable
    from ..analyze.static import sass_report

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
        from ..report.table import sass_table

        console.print(sass_table(entries, target))
    if not all(e.get("ok") for e in entries if e.get("variant") != "predicated scalar"):
        raise typer.Exit(1)


@app.command("plan")
def plan_cmd(family: str = typer.Argument(..., help="kernel family, e.g. gemm"),
             gpu: Optional[str] = typer.Option(None, help="plan for this GPU's datasheet: h200, h100, a100, l40s, rtx4090, v100"),
             arch: Optional[str] = typer.Option(None, help="target architecture (default: the GPU's, or this machine's)"),
             size: Optional[str] = typer.Option(None, help="problem size (default: the family's largest default)"),
             as_json: bool = typer.Option(False, "--json", help="machine-readable output")):
    """What each rung would look like on a GPU, with no GPU: resources, occupancy, bytes per FLOP, the roof."""
    from ..analyze.plan import plan
    from ..analyze.roofline import datasheet_ceilings, gpu_spec
    from ..compile import normalise_arch
    from ..device import NoGpuError

    fam = _family(family)
    try:
        spec = gpu_spec(gpu) if gpu else None
        target = normalise_arch(arch or (spec.arch if spec else None))
        problem = fam.op().parse_size(size or fam.default_sizes[-1])
        ceilings = datasheet_ceilings(spec, problem.dtype) if spec else None
        if spec is not None and problem.bytes > spec.memory_gb * 1e9:
            _fail(f"{fam.name} {problem.label} needs {problem.bytes / 1e9:.4g} GB for its operands; the {spec.name} "
                  f"has {spec.memory_gb:.0f} GB")
        result = plan(fam, target, ceilings, size, sms=spec.sms if spec else None)
    except (NoGpuError, ValueError) as exc:
        _fail(f"{exc}" + (" (pass --gpu h200 or --arch sm_90)" if isinstance(exc, NoGpuError) and not gpu and not arch
                          else ""))
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


def _numbers(text: Optional[str], what: str) -> list[int]:
    import re

    if not text:
        return []
    if not re.fullmatch(r"\s*\d+(\s*[,x]\s*\d+)*\s*", text):
        _fail(f"--{what} {text!r}: give whole numbers separated by commas, e.g. 128,4")
    return [int(v) for v in re.split(r"[,x]", text)]


def user_kernel(path: Path, name: str, template: Optional[str], block: Optional[str], shared: int):
    """A Kernel of the user's file, its template arguments and block read from the command line."""
    from ..kernel import Kernel

    if not path.is_file():
        _fail(f"no CUDA source at {path}")
    dims = _numbers(block, "block")
    try:
        return Kernel(path, name, _numbers(template, "template"), block=tuple(dims) if dims else None, shared=shared)
    except (ValueError, TypeError) as exc:
        _fail(f"{path}: {exc}")


def explain_file(path: Path, name: str, arch: Optional[str], template: Optional[str], block: Optional[str],
                 shared: int, as_json: bool) -> None:
    from rich.table import Table

    k = user_kernel(path, name, template, block, shared)
    target, _ = _target(FAMILIES["elementwise"], arch, None)
    page = k.explain(arch=target)
    if as_json:
        print(json.dumps(page, indent=2, default=str))
        return
    t = Table(title=f"{page['kernel']} from {path.name} on {target} (no GPU needed)", title_justify="left",
              header_style="bold")
    t.add_column("")
    t.add_column("", justify="right")
    rows = [("registers a thread", page["registers"]), ("static shared memory B", page["shared_static"]),
            ("spill bytes", page["spill_bytes"]), ("stack frame B", page["stack_frame"]),
            ("largest block", page["max_threads_per_block"]), ("parameter bytes", " ".join(map(str, page["param_sizes"])))]
    if "occupancy" in page:
        rows += [("block", "x".join(map(str, page["block"]))), ("blocks an SM", page["blocks_per_sm"]),
                 ("occupancy", f"{page['occupancy']:.0%}"), ("limited by", page["limiter"])]
    sass = page.get("sass")
    if sass:
        rows += [("SASS instructions", sass["instructions"]),
                 ("global / shared accesses", " ".join(f"{k}x{v}" for k, v in sorted(sass["memory"].items()))),
                 ("barriers", sass["barriers"]), ("main loop: instructions, FMA share",
                                                   f"{sass['loop_instructions']}, {sass['loop_fma_share']:.0%}")]
    for key, value in rows:
        t.add_row(key, str(value))
    if "occupancy" not in page:
        t.caption = "pass --block for occupancy"
    console.print(t)


def store_arch(store, device: Optional[str]) -> Optional[str]:
    """The architecture of the store's latest run (of `device`), e.g. sm_90; None if it names none."""
    for r in store.runs(1000):
        if r["compute_capability"] and (device is None or r["device"] == device):
            major, minor = r["compute_capability"].split(".")
            return f"sm_{major}{minor}"
    return None


@app.command("explain")
def explain_cmd(family: str = typer.Argument(..., help="kernel family, or your own .cu file"),
                rung: str = typer.Argument(..., help="rung name or stage (for a file: the kernel's name)"),
                arch: Optional[str] = typer.Option(None, help="target for the static facts (default: this GPU's)"),
                size: Optional[str] = typer.Option(None, help="problem for geometry and intensity"),
                db: Optional[Path] = typer.Option(None, help="results database for measured effects"),
                device_name: Optional[str] = typer.Option(None, "--device", help="only results of this device"),
                template: Optional[str] = typer.Option(None, help="a file's kernel: template arguments, e.g. 128,4"),
                block: Optional[str] = typer.Option(None, help="a file's kernel: the block, e.g. 256 or 16,16 "
                                                               "(for occupancy)"),
                shared: int = typer.Option(0, min=0, help="a file's kernel: dynamic shared memory, bytes"),
                as_json: bool = typer.Option(False, "--json", help="machine-readable output")):
    """Why a rung is as fast as it is: lesson, predicted and measured effect, limiter. Given a .cu
    file and a kernel name instead: its registers, shared memory, spills, occupancy at --block and
    SASS summary, with no GPU (compiled as nvcc would take it)."""
    from ..analyze.explain import explain
    from ..store import Store, default_path

    if family.endswith((".cu", ".cuh")) or Path(family).is_file():
        return explain_file(Path(family), rung, arch, template, block, shared, as_json)

    from ..launch import UnsupportedArchError

    fam = _family(family)
    path = db or default_path()
    store = Store(path, readonly=True) if Path(path).exists() else None
    if db is not None and store is None:
        _fail(f"no results database at {db}")
    if store is not None:
        _known_device(store, device_name)
    if arch is None and store is not None:  # (no GPU needed: the architecture the store's runs were made on)
        arch = store_arch(store, device_name)
    target, (r,) = _target(fam, arch, [rung])
    try:
        page = explain(fam, r, target, store, device_name, size)
    except UnsupportedArchError as exc:
        _fail(str(exc))
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
        title = ("measured, per problem: the best verified result of all runs in the store (its run), then the "
                 "share of the reference in the latest run and the median over the runs"
                 + (" - none measured on this kernel's source as it stands: these are earlier versions'" if
                    page.get("measured_on_earlier_source") else ""))
        m = Table(title=title, title_justify="left", header_style="bold")
        over = f"speedup over {page['previous'].split('/')[-1]}" if page["previous"] else "speedup"
        for col in ("problem", "best ms", "TFLOP/s" if fam.metric == "tflops" else "GB/s", "best % of ref (run)",
                    "latest (run)", "median of runs", over):
            m.add_column(col, justify="left" if col == "problem" else "right")

        def pct(x):
            return f"{x:.1f}" if x is not None else ""

        for prob, v in page["measured"].items():
            value = v["gflops"] / 1e3 if fam.metric == "tflops" else v["gbs"]
            sp = page["speedup_over_previous"].get(prob)
            m.add_row(prob, f"{v['median_ms']:.3f}", f"{value:.2f}", f"{pct(v['pct_of_reference'])} ({v['best_run']})",
                      f"{pct(v['latest_pct'])} ({v['latest_run']})", f"{pct(v['median_pct'])} of {v['runs']}",
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
    from ..analyze.access import ANALYSES, run_analysis

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
