"""NVRTC in a child process, so a compile that runs away can be stopped.

NVRTC cannot be interrupted inside the process that called it; a source that takes minutes (a huge
unrolled loop, a template explosion) would hold a sweep or a `simtlab compile` for as long as it
likes. `compile_source` sends each cold compile here instead: one long-lived child per process,
started on first use (`python -m simtlab.nvrtc_worker`, so no `__main__` guard is needed in the
caller's script), killed and replaced when a compile outlives its limit. Requests and replies are
length-prefixed pickles over the child's stdin and a private copy of its stdout, each reply tagged
with its request's number: a worker whose exchange did not complete (a timeout, Ctrl-C caught in a
notebook, any exception) is killed, never asked again, so no compile can read another's cubin.
"""

from __future__ import annotations

import os
import pickle
import select
import subprocess
import sys
import threading
import time

__all__ = ["CompileTimeout", "CompilerDied", "NvrtcWorker", "nvrtc_compile", "shared_worker"]


class CompileTimeout(TimeoutError):
    """The compile outlived its limit; the compiling process was killed."""


class CompilerDied(RuntimeError):
    """The compiling process ended without an answer (a crash inside NVRTC)."""


def nvrtc_compile(source: str, options: dict, exprs: tuple[str, ...]) -> tuple:
    """One NVRTC compile: ("ok", cubin bytes, {expression: mangled}, log) or ("error", log)."""
    import io

    from cuda.core import Program, ProgramOptions

    log = io.StringIO()
    try:
        obj = Program(source, "c++", options=ProgramOptions(**options)).compile(
            "cubin", name_expressions=exprs, logs=log)
    except Exception as exc:  # cuda-core raises NVRTCError (a RuntimeError) carrying the log
        text = str(exc)
        text = text.split("compilation log:", 1)[-1] if "compilation log:" in text else text
        return ("error", text.strip("\x00 \n"))
    symbols = {e: (m.decode() if isinstance(m, bytes) else m) for e, m in (obj.symbol_mapping or {}).items()}
    return ("ok", bytes(obj.code), symbols, log.getvalue().replace("\x00", ""))


def _send(stream, obj) -> None:
    data = pickle.dumps(obj)
    stream.write(len(data).to_bytes(8, "little") + data)
    stream.flush()


def _read_exact(stream, n: int) -> bytes:
    chunks = []
    while n:
        chunk = stream.read(n)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _serve() -> None:
    from .children import die_with_parent

    die_with_parent()  # (armed before exec too, by the parent: see NvrtcWorker._start)
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything else printed to stdout (by a library) must not corrupt the replies
    requests = sys.stdin.buffer
    while True:
        try:
            size = int.from_bytes(_read_exact(requests, 8), "little")
            tag, source, options, exprs = pickle.loads(_read_exact(requests, size))
        except EOFError:
            return
        try:
            reply = nvrtc_compile(source, options, exprs)
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises it
            reply = ("error", f"{type(exc).__name__}: {exc}")
        _send(replies, (tag, reply))


def _arm_parent_death(parent: int):
    """A preexec function: the child is killed when its parent dies from the moment it exists (not
    only once its Python has started: a parent killed in between left the compiler running), and
    ends at once where the parent is already gone."""
    from .children import die_with_parent

    def arm() -> None:
        die_with_parent()
        if os.getppid() != parent:
            os._exit(1)

    return arm


class NvrtcWorker:
    """A compiling child, used by one thread at a time (compiles are serialised by a lock)."""

    def __init__(self):
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._tag = 0  # the number of the last request sent

    def _start(self) -> subprocess.Popen:
        env = dict(os.environ)
        # the child imports simtlab from wherever this process did (an uninstalled checkout too)
        pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH")) if p)
        return subprocess.Popen([sys.executable, "-m", "simtlab.nvrtc_worker"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                                preexec_fn=_arm_parent_death(os.getpid()) if sys.platform == "linux" else None)

    def kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None

    def compile(self, source: str, options: dict, exprs: tuple[str, ...], timeout: float) -> tuple:
        """One compile's reply (see nvrtc_compile), within `timeout` seconds (math.inf: no limit)."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._proc = self._start()
            proc = self._proc
            self._tag += 1
            try:
                _send(proc.stdin, (self._tag, source, options, exprs))
                deadline = time.monotonic() + timeout
                header = self._read(proc, 8, deadline)
                tag, reply = pickle.loads(self._read(proc, int.from_bytes(header, "little"), deadline))
            except CompileTimeout:  # (an OSError too: caught before the clause below)
                self.kill()
                raise
            except (EOFError, BrokenPipeError, OSError):
                code = proc.poll()
                self.kill()
                raise CompilerDied(f"the compiling process ended without an answer (exit status {code})") from None
            except BaseException:  # an interrupt, anything: its reply would be read by the next compile
                self.kill()
                raise
            if tag != self._tag:  # (cannot happen while every broken exchange kills the worker; never trusted)
                self.kill()
                raise CompilerDied(f"the compiling process answered request {tag} to request {self._tag}")
            return reply

    @staticmethod
    def _read(proc: subprocess.Popen, n: int, deadline: float) -> bytes:
        fd, chunks = proc.stdout.fileno(), []
        while n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], None if left == float("inf") else left)[0]:
                raise CompileTimeout
            chunk = os.read(fd, min(n, 1 << 20))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)


_SHARED: NvrtcWorker | None = None


def shared_worker() -> NvrtcWorker:
    global _SHARED
    if _SHARED is None:
        _SHARED = NvrtcWorker()
    return _SHARED


if __name__ == "__main__":
    _serve()
