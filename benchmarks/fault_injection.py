"""Fault injection on the results store and the compile cache (CPU, no GPU): killed and concurrent
writers, interrupted compiles and exports, damaged cache entries, merges of look-alike runs,
read-only readers. Prints a table of cases - rows written, rows read back, rows lost, wrong
kernels handed out - and exits 1 if anything was lost or wrong.

    python benchmarks/fault_injection.py [--rounds N]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import signal
import sys
import tempfile
import time
from pathlib import Path


def _writer(path: str, tag: str, rows: int, ready=None) -> None:
    from simtlab.store import Store

    store = Store(path)
    run = store.start_run(f"writer {tag}")
    for i in range(rows):
        store.add_result(run, family="gemm", rung=f"r{tag}", problem=str(i), status="ok", median_ms=1.0)
        if ready is not None and i == 0:
            ready.set()
    store.close()


def _count(path: str, rung: str | None = None) -> int:
    from simtlab.store import Store

    store = Store(path, readonly=True)
    try:
        rows = store.results()
        return len([r for r in rows if rung is None or r["rung"] == rung])
    finally:
        store.close()


def killed_writers(folder: Path, rounds: int) -> tuple[int, int, int]:
    """Writers killed with SIGKILL at random moments: every row they committed is read back (a row
    is committed the moment add_result returns, so 'written' counts the rows read after each kill)."""
    ctx = mp.get_context("fork")
    path = str(folder / "killed.db")
    written = 0
    for k in range(rounds):
        ready = ctx.Event()
        p = ctx.Process(target=_writer, args=(path, f"k{k}", 100_000, ready))
        p.start()
        ready.wait(30)
        time.sleep(0.02 + 0.01 * (k % 5))
        os.kill(p.pid, signal.SIGKILL)
        p.join()
        written += _count(path, f"rk{k}")  # (committed before the kill: all of them must stay)
    return written, _count(path), 0


def concurrent_writers(folder: Path, writers: int, rows: int) -> tuple[int, int, int]:
    ctx = mp.get_context("fork")
    path = str(folder / "concurrent.db")
    procs = [ctx.Process(target=_writer, args=(path, str(w), rows)) for w in range(writers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    return writers * rows, _count(path), 0


def look_alike_runs(folder: Path) -> tuple[int, int, int]:
    """Two runs of one command in the same second on two GPUs, merged: both kept."""
    from simtlab import store as store_mod
    from simtlab.store import Store

    now = store_mod._now
    store_mod._now = lambda: "2026-12-05T10:00:00+0000"
    try:
        for name in ("gpu0", "gpu1"):
            s = Store(folder / f"{name}.db")
            run = s.start_run("ladder gemm")
            for i in range(10):
                s.add_result(run, family="gemm", rung="r", problem=str(i), status="ok", median_ms=1.0)
            s.close()
    finally:
        store_mod._now = now
    into = Store(folder / "merged.db")
    for name in ("gpu0", "gpu1", "gpu0"):  # (the repeat: skipped, nothing doubled)
        into.merge_from(folder / f"{name}.db")
    got = len(into.results())
    into.close()
    return 20, got, 0


def read_only_reader(folder: Path) -> tuple[int, int, int]:
    """A reader that cannot use the store in place (a read-only folder) while rows sit in the log."""
    from simtlab.store import Store

    path = folder / "ro.db"
    w = Store(path)
    w.db.execute("PRAGMA wal_autocheckpoint=0")
    run = w.start_run("ladder")
    for i in range(700):
        w.add_result(run, family="gemm", rung="r", problem=str(i), status="ok", median_ms=1.0)
    saved = {p: p.read_bytes() for p in (path, path.with_name("ro.db-wal"))}
    w.db.close()
    for p, data in saved.items():
        p.write_bytes(data)
    path.with_name("ro.db-shm").unlink(missing_ok=True)
    original = Store.__dict__["_read_in_place"]

    def refused(uri, path):
        import sqlite3

        raise sqlite3.OperationalError("attempt to write a readonly database")

    Store._read_in_place = staticmethod(refused)
    try:
        return 700, _count(str(path)), 0
    finally:
        Store._read_in_place = original


def interrupted_compiles(folder: Path, rounds: int) -> tuple[int, int, int]:
    """Compiles interrupted mid-exchange (Ctrl-C caught in a notebook), each followed by another
    compile: a wrong kernel is one whose module lacks the name it was asked for."""
    os.environ["SIMTLAB_CACHE_DIR"] = str(folder / "cache")
    from simtlab.compile import compile_source
    from simtlab.nvrtc_worker import NvrtcWorker

    real = NvrtcWorker._read
    wrong = 0
    for k in range(rounds):
        calls = []

        def read(proc, n, deadline):
            calls.append(n)
            if len(calls) == 1:
                raise KeyboardInterrupt
            return real(proc, n, deadline)

        NvrtcWorker._read = staticmethod(read)
        try:
            compile_source(f"template <int S> __global__ void bomb{k}(float* x) {{ x[0] = S; }}", "b.cu",
                           [f"bomb{k}<1>"], arch="sm_90")
        except KeyboardInterrupt:
            pass
        finally:
            NvrtcWorker._read = staticmethod(real)
        name = f"axpy{k}<2>"
        cub = compile_source(f"template <int S> __global__ void axpy{k}(float* x) {{ x[0] *= S; }}", "a.cu", [name],
                             arch="sm_90")
        again = compile_source(f"template <int S> __global__ void axpy{k}(float* x) {{ x[0] *= S; }}", "a.cu", [name],
                               arch="sm_90")
        wrong += name not in cub.symbols or name not in again.symbols or not again.from_cache
    return rounds, rounds - wrong, wrong


def damaged_cache(folder: Path) -> tuple[int, int, int]:
    """Entries damaged three ways (garbage cubin, a field missing, a folder in the cubin's place):
    each rebuilt, none handed out wrong."""
    import json

    os.environ["SIMTLAB_CACHE_DIR"] = str(folder / "cache2")
    from simtlab.compile import compile_source

    src = "template <int S> __global__ void k(float* x) { x[0] = S; }"
    wrong = 0
    for how in ("garbage", "field", "folder"):
        first = compile_source(src, "k.cu", ["k<5>"], arch="sm_90")
        meta = first.path.with_suffix(".json")
        if how == "garbage":
            first.path.write_bytes(b"garbage")
        elif how == "field":
            m = json.loads(meta.read_text())
            del m["symbols"]
            meta.write_text(json.dumps(m))
        else:
            first.path.unlink()
            first.path.mkdir()
        again = compile_source(src, "k.cu", ["k<5>"], arch="sm_90")
        wrong += again.from_cache or again.data()[:4] != b"\x7fELF" or "k<5>" not in again.symbols
    return 3, 3 - wrong, wrong


def killed_exports(folder: Path, rounds: int) -> tuple[int, int, int]:
    """Exports killed mid-write: no temporary file survives the next write into the folder."""
    ctx = mp.get_context("fork")
    from simtlab.store import Store

    path = folder / "big.db"
    s = Store(path)
    run = s.start_run("ladder")
    s.db.execute("BEGIN")
    for i in range(20_000):
        s.db.execute("INSERT INTO results (run_id, created, family, rung, problem, status) VALUES (?, 't', 'g', 'r', ?, "
                     "'ok')", (run, str(i)))
    s.db.execute("COMMIT")
    s.close()

    def export():
        Store(path, readonly=True).write_text(folder / "out.jsonl")

    for _ in range(rounds):
        p = ctx.Process(target=export)
        p.start()
        time.sleep(0.05)
        os.kill(p.pid, signal.SIGKILL)
        p.join()
    Store(path, readonly=True).write_text(folder / "out.jsonl")  # (the next export sweeps the killed ones' files)
    left = [p for p in folder.iterdir() if p.name.endswith(".tmp")]
    return 20_000, _count_lines(folder / "out.jsonl") - 1, len(left)


def _count_lines(path: Path) -> int:
    return sum(1 for _ in open(path))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=10, help="kills and interruptions a case")
    args = ap.parse_args()
    cases = {
        "writers killed with SIGKILL": lambda d: killed_writers(d, args.rounds),
        "8 concurrent writers": lambda d: concurrent_writers(d, 8, 200),
        "merge: one command, one second, two GPUs": look_alike_runs,
        "read-only folder, rows in the log": read_only_reader,
        "compiles interrupted mid-exchange": lambda d: interrupted_compiles(d, args.rounds),
        "damaged cache entries": damaged_cache,
        "exports killed mid-write (temp files left)": lambda d: killed_exports(d, max(2, args.rounds // 3)),
    }
    bad = 0
    print(f"{'case':46} {'written':>8} {'read back':>10} {'lost':>6} {'wrong/left':>11}")
    for name, case in cases.items():
        with tempfile.TemporaryDirectory() as d:
            written, read, wrong = case(Path(d))
        lost = max(0, written - read)
        bad += lost + wrong
        print(f"{name:46} {written:8} {read:10} {lost:6} {wrong:11}")
    print("nothing lost, no wrong kernel" if not bad else f"FAILED: {bad} rows lost or wrong")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
