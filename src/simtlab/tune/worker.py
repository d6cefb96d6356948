"""Keeping a sweep fast and alive: compile candidates in parallel processes while
the GPU measures, and measure in a child process that is killed when an
evaluation outlives its limit (a hung kernel cannot be interrupted any other
way), so the sweep records a timeout and goes on with a fresh child."""

from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Mapping

from ..children import (STICKY_ERRORS, EvaluationCrashed, EvaluationFailed, EvaluationTimeout, IsolatedEvaluator,
                        die_with_parent)
from ..space import Config, Space

__all__ = ["Precompiler", "IsolatedEvaluator", "EvaluationTimeout", "EvaluationFailed", "EvaluationCrashed",
           "ladder_objective", "gpu_evaluators", "parse_gpus", "die_with_parent", "STICKY_ERRORS"]

_SPAWN = mp.get_context("spawn")  # children start clean: no CUDA state inherited from the parent


def compile_workers(jobs: int = 0, cpus: int | None = None) -> int:
    """The compiling processes a tuning run starts: `jobs`, else every CPU (of this host, or a
    host of `cpus`) but one."""
    return jobs or max(1, (cpus or os.cpu_count() or 2) - 1)


def build_identity(family: str, rung: str, params: Mapping[str, int], arch: str) -> str:
    """Build one configuration into the shared on-disk cache; its compiled code's identity back (what
    `simtlab tune` measures once, and benchmarks/table_static.py records for the replays)."""
    from ..catalog import family as get_family
    from ..hw.resources import code_identity
    from ..launch import build

    return code_identity(build(get_family(family).rung(rung), params, arch).cubin.data())


class Precompiler:
    """NVRTC for upcoming configurations in `workers` processes; the measuring side then finds each
    cubin in the disk cache. A configuration that fails to compile fails again, with its message,
    when it is measured, so errors are reported once, where the evaluation is recorded."""

    def __init__(self, family: str, rung: str, arch: str, workers: int | None = None,
                 complete: Callable[[Config], Config] = dict):
        self.family, self.rung, self.arch, self.complete = family, rung, arch, complete
        self.workers = compile_workers(workers or 0)
        self._pool = self._new_pool()
        self._futures: dict[tuple, Future] = {}

    def _new_pool(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(self.workers, mp_context=_SPAWN, initializer=die_with_parent)

    def submit(self, configs) -> None:
        for c in configs:
            key = Space.key(c)
            if key in self._futures:
                continue
            args = (build_identity, self.family, self.rung, self.complete(c), self.arch)
            try:
                self._futures[key] = self._pool.submit(*args)
            except BrokenProcessPool:  # a compiler died (NVRTC crashed, or it was killed): the pool is
                # unusable, not the sweep - a fresh one; what the dead one held compiles where it is measured
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = self._new_pool()
                self._futures[key] = self._pool.submit(*args)

    def identity(self, config: Config, timeout: float | None = None) -> str | None:
        """The compiled code's identity of a submitted configuration, once built (None where it was
        not submitted or did not compile)."""
        fut = self._futures.get(Space.key(config))
        if fut is None:
            return None
        try:
            return fut.result(timeout)
        except Exception:  # (the evaluation reports it)
            return None

    def wait(self, config: Config, timeout: float | None = None) -> None:
        """Until a submitted configuration is built (or has failed to)."""
        self.identity(config, timeout)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def ladder_objective(family: str, rung: str, size: str, db: str | None, run_id: int, target_ms: float,
                     fixed: Mapping[str, int] | None = None) -> Callable[[Config], float]:
    """The measuring side of `simtlab tune`: one verified ladder row per configuration, written to
    the store as it finishes; returns its median time (a wrong or failed row raises)."""
    from ..catalog import family as get_family
    from ..ladder import LadderOptions, run_ladder
    from ..store import Store

    fam = get_family(family)
    r = fam.rung(rung)
    store = Store(db)
    refs: dict = {}

    def objective(config: Config) -> float:
        opts = LadderOptions(target_ms=target_ms, overrides={r.name: {**(fixed or {}), **config}})
        row = run_ladder(fam, [size], [r], store, run_id, opts, reference_cache=refs)[-1]
        if row.status != "ok":
            raise EvaluationFailed(f"{row.status}: {row.error}")
        return row.median_ms

    return objective


def parse_gpus(text: str | None, visible: int) -> list[int]:
    """'--gpus' values: None or '' -> [0] (the current GPU), 'all' -> every visible GPU, '0,2' ->
    those (checked against the `visible` count)."""
    if not text:
        return [0]
    if text == "all":
        if visible < 1:
            raise ValueError("--gpus all: no GPU is visible")
        return list(range(visible))
    try:
        ids = [int(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"--gpus {text!r}: use all or a comma-separated list of GPU numbers, e.g. 0,1") from None
    bad = [g for g in ids if not 0 <= g < visible]
    if bad or len(set(ids)) != len(ids):
        raise ValueError(f"--gpus {text!r}: GPUs are 0..{visible - 1}, each at most once")
    return ids


def gpu_evaluators(factory: Callable, kwargs: Mapping[str, Any], gpus: list[int], timeout_s: float) -> list[IsolatedEvaluator]:
    """One measuring child per GPU, each seeing only its GPU (as device 0): `tune` spreads each batch
    over them, and each writes its rows to the shared store itself."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    names = [x.strip() for x in visible.split(",")] if visible else None
    return [IsolatedEvaluator(factory, kwargs, timeout_s=timeout_s,
                              env={"CUDA_VISIBLE_DEVICES": names[g] if names else str(g)}) for g in gpus]
