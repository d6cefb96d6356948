"""Keeping a sweep fast and alive: compile candidates in parallel processes while
the GPU measures, and measure in a child process that is killed when an
evaluation outlives its limit (a hung kernel cannot be interrupted any other
way), so the sweep records a timeout and goes on with a fresh child."""

from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import traceback
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, Callable, Mapping

from .space import Config, Space

__all__ = ["Precompiler", "IsolatedEvaluator", "EvaluationTimeout", "EvaluationFailed", "EvaluationCrashed",
           "ladder_objective", "gpu_evaluators", "parse_gpus", "die_with_parent", "STICKY_ERRORS"]

_SPAWN = mp.get_context("spawn")  # children start clean: no CUDA state inherited from the parent
# CUDA errors after which a process's context is unusable: every later launch in it fails
STICKY_ERRORS = ("illegal memory access", "illegal address", "IllegalAddress", "ILLEGAL_ADDRESS", "misaligned address",
                 "unspecified launch failure", "LAUNCH_FAILED", "illegal instruction", "hardware stack error",
                 "context is destroyed", "CONTEXT_IS_DESTROYED")


def die_with_parent() -> None:
    """Ask Linux to kill this process when its parent dies (PR_SET_PDEATHSIG): a `simtlab tune`
    killed with SIGKILL takes its compiling and measuring children with it instead of leaving them
    blocked on a pipe. Elsewhere a no-op."""
    import ctypes
    import signal
    import sys

    if sys.platform != "linux":
        return
    try:
        ctypes.CDLL(None).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _compile(family: str, rung: str, params: Mapping[str, int], arch: str) -> str:
    from ..catalog import family as get_family
    from ..launch import build

    build(get_family(family).rung(rung), params, arch)  # lands in the shared on-disk cache
    return "ok"


class Precompiler:
    """NVRTC for upcoming configurations in `workers` processes; the measuring side then finds each
    cubin in the disk cache. A configuration that fails to compile fails again, with its message,
    when it is measured, so errors are reported once, where the evaluation is recorded."""

    def __init__(self, family: str, rung: str, arch: str, workers: int | None = None,
                 complete: Callable[[Config], Config] = dict):
        self.family, self.rung, self.arch, self.complete = family, rung, arch, complete
        self.workers = workers or max(1, (os.cpu_count() or 2) - 1)
        self._pool = ProcessPoolExecutor(self.workers, mp_context=_SPAWN, initializer=die_with_parent)
        self._futures: dict[tuple, Future] = {}

    def submit(self, configs) -> None:
        for c in configs:
            key = Space.key(c)
            if key not in self._futures:
                self._futures[key] = self._pool.submit(_compile, self.family, self.rung, self.complete(c), self.arch)

    def wait(self, config: Config, timeout: float | None = None) -> None:
        fut = self._futures.get(Space.key(config))
        if fut is None:
            return
        try:
            fut.result(timeout)
        except Exception:  # reported by the evaluation itself
            pass

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class EvaluationFailed(RuntimeError):
    """The configuration was measured and rejected (compile error, launch error, wrong result)."""


class EvaluationCrashed(EvaluationFailed):
    """The measuring process died or could not start: nothing was recorded for this configuration."""


class EvaluationTimeout(TimeoutError):
    """The evaluation outlived its limit and its process was killed."""


def _serve(conn, factory: str, kwargs: dict, env: dict | None = None) -> None:
    """Child loop: build the objective once (CUDA context, references), then evaluate on request. An
    evaluation that ends in a sticky CUDA error (an illegal address, a launch failure) is reported
    as a fault and the child exits: its context is lost, and the parent starts a fresh one."""
    die_with_parent()
    os.environ.update(env or {})
    module, name = factory.split(":")
    try:
        objective = getattr(importlib.import_module(module), name)(**kwargs)
    except BaseException as exc:  # noqa: BLE001 - the parent reports it
        conn.send(("setup", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", None))
    while True:
        try:
            config = conn.recv()
        except EOFError:
            return
        if config is None:
            return
        try:
            conn.send(("ok", float(objective(config))))
        except BaseException as exc:  # noqa: BLE001
            text = f"{type(exc).__name__}: {exc}"[:400] or traceback.format_exc(limit=1)
            if any(word in text for word in STICKY_ERRORS):
                conn.send(("fault", text))
                return
            conn.send(("error", text))


class IsolatedEvaluator:
    """A callable objective that runs `factory(**kwargs)(config)` in a spawned child process.
    `factory` is "module:function". An evaluation that takes longer than `timeout_s` kills the child
    and raises EvaluationTimeout; the next call starts a new child."""

    def __init__(self, factory: str, kwargs: Mapping[str, Any] | None = None, timeout_s: float = 60.0,
                 setup_timeout_s: float = 300.0, env: Mapping[str, str] | None = None):
        self.factory, self.kwargs = factory, dict(kwargs or {})
        self.env = dict(env or {})  # set in the child before it imports anything (CUDA_VISIBLE_DEVICES)
        self.timeout_s, self.setup_timeout_s = timeout_s, setup_timeout_s
        self._proc = None
        self._conn = None
        self.restarts = 0

    def _start(self) -> None:
        parent, child = _SPAWN.Pipe()
        self._proc = _SPAWN.Process(target=_serve, args=(child, self.factory, self.kwargs, self.env), daemon=True)
        self._proc.start()
        child.close()
        self._conn = parent
        if not parent.poll(self.setup_timeout_s):
            self._kill()
            raise EvaluationCrashed(f"the measuring process did not start within {self.setup_timeout_s:.0f} s")
        try:
            kind, detail = parent.recv()
        except EOFError:
            self._kill()
            raise EvaluationCrashed("the measuring process died while starting") from None
        if kind != "ready":
            self._kill()
            raise EvaluationCrashed(f"the measuring process could not start: {detail}")

    def _kill(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            self._proc.kill()
        if self._proc is not None:
            self._proc.join(5)
        self._proc = self._conn = None

    def __call__(self, config: Config) -> float:
        if self._proc is None or not self._proc.is_alive():
            if self._proc is not None:
                self.restarts += 1
            self._start()
        try:
            self._conn.send(dict(config))
        except (BrokenPipeError, OSError):  # it died between two evaluations
            self._kill()
            raise EvaluationCrashed("the measuring process died before this evaluation") from None
        if not self._conn.poll(self.timeout_s):
            self._kill()
            self.restarts += 1
            raise EvaluationTimeout(f"no result within {self.timeout_s:.0f} s: the process was killed")
        try:
            kind, value = self._conn.recv()
        except EOFError:
            code = self._proc.exitcode if self._proc else None
            self._kill()
            raise EvaluationCrashed(f"the measuring process died (exit code {code})") from None
        if kind == "fault":  # (the child has exited: its CUDA context was lost)
            self._kill()
            self.restarts += 1
            raise EvaluationFailed(f"{value} (a sticky CUDA error: the measuring process is restarted)")
        if kind != "ok":
            raise EvaluationFailed(value)
        return value

    def close(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(None)
                self._proc.join(5)
            except (BrokenPipeError, OSError):
                pass
        self._kill()

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


def gpu_evaluators(factory: str, kwargs: Mapping[str, Any], gpus: list[int], timeout_s: float) -> list[IsolatedEvaluator]:
    """One measuring child per GPU, each seeing only its GPU (as device 0): `tune` spreads each batch
    over them, and each writes its rows to the shared store itself."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    names = [x.strip() for x in visible.split(",")] if visible else None
    return [IsolatedEvaluator(factory, kwargs, timeout_s=timeout_s,
                              env={"CUDA_VISIBLE_DEVICES": names[g] if names else str(g)}) for g in gpus]
