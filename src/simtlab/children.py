"""Child processes that never outlive their parent, and a measuring child that can be killed.

A hung kernel cannot be interrupted and a sticky CUDA error (an illegal address) poisons every later
launch in its process: the tuner and the ladder measure in a spawned child that is killed at a time
limit or after such an error, and a fresh one carries on."""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import traceback
from typing import Any, Callable, Mapping

__all__ = ["die_with_parent", "IsolatedEvaluator", "EvaluationFailed", "EvaluationCrashed", "EvaluationTimeout",
           "STICKY_ERRORS", "is_sticky"]

_SPAWN = mp.get_context("spawn")  # children start clean: no CUDA state inherited from the parent
# CUDA errors after which a process's context is unusable: every later launch in it fails
STICKY_ERRORS = ("illegal memory access", "illegal address", "IllegalAddress", "ILLEGAL_ADDRESS", "misaligned address",
                 "unspecified launch failure", "LAUNCH_FAILED", "illegal instruction", "hardware stack error",
                 "context is destroyed", "CONTEXT_IS_DESTROYED")


def is_sticky(text: str | None) -> bool:
    """Whether an error message is one after which its process's CUDA context is unusable."""
    return bool(text) and any(word in text for word in STICKY_ERRORS)



def die_with_parent() -> None:
    """Ask Linux to kill this process when its parent dies (PR_SET_PDEATHSIG): a `simtlab tune`
    or a compile killed with SIGKILL takes its compiling and measuring children with it instead of
    leaving them blocked on a pipe. Elsewhere a no-op."""
    import ctypes
    import signal

    if sys.platform != "linux":
        return
    try:
        ctypes.CDLL(None).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class EvaluationFailed(RuntimeError):
    """The configuration was measured and rejected (compile error, launch error, wrong result)."""


class EvaluationCrashed(EvaluationFailed):
    """The measuring process died or could not start: nothing was recorded for this configuration."""


class EvaluationTimeout(TimeoutError):
    """The evaluation outlived its limit and its process was killed."""


def _serve(conn, factory: Callable, kwargs: dict, env: dict | None = None) -> None:
    """Child loop: build the objective once (CUDA context, references), then evaluate on request. An
    evaluation that ends in a sticky CUDA error (an illegal address, a launch failure) is reported
    as a fault and the child exits: its context is lost, and the parent starts a fresh one."""
    die_with_parent()
    os.environ.update(env or {})
    try:
        objective = factory(**kwargs)
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
            conn.send(("ok", objective(config)))
        except BaseException as exc:  # noqa: BLE001
            text = f"{type(exc).__name__}: {exc}"[:400] or traceback.format_exc(limit=1)
            if is_sticky(text):
                conn.send(("fault", text))
                return
            conn.send(("error", text))


class IsolatedEvaluator:
    """A callable objective that runs `factory(**kwargs)(config)` in a spawned child process.
    `factory` is a module-level function (pickled by its name for the child). An evaluation that takes longer than `timeout_s` kills the child
    and raises EvaluationTimeout; the next call starts a new child."""

    def __init__(self, factory: Callable, kwargs: Mapping[str, Any] | None = None, timeout_s: float = 60.0,
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

    def __call__(self, config: Mapping[str, Any]) -> Any:
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

    def reset(self) -> None:
        """Kill the child (its context took a sticky error); the next call starts a fresh one."""
        if self._proc is not None:
            self._kill()
            self.restarts += 1

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
