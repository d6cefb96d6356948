import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from simtlab.store import SCHEMA_VERSION, Store


def test_round_trip(tmp_path):
    s = Store(tmp_path / "r.db")
    run = s.start_run("simtlab ladder gemm")
    rid = s.add_result(run, family="gemm", rung="gemm/01_naive", stage=1, params={"BLOCK": 16}, problem="7x9x3",
                       dtype="float32", median_ms=1.5, gflops=2.0, status="ok", rel_error=1e-7)
    rows = s.results(run_id=run)
    assert len(rows) == 1 and rows[0]["id"] == rid
    assert rows[0]["params"] == '{"BLOCK": 16}' and rows[0]["median_ms"] == 1.5
    assert s.runs()[0]["command"] == "simtlab ladder gemm"
    assert s.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert s.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with pytest.raises(ValueError, match="unknown result fields"):
        s.add_result(run, family="gemm", rung="x", problem="1", status="ok", speed=3)


class GPU:
    """A device as the store records it."""
    name, compute_capability, driver_version = "GPU", (9, 0), 1

    def as_dict(self):
        return {}


def test_best_returns_fastest_verified(tmp_path):
    s = Store(tmp_path / "r.db")

    run = s.start_run("x", GPU())
    for ms, status in ((2.0, "ok"), (1.0, "wrong"), (1.5, "ok")):
        s.add_result(run, family="gemm", rung="gemm/10_tuned", problem="64x64x64", median_ms=ms, status=status)
    assert s.best("gemm", "gemm/10_tuned", "64x64x64", "GPU")["median_ms"] == 1.5
    assert s.best("gemm", "gemm/10_tuned", "64x64x64", "other") is None


def test_best_takes_rows_of_this_rungs_knobs_and_source_first(tmp_path):
    """The tuner's memory skips rows that set other knobs than the rung has now (a knob removed or
    added since: another kernel), and prefers rows measured on the source as it stands."""
    s = Store(tmp_path / "r.db")

    run = s.start_run("x", GPU())
    rows = ((1.0, {"BM": 64, "XSLICE": 1}, "old"), (1.2, {"BM": 128}, "old"), (1.4, {"BM": 256}, "now"),
            (1.1, {"BM": 32}, None))
    for ms, params, source in rows:
        s.add_result(run, family="gemm", rung="gemm/10_tuned", problem="64", median_ms=ms, status="ok", params=params,
                     extra={"source": source} if source else None)
    best = lambda **kw: s.best("gemm", "gemm/10_tuned", "64", "GPU", **kw)["median_ms"]  # noqa: E731
    assert best() == 1.0
    assert best(names=("BM",)) == 1.1
    assert best(names=("BM",), source="now") == 1.4
    assert best(names=("BM",), source="never") == 1.1
    assert s.best("gemm", "gemm/10_tuned", "64", "GPU", names=("BN",)) is None
    # explain's figures: one version's rows, or every version's
    assert [r["median_ms"] for r in s.rows_per_problem("gemm", "gemm/10_tuned", "GPU", source="old")["64"]] == [1.0, 1.2]
    assert len(s.rows_per_problem("gemm", "gemm/10_tuned", "GPU")["64"]) == 4
    assert s.rows_per_problem("gemm", "gemm/10_tuned", "GPU", source="never") == {}


def test_newer_schema_is_refused(tmp_path):
    s = Store(tmp_path / "r.db")
    s.db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    s.close()
    with pytest.raises(RuntimeError, match="schema version"):
        Store(tmp_path / "r.db")


def test_killed_writer_leaves_every_finished_row(tmp_path):
    db = tmp_path / "k.db"
    script = textwrap.dedent(f"""
        import os, signal, sys
        from simtlab.store import Store
        s = Store({str(db)!r})
        run = s.start_run("kill test")
        for i in range(25):
            s.add_result(run, family="gemm", rung="r", problem=str(i), status="ok", median_ms=float(i))
        print("written", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL and "written" in proc.stdout
    s = Store(db)
    assert s.integrity_ok()
    assert [r["problem"] for r in s.results()] == [str(i) for i in range(25)]


def test_two_writers_at_once(tmp_path):
    db = tmp_path / "c.db"
    Store(db).close()
    script = textwrap.dedent(f"""
        import sys
        from simtlab.store import Store
        s = Store({str(db)!r})
        run = s.start_run(sys.argv[1])
        for i in range(50):
            s.add_result(run, family="f", rung=sys.argv[1], problem=str(i), status="ok")
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, name]) for name in ("a", "b")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    rows = Store(db).results()
    assert sorted((r["rung"], int(r["problem"])) for r in rows) == sorted(
        (n, i) for n in "ab" for i in range(50))


def test_merge_copies_runs_once_under_new_ids(tmp_path):
    from simtlab.store import Store

    a, b = Store(tmp_path / "a.db"), Store(tmp_path / "b.db")
    for s, label in ((a, "a"), (b, "b")):
        run = s.start_run(f"ladder {label}")
        for k in range(3):
            s.add_result(run, family="gemm", rung=f"gemm/0{k + 1}_x", stage=k + 1, problem="64x64x64", status="ok",
                         median_ms=float(k + 1), params={"K": k})
    a.close()
    assert b.merge_from(tmp_path / "a.db") == 1
    assert b.merge_from(tmp_path / "a.db") == 0  # already there
    runs = {r["command"]: r["id"] for r in b.runs()}
    assert set(runs) == {"ladder a", "ladder b"} and runs["ladder a"] > runs["ladder b"]
    rows = b.results(run_id=runs["ladder a"])
    assert [r["median_ms"] for r in rows] == [1.0, 2.0, 3.0] and rows[0]["params"] == '{"K": 0}'
    assert b.integrity_ok()


def test_merge_cli_names_a_missing_file(tmp_path):
    from typer.testing import CliRunner

    from simtlab.cli import app

    r = CliRunner().invoke(app, ["merge", str(tmp_path / "nope.db"), "--db", str(tmp_path / "x.db")])
    assert r.exit_code != 0 and "no results database" in r.output


def _write_rows(path: str, worker: int, rows: int) -> None:
    from simtlab.store import Store

    store = Store(path)
    run = store.start_run(f"writer {worker}")
    for i in range(rows):
        store.add_result(run, family="gemm", rung=f"r{worker}", problem=str(i), status="ok", median_ms=1.0)
    store.close()


def test_eight_writers_creating_one_store_lose_nothing(tmp_path):
    """Eight processes open a store that does not exist yet, all at once, and write: every row
    arrives (the change to WAL is retried while another process holds the lock)."""
    import multiprocessing

    path = str(tmp_path / "new.db")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_write_rows, args=(path, w, 20)) for w in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * 8
    store = Store(path, readonly=True)
    assert len(store.runs(100)) == 8 and len(store.results(limit=1000)) == 160
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_store_in_a_read_only_folder_is_read(tmp_path, monkeypatch):
    """A WAL store whose folder the reader cannot write (the committed stores, a shared mount):
    read through immutable=1 when mode=ro cannot keep its shared-memory file beside it. Root
    writes anywhere, so as root mode=ro is made to fail as it does for a user there."""
    import sqlite3

    folder = tmp_path / "shipped"
    folder.mkdir()
    path = folder / "results.db"
    _write_rows(str(path), 0, 3)
    path.chmod(0o444)
    folder.chmod(0o555)
    if os.geteuid() == 0:
        real = sqlite3.connect

        def connect(target, *args, **kwargs):
            if "mode=ro" in str(target):
                raise sqlite3.OperationalError("unable to open database file")
            return real(target, *args, **kwargs)

        monkeypatch.setattr(sqlite3, "connect", connect)
    try:
        store = Store(path, readonly=True)
        assert len(store.runs()) == 1 and len(store.results(limit=10)) == 3
        store.close()
        assert sorted(p.name for p in folder.iterdir()) == ["results.db"]  # the reader left nothing beside it
    finally:
        folder.chmod(0o755)


def test_readers_write_nothing_and_foreign_files_are_refused(tmp_path):
    import sqlite3

    from simtlab.store import StoreError

    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    with pytest.raises(StoreError, match="is empty: a writer"):
        Store(empty, readonly=True)
    assert empty.stat().st_size == 0  # a read command stamped nothing on it
    Store(empty).close()  # a writer initialises it
    assert Store(empty, readonly=True).results() == []
    foreign = tmp_path / "other.db"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE notes (x)")
    for readonly in (True, False):
        with pytest.raises(StoreError, match="not a simtlab results store \\(its tables: notes\\)"):
            Store(foreign, readonly=readonly)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"\x13" * 4096)
    with pytest.raises(StoreError, match="junk.db is damaged: file is not a database"):  # (named, not a bare sqlite3 error)
        Store(junk, readonly=True)


def _two_runs(path):
    store = Store(path)
    for label in ("a", "b"):
        run = store.start_run(f"ladder {label}")
        for k in range(3):
            store.add_result(run, family="gemm", rung=f"gemm/0{k + 1}_x", stage=k + 1, problem="64x64x64",
                             status="ok", median_ms=float(k + 1), params={"K": k}, extra={"sm_mhz": 1980})
    return store


def test_results_as_text_read_back_equal_and_merge(tmp_path):
    """A store written as JSON Lines (what the repository commits) reads back row for row, opens
    only for reading, and merges into a database like a database does."""
    from simtlab.store import StoreError

    store = _two_runs(tmp_path / "a.db")
    assert store.write_text(tmp_path / "a.jsonl") == 6
    text = (tmp_path / "a.jsonl").read_text().splitlines()
    assert len(text) == 8 and text[0].startswith('{"run": ') and text[2].startswith('{"result": ')
    back = Store(tmp_path / "a.jsonl", readonly=True)
    assert back.runs() == store.runs() and back.results() == store.results()
    assert back.best("gemm", "gemm/01_x", "64x64x64", None) is None  # (no device recorded: still answers)
    with pytest.raises(StoreError, match="is read, not written"):
        Store(tmp_path / "a.jsonl")
    merged = Store(tmp_path / "m.db")
    assert merged.merge_from(tmp_path / "a.jsonl") == 2
    assert [r["median_ms"] for r in merged.results()] == [r["median_ms"] for r in store.results()]
    assert store.write_text(tmp_path / "one.jsonl", [store.runs()[0]["id"]]) == 3


def test_a_damaged_text_store_names_its_line(tmp_path):
    from simtlab.store import StoreError

    _two_runs(tmp_path / "a.db").write_text(tmp_path / "a.jsonl")
    lines = (tmp_path / "a.jsonl").read_text().splitlines()
    (tmp_path / "bad.jsonl").write_text("\n".join(lines[:3] + ['{"result": {"nosuch": 1}}'] + lines[3:]))
    with pytest.raises(StoreError, match=r"bad.jsonl:4 is not a simtlab results line.*nosuch"):
        Store(tmp_path / "bad.jsonl", readonly=True)
    (tmp_path / "junk.jsonl").write_text("not json\n")
    with pytest.raises(StoreError, match="junk.jsonl:1"):
        Store(tmp_path / "junk.jsonl", readonly=True)


def test_the_cli_exports_text_and_reads_it(tmp_path):
    from typer.testing import CliRunner

    from simtlab.cli import app

    _two_runs(tmp_path / "a.db").close()
    out = tmp_path / "a.jsonl"
    r = CliRunner().invoke(app, ["results", "--db", str(tmp_path / "a.db"), "--export", "jsonl", "-o", str(out)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["results", "--db", str(out), "--json"])
    assert r.exit_code == 0 and len(json.loads(r.stdout)) == 6


def test_the_shipped_results_open_as_text():
    """The repository's H200 results are text a machine with no GPU reads."""
    from pathlib import Path

    shipped = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "h200.jsonl"
    store = Store(shipped, readonly=True)
    assert len(store.runs(10**6)) > 100 and store.results(family="gemm_tc", status="ok")


def test_merge_keeps_two_runs_of_one_command_in_one_second_on_two_gpus(tmp_path, monkeypatch):
    """Runs are told apart by the id made at their start, not by their start second, host, command
    and commit: two GPUs running the same command in the same second are two runs."""
    from simtlab import store as store_mod
    from simtlab.store import Store

    monkeypatch.setattr(store_mod, "_now", lambda: "2026-12-05T10:00:00+0000")

    class Gpu:
        def __init__(self, name):
            self.name, self.compute_capability, self.driver_version = name, (9, 0), 1

        def as_dict(self):
            return {"name": self.name}

    a, b = Store(tmp_path / "a.db"), Store(tmp_path / "b.db")
    for s, gpu in ((a, "GPU 0"), (b, "GPU 1")):
        run = s.start_run("ladder gemm", Gpu(gpu))
        for k in range(10):
            s.add_result(run, family="gemm", rung="gemm/01_naive", problem=str(k), status="ok", median_ms=1.0)
    a.close()
    b.close()
    into = Store(tmp_path / "into.db")
    skipped: list[str] = []
    assert into.merge_from(tmp_path / "a.db", skipped) == 1
    assert into.merge_from(tmp_path / "b.db", skipped) == 1 and not skipped
    assert len(into.results()) == 20
    assert into.merge_from(tmp_path / "b.db", skipped) == 0
    assert len(skipped) == 1 and "already here as run 2" in skipped[0]


def test_a_version_1_store_migrates_and_its_runs_merge_once(tmp_path):
    """A store written before runs had an id: opened by a writer it gains the column; its runs are
    recognised by their header and results when merged twice."""
    import sqlite3

    from simtlab.store import _SCHEMA, Store

    old = tmp_path / "old.db"
    db = sqlite3.connect(old)
    db.executescript(_SCHEMA.replace(",\n    uid TEXT                     -- made at the run's start: what `merge` "
                                     "recognises a run by", ""))
    db.execute("PRAGMA user_version=1")
    db.execute("INSERT INTO runs (started, command, host) VALUES ('t', 'ladder', 'h')")
    db.execute("INSERT INTO results (run_id, created, family, rung, problem, status, median_ms) "
               "VALUES (1, 't', 'gemm', 'r', 'p', 'ok', 2.0)")
    db.commit()
    db.close()
    into = Store(tmp_path / "into.db")
    assert into.merge_from(old) == 1 and into.merge_from(old) == 0
    migrated = Store(old)  # a writer: version 2, the column added, the run kept
    assert [r["uid"] for r in migrated.runs()] == [None] and migrated.results()[0]["median_ms"] == 2.0


def test_a_reader_in_a_read_only_folder_sees_rows_still_in_the_log(tmp_path, monkeypatch):
    """A WAL store in a folder the reader cannot write: the rows committed but not yet copied back
    from the log are read too (from a private copy), not silently missed."""
    import os
    import sqlite3

    from simtlab.store import Store

    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "r.db"
    writer = Store(path)
    writer.db.execute("PRAGMA wal_autocheckpoint=0")  # (every row stays in the log)
    run = writer.start_run("ladder")
    for i in range(500):
        writer.add_result(run, family="gemm", rung="r", problem=str(i), status="ok", median_ms=1.0)
    wal = folder / "r.db-wal"
    assert wal.stat().st_size > 0
    saved = {p: p.read_bytes() for p in (path, wal)}
    writer.db.close()  # (closing checkpoints; the saved log stands for one another process holds)
    for p, data in saved.items():
        p.write_bytes(data)
    (folder / "r.db-shm").unlink(missing_ok=True)
    os.chmod(folder, 0o555)
    try:
        if os.access(folder, os.W_OK):  # (root writes anywhere: the folder's refusal as SQLite reports it)
            def refused(uri, path):
                raise sqlite3.OperationalError("attempt to write a readonly database")

            monkeypatch.setattr(Store, "_read_in_place", staticmethod(refused))
        reader = Store(path, readonly=True)
        assert len(reader.results()) == 500
        reader.close()
    finally:
        os.chmod(folder, 0o755)


def test_store_errors_name_the_store_and_the_cause(tmp_path, monkeypatch):
    """SQLite's refusals as one line naming the store given (not $SIMTLAB_DB) and what is wrong: a
    read-only file, a full disk and a lock are told apart from damage."""
    import sqlite3

    from simtlab.store import StoreError, store_error

    given = tmp_path / "given.db"
    monkeypatch.setenv("SIMTLAB_DB", str(tmp_path / "elsewhere.db"))
    for text, says in (("attempt to write a readonly database", "is read-only"),
                       ("database or disk is full", "the disk is full"), ("database is locked", "is locked"),
                       ("database disk image is malformed", "is damaged")):
        err = store_error(given, sqlite3.OperationalError(text))
        assert isinstance(err, StoreError) and str(given) in str(err) and says in str(err) and err.path == given
    store = Store(given)
    store.close()
    import os

    os.chmod(given, 0o444)
    try:
        writer = Store(given)
        if os.access(given, os.W_OK):  # (root writes read-only files: SQLite's refusal stands in)
            monkeypatch.setattr(type(writer.db), "execute", lambda self, *a: (_ for _ in ()).throw(
                store_error(given, sqlite3.OperationalError("attempt to write a readonly database"))))
        with pytest.raises(StoreError, match=f"{given} is read-only"):
            writer.start_run("ladder")
    finally:
        os.chmod(given, 0o644)


def test_merge_blames_the_store_it_writes_into(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from simtlab import store as store_mod
    from simtlab.cli import main

    src = Store(tmp_path / "src.db")
    src.start_run("ladder")
    src.close()
    dest = tmp_path / "dest.db"
    Store(dest).close()

    def full(self, *a, **k):
        raise store_mod.store_error(dest, __import__("sqlite3").OperationalError("database or disk is full"))

    monkeypatch.setattr(Store, "_same_run", full)
    del CliRunner
    rc = main(["merge", str(tmp_path / "src.db"), "--db", str(dest)])
    assert rc != 0


def test_a_merge_commits_run_by_run_so_writers_beside_it_wait_little(tmp_path):
    """A long merge holds the write lock one run at a time (a writer waits for one run's copy, not
    the whole merge), and each run arrives whole."""
    import threading

    from simtlab.store import Store

    src = Store(tmp_path / "src.db")
    for k in range(30):
        run = src.start_run(f"ladder {k}")
        for i in range(300):
            src.add_result(run, family="gemm", rung="r", problem=str(i), status="ok", median_ms=1.0)
    src.close()
    into = Store(tmp_path / "into.db")
    transactions = []
    real_tx = into._tx

    def counted():
        transactions.append(1)
        return real_tx()

    into._tx = counted
    errors = []

    def writer():
        w = Store(tmp_path / "into.db")
        w.db.execute("PRAGMA busy_timeout=2000")
        try:
            for i in range(40):
                w.add_result(w.start_run(f"beside {i}"), family="gemm", rung="w", problem="1", status="ok")
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
        w.close()

    t = threading.Thread(target=writer)
    t.start()
    assert into.merge_from(tmp_path / "src.db") == 30
    t.join()
    assert not errors and len(transactions) == 30
    assert all(len(into.results(run_id=r["id"])) in (300, 1) for r in into.runs(limit=1000))
