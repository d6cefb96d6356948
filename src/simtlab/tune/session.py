"""`simtlab tune` as a function: search the space a rung declares (`Rung.space`) on this GPU, at one
problem size, resuming from what the store already holds. Every evaluation is a verified ladder row
written to the store by the process that measured it; a configuration whose process was killed (a
timeout) or crashed is stored here with its reason."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..family import Family, Rung
from ..space import Space
from .strategies import DEFAULT_STRATEGY
from .tuner import Evaluation, TuneResult, history_from_store, tune, warm_start_from_store

__all__ = ["TuneSettings", "TuneOutcome", "rung_space", "strategy_options", "runnable_at", "completion", "shipped_point",
           "tune_rung"]


@dataclass(frozen=True)
class TuneSettings:
    strategy: str = DEFAULT_STRATEGY
    budget: int = 40  # evaluations for the problem in all, the stored ones included
    time_budget: float | None = None  # stop starting evaluations after this many seconds
    jobs: int = 0  # compiler processes ahead of the GPU (0: CPUs - 1)
    timeout: float = 60.0  # seconds an evaluation may take before its process is killed
    isolate: bool = True  # measure in killable child processes
    gpus: str | None = None  # "all", "0,1", or None for the current GPU
    warm_start: bool = True  # measure first the best configurations stored for other sizes or devices
    seed: int = 0
    fresh: bool = False  # ignore earlier evaluations in the store
    target_ms: float = 150.0  # measured time per evaluation
    profile: bool = True  # model: build the whole space first and give the model each build's static profile


@dataclass
class TuneOutcome:
    rung: Rung
    problem: object
    space: Space
    valid: int  # configurations the space allows and the problem's launch accepts
    history: int  # evaluations taken from the store
    remaining: int  # evaluations this run was allowed
    result: TuneResult
    refused: dict[str, int] | None = None  # configurations the problem's launch refuses: reason -> how many
    profiles: dict | None = None  # Space.key(config) -> its build's StaticProfile (a model search's, tune.static)
    shipped: dict | None = None  # the rung's shipped parameters here as a point of the space (None: not one)

    @property
    def ranked(self) -> list[Evaluation]:
        return sorted((e for e in self.result.evaluations if e.value is not None), key=lambda e: e.value)

    @property
    def failed(self) -> list[Evaluation]:
        return [e for e in self.result.evaluations if e.status in ("failed", "timeout", "crashed")]


def command_batch(workers: int) -> int:
    """How many configurations `simtlab tune` proposes at once: one per compiling process, at
    least 4 (the compilers run ahead of the GPU on a batch). The replay uses the same policy."""
    return max(4, workers)


def rung_space(fam: Family, rung: Rung, max_smem: int) -> Space:
    """The rung's search space for a device with `max_smem` bytes of opt-in shared memory per block,
    or a ValueError naming the rungs that have one."""
    if rung.space is None:
        have = ", ".join(r.name for r in fam.rungs if r.space is not None) or "none"
        raise ValueError(f"{rung.id} declares no search space; {fam.name} rungs with one: {have}")
    return rung.space(max_smem)


def strategy_options(rung: Rung, strategy: str, static: Callable[[dict], object] | None = None) -> dict:
    """What `simtlab tune` gives a strategy for a rung: the cost model gets the rung's features where
    it declares them, and each configuration's static profile (`static`: config -> tune.static's
    StaticProfile) where the search has one. The replays (tune.replay) give the same."""
    if strategy != "model":
        return {}
    return {**({"features": rung.features} if rung.features else {}), **({"static": static} if static else {})}


def runnable_at(rung: Rung, configs: list, problem, device=None, fixed: dict | None = None) -> tuple[list, dict[str, int]]:
    """The configurations whose launch the problem allows, and the others counted by reason: a
    point the rung's geometry refuses at this size (a row its lanes cannot hold, say) would fail
    without touching the GPU, so the search does not spend evaluations on it. Each is checked as it
    would run: the problem's own parameters (size defaults) and the space's fixed ones under it.
    The replays filter their tables the same way."""
    base = {**(rung.size_defaults(problem, device, None) if rung.size_defaults else {}), **(fixed or {})}
    arch = device.arch if device is not None else None
    keep, refused = [], {}
    for c in configs:
        try:
            rung.geometry(rung.params(arch, {**base, **c}), problem, device)
        except ValueError as exc:
            refused[str(exc)] = refused.get(str(exc), 0) + 1
            continue
        keep.append(c)
    return keep, refused


def completion(rung: Rung, space: Space, problem, device=None) -> Callable[[dict], dict]:
    """A configuration completed as it is built and run: the problem's own parameters (element type,
    radius, ...) under it, and the space's fixed ones."""
    base = rung.size_defaults(problem, device, rung.widest_vec) if rung.size_defaults else {}
    return lambda config: {**base, **space.complete(config)}


def shipped_point(rung: Rung, space: Space, problem, device=None) -> dict | None:
    """The parameters the rung ships with for this problem - what a library call or a ladder runs
    where the store has no row for it - as a point of `space`, or None where they are not one (a
    parameter the space fixes set otherwise, a value outside its lists, a restriction broken)."""
    from ..launch import choose_params

    shipped = rung.params(device.arch if device is not None else None,
                          choose_params(rung, problem, device, rung.widest_vec))
    if any(shipped.get(k) != v for k, v in space.fixed.items()) or any(n not in shipped for n in space.names):
        return None
    point = {n: shipped[n] for n in space.names}
    if any(point[n] not in space.params[n] for n in space.names) or space.violations(point):
        return None
    return point


def tune_rung(fam: Family, rung: Rung, size: str, store, device, settings: TuneSettings, command: str,
              sm_clock_mhz: int | None = None, on_start: Callable[[int], None] | None = None,
              on_eval: Callable[[Evaluation], None] | None = None, on_static: Callable[[int], None] | None = None,
              on_static_done: Callable[[], None] | None = None) -> TuneOutcome:
    """Search `rung`'s space at `size` on `device`; `on_start(n)` hears how many evaluations this run
    may make, `on_eval` each one as it is recorded; `on_static(n)` and `on_static_done()` the builds
    of the n configurations the cost model profiles first (tune.static). Raises ValueError for a bad
    strategy, size, rung without a space or GPU list."""
    from ..children import IsolatedEvaluator
    from .strategies import STRATEGIES
    from .worker import Precompiler, gpu_evaluators, ladder_objective, parse_gpus

    if settings.strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {settings.strategy!r}; choose from {', '.join(STRATEGIES)}")
    problem = fam.op().parse_size(size)
    space = rung_space(fam, rung, device.smem_per_block_optin)
    import cupy

    gpu_ids = parse_gpus(settings.gpus, cupy.cuda.runtime.getDeviceCount())
    if len(gpu_ids) > 1 and not settings.isolate:
        raise ValueError("--gpus with more than one GPU measures in child processes: drop --no-isolate")
    configs, refused = runnable_at(rung, space.valid(), problem, device, space.fixed)
    if not configs:
        raise ValueError(f"no configuration of {rung.id}'s space runs {problem.label}: "
                         + "; ".join(f"{n} refused ({r})" for r, n in refused.items()))
    history = []
    if not settings.fresh:
        for config, value in history_from_store(store, fam.name, rung.id, problem.label, device.name):
            if all(k in config for k in space.names) and all(config.get(k) == v for k, v in space.fixed.items()):
                history.append(({k: config[k] for k in space.names}, value))
    seeds = (warm_start_from_store(store, fam.name, rung.id, problem.label, space.names, space.fixed)
             if settings.warm_start else [])
    remaining = max(0, settings.budget - len(history))  # (the budget is the total: the history spent part)
    run_id = store.start_run(command, device, sm_clock_mhz)
    kwargs = dict(family=fam.name, rung=rung.name, size=size, db=str(store.path), run_id=run_id,
                  target_ms=settings.target_ms, fixed=dict(space.fixed))
    if settings.isolate and len(gpu_ids) > 1:
        objective = gpu_evaluators(ladder_objective, kwargs, gpu_ids, settings.timeout)
    elif settings.isolate:
        objective = IsolatedEvaluator(ladder_objective, kwargs, timeout_s=settings.timeout)
    else:
        objective = ladder_objective(**kwargs)

    def record(e: Evaluation) -> None:  # the measuring process stores what it measures; a kill or crash here
        if e.status in ("timeout", "crashed"):
            store.add_result(run_id, family=fam.name, rung=rung.id, stage=rung.stage, params=space.complete(e.config),
                             problem=problem.label, dtype=problem.dtype, status=e.status, error=e.error)
        if on_eval:
            on_eval(e)

    complete = completion(rung, space, problem, device)
    with Precompiler(fam.name, rung.name, device.arch, settings.jobs or None, complete) as compiler:
        try:
            static = profiles = None
            if settings.strategy == "model" and settings.profile and remaining:  # each build's static profile:
                # every configuration compiled before the search (in parallel, cached for its evaluation)
                from .static import profile_space

                if on_static:
                    on_static(len(configs))
                profiles, unbuilt = profile_space(rung, configs, complete, problem, device, compiler,
                                                  on_done=on_static_done)
                configs = [c for c in configs if Space.key(c) in profiles]
                refused = {r: refused.get(r, 0) + unbuilt.get(r, 0) for r in {**refused, **unbuilt}}
                if not configs:
                    raise ValueError(f"no configuration of {rung.id}'s space builds and fits at {problem.label}: "
                                     + "; ".join(f"{n} refused ({r})" for r, n in refused.items()))
                static = lambda c: profiles.get(Space.key(c))  # noqa: E731 (None: stored history outside them)
            if on_start:
                on_start(remaining)
            extra = strategy_options(rung, settings.strategy, static)
            result = tune(configs, objective, settings.strategy, remaining, settings.seed, history, on_eval=record,
                          time_budget_s=settings.time_budget, prefetch=compiler.submit,
                          batch=command_batch(compiler.workers), warm_start=seeds, identity=compiler.identity,
                          **extra)
            shipped = _measure_shipped(rung, space, problem, device, configs, history, result, remaining,
                                       objective[0] if isinstance(objective, list) else objective, record)
        finally:
            for ev in (objective if isinstance(objective, list) else [objective] if settings.isolate else []):
                ev.close()
    return TuneOutcome(rung, problem, space, len(configs), len(history), remaining, result, refused, profiles, shipped)


def _measure_shipped(rung, space, problem, device, configs, history, result, remaining, objective, record):
    """After the search: the shipped configuration measured once (beyond the budget) where neither
    the search nor the store has - the rungs that read the store then run its fastest row, which is
    so never one the search found slower than what they ship, and the table shows what tuning
    gained over it (status "shipped"). Returns the shipped point (None: not a point of the space)."""
    from dataclasses import replace

    from .tuner import _measure

    point = shipped_point(rung, space, problem, device)
    if point is None or not remaining or Space.key(point) not in {Space.key(c) for c in configs}:
        return point
    if Space.key(point) in {Space.key(c) for c, _ in history} | {Space.key(e.config) for e in result.evaluations}:
        return point
    ev = _measure(objective, point)
    ev = replace(ev, status="shipped") if ev.status == "ok" else ev
    record(ev)
    result.evaluations.append(ev)
    return point
