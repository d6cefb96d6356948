"""A ladder run: for each problem size, time the references, then compile,
verify and time every rung, writing each row to the store as soon as it
exists. A rung that fails to compile, launch or verify is recorded with its
reason and skipped; the sweep goes on."""

from __future__ import annotations

import contextlib
import gc
import random
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Callable, Iterable, Mapping, Sequence

from .api_calls import api_references
from .bench import Timing, time_gpu
from .catalog import Family, Rung
from .compile import CompileError
from .launch import LaunchError, build, choose_params, rung_source, runner, unsupported_reason
from .store import Store
from .tools.clock_log import ClockLog
from .verify import Verdict, compare

__all__ = ["Row", "run_ladder", "run_ladder_isolated", "LadderOptions", "store_row"]


@dataclass
class Row:
    family: str
    problem: str
    name: str  # rung id or reference name
    stage: int | None
    status: str
    lesson: str = ""
    params: dict = field(default_factory=dict)
    median_ms: float | None = None
    spread: float | None = None
    reps: int | None = None
    gflops: float | None = None
    gbs: float | None = None
    pct_of_reference: float | None = None
    rel_error: float | None = None
    tolerance: float | None = None
    registers: int | None = None
    shared_bytes: int | None = None
    spill_bytes: int | None = None
    occupancy: float | None = None
    limiter: str | None = None
    error: str | None = None
    sm_mhz: float | None = None  # median SM clock while it was timed (NVML)
    source: str | None = None  # the digest of the rung's kernel source it measured (launch.rung_source)
    watts: float | None = None  # mean board power then, where NVML reads it instantaneously (its 1 s
    # average lags a timing shorter than that); tables show it only for timings that kept the GPU
    # busy (clock_log.sustained)

    @property
    def is_reference(self) -> bool:
        return self.stage is None

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class LadderOptions:
    alpha: float = 1.0
    beta: float = 0.0
    seed: int | None = None  # None: fresh random inputs every check
    target_ms: float = 400.0  # measured time per kernel and size
    max_reps: int = 200
    verify: bool = True
    overrides: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # rung name -> params
    clocks: bool = True  # sample the SM clock and power while timing (NVML, where present)
    # rungs that read the store (Rung.from_store: what `simtlab tune` found) take its fastest verified
    # row for the device and problem; False: every rung at its shipped parameters
    stored: bool = True


def _free_gpu_memory() -> None:
    import cupy

    gc.collect()
    cupy.get_default_memory_pool().free_all_blocks()


def _check(ws, run: Callable[[], None], tol: float) -> Verdict:
    import cupy

    run()  # first call outside the check: lazy loading, autotuning
    ws.poison()
    run()
    cupy.cuda.get_current_stream().synchronize()
    return compare(ws.output(), ws.expected(), tol)


def _short(exc: BaseException, limit: int = 400) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_oom(exc: BaseException) -> bool:
    import cupy

    return isinstance(exc, (cupy.cuda.memory.OutOfMemoryError, MemoryError))


def _oom_message(problem, detail: str) -> str:
    """Out of memory, named: what the problem moves and what the device has free (called once the
    row's buffers are released)."""
    import cupy

    free, total = cupy.cuda.runtime.memGetInfo()
    return (f"out of GPU memory for {problem.label} (its inputs and outputs are about {problem.bytes / 2**30:.1f} GiB; "
            f"{free / 2**30:.1f} GiB of {total / 2**30:.1f} GiB free after releasing this row): {detail}")


def _release(row: Row, problem, oom: str | None) -> None:
    """After a row: give the pool's blocks back, then name an out-of-memory failure with what
    the device has free once they are."""
    _free_gpu_memory()
    if oom:
        row.status, row.error = "out-of-memory", _oom_message(problem, oom)


def _seed(opts: LadderOptions) -> int:
    return opts.seed if opts.seed is not None else random.SystemRandom().randrange(2**31)


def _measure(row: Row, problem, ws, run, tol: float | None, opts: LadderOptions,
             clocks: ClockLog | None = None) -> Timing | None:
    """Verify (when `tol` is given) then time; fills `row`. Returns None if the result was wrong."""
    if tol is not None and opts.verify:
        verdict = _check(ws, run, tol)
        row.rel_error = verdict.rel_error if verdict.rel_error != float("inf") else None
        row.tolerance = verdict.tolerance
        if not verdict.ok:
            row.status, row.error = "wrong", verdict.reason
            return None  # a wrong answer never gets a speed
    start = time.time()
    timing = time_gpu(run, target_ms=opts.target_ms, max_reps=opts.max_reps)
    if clocks is not None:
        c = clocks.summary(start, time.time())
        row.sm_mhz = c["sm_mhz"]
        if clocks.power_source == "instant":
            row.watts = c["watts"]
    row.median_ms, row.spread, row.reps = timing.median_ms, timing.spread, timing.reps
    row.gflops = problem.flops / (timing.median_ms * 1e-3) / 1e9
    row.gbs = problem.bytes / (timing.median_ms * 1e-3) / 1e9
    return timing


def store_row(store: Store, run_id: int, row: Row, dtype: str | None, ref_name: str | None) -> None:
    store.add_result(run_id, family=row.family, rung=row.name, stage=row.stage, params=row.params,
                     problem=row.problem, dtype=dtype, median_ms=row.median_ms,
                     spread=row.spread, reps=row.reps, gflops=row.gflops, gbs=row.gbs,
                     pct_of_reference=row.pct_of_reference, reference=ref_name, rel_error=row.rel_error,
                     tolerance=row.tolerance, status=row.status, error=row.error, registers=row.registers,
                     shared_bytes=row.shared_bytes, spill_bytes=row.spill_bytes, occupancy=row.occupancy,
                     extra={"limiter": row.limiter, "sm_mhz": row.sm_mhz, "watts_instant": row.watts,
                            **({"source": row.source} if row.source else {})})


def ladder_params(rung: Rung, problem, device, vec: bool | None, store: Store | None, opts: LadderOptions):
    """A rung's parameters in a ladder: those the options set for it (a sweep's point), else the
    store's fastest verified row for the device and problem where the rung reads the store and
    `opts.stored`, else its size defaults."""
    return choose_params(rung, problem, device, vec, store if opts.stored else None, opts.overrides.get(rung.name))


def run_ladder(
    fam: Family,
    sizes: Iterable[str],
    rungs: Iterable[Rung] | None = None,
    store: Store | None = None,
    run_id: int | None = None,
    opts: LadderOptions = LadderOptions(),
    on_row: Callable[[Row], None] | None = None,
    on_step: Callable[[str], None] | None = None,
    reference_cache: dict | None = None,
) -> list[Row]:
    """Rows for every (size, reference) and (size, rung). `reference_cache` (problem label ->
    (ms, name), or None where no reference gave a time) lets repeated calls, e.g. a parameter
    sweep, time the references once."""
    from .device import device_info

    device = device_info()
    op = fam.op()
    rungs = list(rungs) if rungs is not None else list(fam.rungs)
    rows: list[Row] = []

    def emit(row: Row, dtype: str | None, ref_name: str | None) -> None:
        rows.append(row)
        if store is not None and run_id is not None:
            store_row(store, run_id, row, dtype, ref_name)
        if on_row:
            on_row(row)

    stack = contextlib.ExitStack()
    clocks = stack.enter_context(ClockLog()) if opts.clocks else None
    with stack:
        for size in sizes:
            problem = op.parse_size(size, alpha=opts.alpha, beta=opts.beta)
            ref_ms: float | None = None
            ref_name: str | None = None
            # a label in the cache was timed before (None: no reference gave a time then)
            timed_before = reference_cache is not None and problem.label in reference_cache
            cached = reference_cache.get(problem.label) if timed_before else None
            if cached:
                ref_ms, ref_name = cached
            for ref in ([] if timed_before else op.references() + api_references(fam.name)):
                if ref.applies is not None and not ref.applies(problem):
                    continue
                if on_step:
                    on_step(f"{problem.label} {ref.name}")
                row = Row(fam.name, problem.label, ref.name, None, "reference")
                if ref.supports is not None and not ref.supports(device.compute_capability):
                    row.status, row.error = "unsupported", f"does not run on {device.arch}"
                    emit(row, problem.dtype, ref_name)
                    continue
                oom = None
                try:
                    ws = op.workspace(problem, _seed(opts))
                    tol = op.tolerance(problem, ws) if ref.verifiable else None
                    timing = _measure(row, problem, ws, ref.make(ws), tol, opts, clocks)
                    if timing and row.status == "reference" and ref_ms is None:
                        ref_ms, ref_name = timing.median_ms, ref.name
                    if row.status == "reference" and ref_ms:
                        row.pct_of_reference = 100.0 * ref_ms / timing.median_ms
                except Exception as exc:  # a missing library or a failing reference is reported, not fatal
                    row.status, row.error = "error", _short(exc)
                    oom = _short(exc, 200) if _is_oom(exc) else None
                ws = None  # (dropped before the pool is emptied)
                _release(row, problem, oom)
                emit(row, problem.dtype, ref_name)
            if reference_cache is not None:
                reference_cache[problem.label] = (ref_ms, ref_name) if ref_ms else None

            for rung in rungs:
                if on_step:
                    on_step(f"{problem.label} {rung.id}")
                row = Row(fam.name, problem.label, rung.id, rung.stage, "ok", lesson=rung.lesson, source=rung_source(rung))
                oom = None
                try:
                    if not rung.supports(device.compute_capability):
                        row.status = "unsupported"
                        row.error = f"needs {rung.requirement}, device is {device.arch}"
                        emit(row, problem.dtype, ref_name)
                        continue
                    reason = unsupported_reason(rung, problem)
                    if reason:
                        row.status, row.error = "unsupported", reason
                        emit(row, problem.dtype, ref_name)
                        continue
                    ws = op.workspace(problem, _seed(opts))
                    vec = ws.vec_ok() if rung.vec_variant else None
                    params = ladder_params(rung, problem, device, vec, store, opts)
                    inst = build(rung, params, device.arch)
                    row.params = inst.params
                    launch = inst.geometry(problem, device)
                    res = inst.resources(vec)
                    occ = inst.occupancy(launch, vec)
                    row.registers, row.spill_bytes = res.registers, res.spill_bytes
                    row.shared_bytes = res.shared_static + launch.shared
                    row.occupancy, row.limiter = occ.occupancy, occ.limiter
                    run = runner(inst, problem, ws, vec, device)
                    timing = _measure(row, problem, ws, run, op.tolerance(problem, ws), opts, clocks)
                    if timing and ref_ms:
                        row.pct_of_reference = 100.0 * ref_ms / timing.median_ms
                except CompileError as exc:
                    row.status, row.error = "compile-error", _short(exc)
                except LaunchError as exc:
                    row.status, row.error = "launch-error", _short(exc)
                except Exception as exc:
                    row.status, row.error = "error", _short(exc)
                    oom = _short(exc, 200) if _is_oom(exc) else None
                ws = None  # (dropped before the pool is emptied)
                _release(row, problem, oom)
                emit(row, problem.dtype, ref_name)
    return rows


def ladder_child(family: str, db: str | None, run_id: int | None, opts: LadderOptions) -> Callable[[dict], tuple]:
    """The measuring side of `run_ladder_isolated`, built once in the child: one request measures
    one size's references, or one rung at one size against references timed before; its rows go to
    the store from here and back to the parent."""
    from .catalog import family as get_family

    fam = get_family(family)
    store = Store(db) if db is not None else None

    def measure(request: dict) -> tuple[list[Row], dict]:
        refs = dict(request["refs"] or {})
        rungs = [fam.rung(name) for name in request["rungs"]]
        # (a request may carry its own parameters for its rungs: one point of a sweep)
        asked = replace(opts, overrides=request["overrides"]) if request.get("overrides") else opts
        rows = run_ladder(fam, [request["size"]], rungs, store, run_id, asked, reference_cache=refs)
        return rows, refs

    return measure


def run_ladder_isolated(
    fam: Family,
    sizes: Iterable[str],
    rungs: Iterable[Rung] | None = None,
    store: Store | None = None,
    run_id: int | None = None,
    opts: LadderOptions = LadderOptions(),
    on_row: Callable[[Row], None] | None = None,
    on_step: Callable[[str], None] | None = None,
    timeout_s: float = 300.0,
    child: Callable[[dict], tuple] | None = None,
    points: Sequence[Mapping[str, int]] | None = None,
) -> list[Row]:
    """`run_ladder`, with each size's references and each rung measured in a child process: a rung
    that hangs past `timeout_s` (compile, verify and timing together) or ends in a sticky CUDA error
    (an illegal address) costs that rung only. Its row is stored with the reason and a fresh child
    measures the next one. The child starts once (about the cost of importing CuPy and creating a
    context) and is replaced only after such a failure. `points`: each rung measured once at each of
    these parameter sets (a sweep), the references once a size. `child` stands in for the measuring process
    (an IsolatedEvaluator over `ladder_child`, or anything callable with its `reset()`)."""
    from .children import EvaluationFailed, EvaluationTimeout, IsolatedEvaluator, is_sticky

    op = fam.op()
    rungs = list(rungs) if rungs is not None else list(fam.rungs)
    owned = child is None
    if owned:
        child = IsolatedEvaluator(ladder_child, {
            "family": fam.name, "db": str(store.path) if store is not None else None, "run_id": run_id,
            "opts": opts}, timeout_s=timeout_s)
    rows: list[Row] = []

    def ask(request: dict, failed: Row, dtype: str | None, ref_name: str | None) -> dict:
        """Rows from the child, or `failed` (stored here) with the reason it gave none."""
        try:
            got, refs = child(request)
        except (EvaluationFailed, EvaluationTimeout) as exc:
            failed.status = "timeout" if isinstance(exc, EvaluationTimeout) else "error"
            failed.error = _short(exc)
            got, refs = [failed], request["refs"] or {}
            if store is not None and run_id is not None:
                store_row(store, run_id, failed, dtype, ref_name)
        for row in got:
            rows.append(row)
            if on_row:
                on_row(row)
        if any(is_sticky(r.error) for r in got):
            child.reset()  # its context is unusable: the next request gets a fresh process
        return refs

    try:
        for size in sizes:
            problem = op.parse_size(size, alpha=opts.alpha, beta=opts.beta)
            if on_step:
                on_step(f"{problem.label} references")
            refs = ask({"size": size, "rungs": [], "refs": None},
                       Row(fam.name, problem.label, "references", None, "error"), problem.dtype, None)
            refs.setdefault(problem.label, None)  # (timed, or failed: the rungs do not time them again)
            ref_name = refs[problem.label][1] if refs[problem.label] else None
            for rung in rungs:
                for point in points or [None]:
                    if on_step:
                        on_step(f"{problem.label} {rung.id}" + (f" {dict(point)}" if point else ""))
                    request = {"size": size, "rungs": [rung.name], "refs": refs}
                    if point:
                        request["overrides"] = {rung.name: dict(point)}
                    ask(request, Row(fam.name, problem.label, rung.id, rung.stage, "error", lesson=rung.lesson,
                                     params=dict(point or {})), problem.dtype, ref_name)
    finally:
        if owned:
            child.close()
    return rows
