"""The tuning loop: ask a strategy, evaluate under a budget, record every
evaluation as it finishes, never die on a failing configuration, and skip what
history (an interrupted run, or the store) has already measured."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from ..space import Config, Space
from .strategies import make_strategy


@dataclass(frozen=True)
class Evaluation:
    config: Config
    value: float | None  # median ms; None when it failed
    status: str  # ok | failed (rejected) | timeout | crashed (process died) | history
    error: str = ""
    seconds: float = 0.0


@dataclass
class TuneResult:
    evaluations: list[Evaluation] = field(default_factory=list)

    @property
    def measured(self) -> list[Evaluation]:
        return [e for e in self.evaluations if e.status == "ok"]

    @property
    def best(self) -> Evaluation | None:
        ok = [e for e in self.evaluations if e.value is not None]
        return min(ok, key=lambda e: e.value) if ok else None


def tune(configs: Sequence[Config], objective: Callable[[Config], float] | Sequence[Callable[[Config], float]],
         strategy: str = "model",
         budget: int = 40, seed: int = 0, history: Iterable[tuple[Config, float | None]] = (),
         on_eval: Callable[[Evaluation], None] | None = None, time_budget_s: float | None = None,
         batch: int = 4, prefetch: Callable[[list[Config]], None] | None = None,
         warm_start: Sequence[Config] = (), identity: Callable[[Config], str | None] | None = None,
         **strategy_kw) -> TuneResult:
    """Evaluate up to `budget` new configurations (history does not count against it). `objective`
    may be a list (one measuring worker per GPU): each batch is then spread over them.
    `warm_start` configurations (e.g. the best ones on another size or device) are measured first,
    then the strategy takes over, knowing their results. `prefetch` sees each batch before it is
    measured, and the batch after it where the strategy already knows it (brute force, random),
    so compilation can run ahead of measurement. `identity` names a configuration's compiled code
    (None where unknown): one that compiles to the code of a configuration already measured - a
    knob that changes nothing for this problem - takes that time without spending an evaluation
    (status "same code")."""
    workers = list(objective) if isinstance(objective, (list, tuple)) else [objective]
    if not workers:
        raise ValueError("tune needs at least one objective")
    pool = None
    if len(workers) > 1:  # one thread per measuring worker; the GPU work happens in their processes
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(len(workers))
        batch = max(batch, len(workers))
    strat = make_strategy(strategy, configs, seed, **strategy_kw)
    result = TuneResult()
    for config, value in history:
        strat.tell(config, value)
        result.evaluations.append(Evaluation(dict(config), value, "history"))
    valid = {Space.key(c) for c in configs}
    seeds = [dict(k) for k in dict.fromkeys(Space.key(c) for c in warm_start) if k in valid and k not in strat.measured]
    start = time.monotonic()
    spent = 0
    codes: dict[str, tuple] = {}  # compiled code -> the configuration measured (or about to be) for it
    while spent < budget:
        if time_budget_s is not None and time.monotonic() - start > time_budget_s:
            break
        if seeds:
            proposals, seeds = seeds[:batch], seeds[batch:]
        else:
            proposals = strat.ask(batch)
        proposals = [c for c in proposals if Space.key(c) not in strat.measured]
        if not proposals:
            break
        if prefetch:
            prefetch(proposals + strat.lookahead(proposals, batch))
        # a whole batch, cut to what the budget leaves counting only new code: a batch lists its picks
        # most promising first and a configuration that compiles to a measured kernel costs nothing,
        # so a smaller budget runs the first evaluations a larger one would (and a replay's curve
        # read at any budget is the search run at that budget)
        proposals, twins = _take(proposals, budget - spent, identity, codes)
        for ev in _evaluate(proposals, workers, pool):
            strat.tell(ev.config, ev.value)
            result.evaluations.append(ev)
            spent += 1
            if on_eval:
                on_eval(ev)
        for config, twin in twins:  # (each twin measured before or in this batch: its time is known now)
            ev = Evaluation(dict(config), strat.measured[twin], "same code",
                            f"compiles to the same code as {dict(twin)}")
            strat.tell(ev.config, ev.value)
            result.evaluations.append(ev)
            if on_eval:
                on_eval(ev)
    if pool is not None:
        pool.shutdown()
    return result


def _take(proposals: list[Config], room: int, identity: Callable[[Config], str | None] | None,
          codes: dict[str, tuple]) -> tuple[list[Config], list[tuple[Config, tuple]]]:
    """A batch, in order, split into at most `room` configurations to measure and those before the
    cut whose compiled code is that of one measured before or earlier in the batch (each with that
    one's key); what lies after the cut is left pending."""
    fresh, twins = [], []
    for config in proposals:
        code = identity(config) if identity is not None else None
        if code is not None and code in codes:
            twins.append((config, codes[code]))
            continue
        if len(fresh) == room:
            break
        if code is not None:
            codes[code] = Space.key(config)
        fresh.append(config)
    return fresh, twins


def _measure(objective: Callable[[Config], float], config: Config) -> Evaluation:
    t0 = time.monotonic()
    try:
        value, status, error = float(objective(config)), "ok", ""
    except Exception as exc:  # a failing configuration is recorded and skipped
        value, status, error = None, _failure_status(exc), f"{type(exc).__name__}: {exc}"[:300]
    return Evaluation(dict(config), value, status, error, time.monotonic() - t0)


def _evaluate(proposals: list[Config], workers: list, pool) -> Iterable[Evaluation]:
    """One objective: in order. Several (one per GPU): each takes the next configuration as soon as
    it is free; results come back in proposal order, so what is recorded does not depend on timing."""
    if pool is None:
        for config in proposals:
            yield _measure(workers[0], config)
        return
    import queue

    todo: queue.Queue = queue.Queue()
    for i, config in enumerate(proposals):
        todo.put((i, config))
    results: dict[int, Evaluation] = {}

    def work(objective):
        while True:
            try:
                i, config = todo.get_nowait()
            except queue.Empty:
                return
            results[i] = _measure(objective, config)

    for f in [pool.submit(work, w) for w in workers]:
        f.result()
    for i in range(len(proposals)):
        yield results[i]


def _failure_status(exc: Exception) -> str:
    from .worker import EvaluationCrashed

    if isinstance(exc, TimeoutError):
        return "timeout"
    return "crashed" if isinstance(exc, EvaluationCrashed) else "failed"


def warm_start_from_store(store, family: str, rung_id: str, problem: str, names, fixed=None, k: int = 8):
    """The `k` fastest distinct configurations (by FLOP/s, so sizes compare) this rung reached on
    other problems or devices: where a new search starts."""
    import json

    rows = store.fastest_params_elsewhere(family, rung_id, problem)
    out = []
    for params, _ in rows:
        c = json.loads(params)
        if all(n in c for n in names) and all(c.get(key) == v for key, v in (fixed or {}).items()):
            out.append({n: c[n] for n in names})
        if len(out) >= k:
            break
    return out


def _faulted(status: str, error: str | None) -> bool:
    """A failure of the process rather than of the configuration: killed on a timeout, crashed, or a
    sticky CUDA error that may have been left by an earlier configuration in the same process."""
    from .worker import STICKY_ERRORS

    return status in ("timeout", "crashed") or any(w in (error or "") for w in STICKY_ERRORS)


def history_from_store(store, family: str, rung_id: str, problem: str, device: str | None):
    """Earlier evaluations of a rung on a problem (and device) as (params, ms or None). A
    configuration whose only record is one fault (timeout, crash, sticky CUDA error) is left out,
    so a resumed search tries it once more; a second fault, or any other failure, stands."""
    import json

    seen, faults = {}, {}
    for params, ms, status, error in store.evaluations(family, rung_id, problem, device):
        config = json.loads(params)
        key = Space.key(config)
        if status != "ok" and _faulted(status, error):
            faults[key] = faults.get(key, 0) + 1
            if faults[key] < 2:
                seen.setdefault(key, None)
                continue
        value = ms if status == "ok" else None
        if seen.get(key) is None or (value is not None and (seen[key][1] is None or value < seen[key][1])):
            seen[key] = (config, value)
    return [v for v in seen.values() if v is not None]
