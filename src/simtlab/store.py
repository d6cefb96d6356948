"""SQLite results store (stdlib sqlite3, WAL): one row written and committed
the moment each result exists, so a killed run loses at most the evaluation
in flight. `PRAGMA user_version` carries the schema version for migrations."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any, Iterable

from .version import __version__

__all__ = ["Store", "StoreError", "default_path", "SCHEMA_VERSION", "TEXT_SUFFIX", "git_commit"]

SCHEMA_VERSION = 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started TEXT NOT NULL,
    simtlab_version TEXT,
    git_commit TEXT,
    command TEXT,
    host TEXT,
    device TEXT,
    compute_capability TEXT,
    driver INTEGER,
    sm_clock_mhz INTEGER,
    device_json TEXT,
    uid TEXT                     -- made at the run's start: what `merge` recognises a run by
);
CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    created TEXT NOT NULL,
    family TEXT NOT NULL,
    rung TEXT NOT NULL,          -- rung id (family/NN_name) or the reference's name
    stage INTEGER,               -- NULL for references
    params TEXT,                 -- JSON
    problem TEXT NOT NULL,
    dtype TEXT,
    median_ms REAL,
    spread REAL,
    min_ms REAL,
    reps INTEGER,
    gflops REAL,
    gbs REAL,
    pct_of_reference REAL,
    reference TEXT,
    rel_error REAL,
    tolerance REAL,
    status TEXT NOT NULL,        -- ok | wrong | compile-error | launch-error | unsupported | error | reference
    error TEXT,
    registers INTEGER,
    shared_bytes INTEGER,
    spill_bytes INTEGER,
    occupancy REAL,
    extra TEXT                   -- JSON
);
CREATE INDEX IF NOT EXISTS results_by_run ON results(run_id);
CREATE INDEX IF NOT EXISTS results_by_kernel ON results(family, rung, problem);
"""

# version -> SQL taking the previous version to it
_MIGRATIONS: dict[int, str] = {2: "ALTER TABLE runs ADD COLUMN uid TEXT"}


def default_path() -> Path:
    env = os.environ.get("SIMTLAB_DB")
    if env:
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "simtlab" / "results.db"


def git_commit(cwd: Path | None = None) -> str | None:
    """The checkout's commit, or $SIMTLAB_COMMIT where the tree was copied without its .git."""
    if os.environ.get("SIMTLAB_COMMIT"):
        return os.environ["SIMTLAB_COMMIT"]
    try:
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=cwd or Path(__file__).parent,
                             capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def _run_script(db: sqlite3.Connection, script: str) -> None:
    # executescript() would COMMIT the surrounding transaction; run statement by statement instead.
    for stmt in script.split(";"):
        if stmt.strip():
            db.execute(stmt)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def _on_device(device: str | None, args: list) -> str:
    """The clause (and its argument, appended) that keeps a query to one device's runs, if named."""
    if not device:
        return ""
    args.append(device)
    return " AND u.device = ?"


class StoreError(RuntimeError):
    """A file that is not a simtlab results store, or one this reader cannot use as it is. `path`
    names the store; `cause`, where SQLite refused, is its error."""

    def __init__(self, message: str, path: Path | None = None, cause: Exception | None = None):
        super().__init__(message)
        self.path, self.cause = path, cause


def store_error(path: Path, exc: sqlite3.Error) -> StoreError:
    """SQLite's refusal as one line naming the store and the cause a user can act on."""
    text = str(exc)
    low = text.lower()
    if "readonly" in low or "read-only" in low:
        why = "is read-only (the file, or its folder, which SQLite writes its journal in)"
    elif "disk is full" in low or "disk full" in low:
        why = "cannot be written: the disk is full"
    elif "locked" in low or "busy" in low:
        why = "is locked by another process (waited 30 s)"
    elif "malformed" in low or "not a database" in low or "disk i/o" in low:
        why = "is damaged"
    else:
        why = "cannot be used"
    return StoreError(f"the results store {path} {why}: {text}", path, exc)


class _Connection(sqlite3.Connection):
    """A connection whose statements raise StoreError, naming its store and the cause, in place of
    a bare sqlite3 error."""

    store_path: Path = Path("?")

    def execute(self, *args, **kwargs):
        try:
            return super().execute(*args, **kwargs)
        except sqlite3.Error as exc:
            raise store_error(self.store_path, exc) from exc
        except OverflowError:  # (an id or count past SQLite's 64-bit integers: the caller's input)
            raise ValueError(f"a number in {list(args[1]) if len(args) > 1 else args} is beyond SQLite's 64-bit "
                             "integers (run ids are smaller)") from None


def _connect(target: str | Path, path: Path, **kwargs) -> sqlite3.Connection:
    db = sqlite3.connect(target, factory=_Connection, **kwargs)
    db.store_path = path
    return db


_TABLES = {"runs", "results"}
_RETRIES = 100  # opening attempts while another process holds a lock the busy handler does not wait for


def _retrying(step):
    """`step()`, again after a short sleep while SQLite says the database is locked or busy: eight
    processes creating one store at once race for the change to WAL, which does not wait."""
    for attempt in range(_RETRIES):
        try:
            return step()
        except (sqlite3.OperationalError, StoreError) as exc:
            cause = exc.cause if isinstance(exc, StoreError) else exc
            if attempt == _RETRIES - 1 or not any(w in str(cause) for w in ("locked", "busy")):
                raise
            time.sleep(0.05)


class Store:
    """The results store. A writer (the default) creates it where it does not exist, initialises an
    empty file, migrates an older layout and uses WAL; `readonly=True` (the read commands) writes
    nothing and works on a store in a read-only folder. Both refuse, by name, a file that is not a
    simtlab store (StoreError)."""

    def __init__(self, path: str | Path | None = None, readonly: bool = False):
        self.path = Path(path) if path else default_path()
        self.readonly = readonly
        if self.path.is_dir():
            raise StoreError(f"{self.path} is a folder, not a results store")
        if self.path.suffix == TEXT_SUFFIX:  # results as text: read into memory, never written
            if not readonly:
                raise StoreError(f"{self.path} is results as text (JSON Lines), which is read, not written: store "
                                 f"into a database (--db results.db) and `simtlab merge {self.path.name}` into it")
            self.db = _load_text(self.path)
            self.db.row_factory = sqlite3.Row
            return
        if readonly:
            if not self.path.is_file():
                raise StoreError(f"no results store at {self.path}")
            self.db = self._open_readonly()
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                self.db = _connect(self.path, self.path, timeout=30.0, isolation_level=None)
            except sqlite3.Error as exc:
                raise store_error(self.path, exc) from None
            self.db.execute("PRAGMA busy_timeout=30000")
            self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.row_factory = sqlite3.Row
        self._migrate()

    def _open_readonly(self) -> sqlite3.Connection:
        """mode=ro where SQLite can keep its shared-memory file beside the store. Else (a read-only
        folder, which a WAL store's readers need to write in): the file as it lies (immutable=1)
        where no write-ahead log holds rows, and otherwise a private copy of the store and its log,
        so committed rows still in the log are read too (immutable=1 alone would miss them)."""
        uri = self.path.resolve().as_uri()
        try:
            return self._read_in_place(uri, self.path)
        except (sqlite3.OperationalError, StoreError):
            pass
        wal = self.path.with_name(self.path.name + "-wal")
        if not (wal.is_file() and wal.stat().st_size > 0):
            return _connect(f"{uri}?immutable=1", self.path, uri=True, isolation_level=None)
        import shutil
        import tempfile

        self._copy_dir = tempfile.TemporaryDirectory(prefix="simtlab-store-")
        copy = Path(self._copy_dir.name) / self.path.name
        shutil.copyfile(self.path, copy)
        shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
        return _connect(f"{copy.as_uri()}?mode=ro", self.path, uri=True, timeout=30.0, isolation_level=None)

    @staticmethod
    def _read_in_place(uri: str, path: Path) -> sqlite3.Connection:
        db = _connect(f"{uri}?mode=ro", path, uri=True, timeout=30.0, isolation_level=None)
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return db

    def _state(self) -> tuple[int, set[str]]:
        """The schema version and the tables, read in one statement: one snapshot of the file (read
        apart, another process creating the store can commit between them, and its tables are seen
        without its version)."""
        rows = self.db.execute("SELECT v.user_version, m.name FROM pragma_user_version AS v "
                               "LEFT JOIN sqlite_master AS m ON m.type = 'table'").fetchall()
        return rows[0][0], {r[1] for r in rows if r[1] is not None}

    def _migrate(self) -> None:
        version, tables = _retrying(self._state)
        if version > SCHEMA_VERSION:
            raise StoreError(f"{self.path} has schema version {version}; this simtlab knows up to {SCHEMA_VERSION}")
        if version == 0 and tables:
            raise StoreError(f"{self.path} is an SQLite database but not a simtlab results store (its tables: "
                             f"{', '.join(sorted(tables))})")
        if version == SCHEMA_VERSION:
            if not _TABLES <= tables:
                raise StoreError(f"{self.path} claims simtlab's schema version but lacks its tables "
                                 f"({', '.join(sorted(_TABLES - tables))})")
            return  # current: opening writes nothing
        if self.readonly:
            if version == 0:
                raise StoreError(f"{self.path} is empty: a writer (`simtlab ladder`, `simtlab merge`) initialises it "
                                 "first")
            return  # (an older layout reads as it is: later versions only added columns)
        if version == 0:  # a new store: WAL, set once by its creator (readers never change it)
            _retrying(lambda: self.db.execute("PRAGMA journal_mode=WAL"))

        def upgrade():
            with self._tx():
                current, present = self._state()  # (again under the lock: another writer may have done it)
                if current == SCHEMA_VERSION:
                    return
                if current == 0:  # (a new store: the schema as it is now, no migrations)
                    if present:
                        raise StoreError(f"{self.path} is an SQLite database but not a simtlab results store")
                    _run_script(self.db, _SCHEMA)
                    current = SCHEMA_VERSION
                for v in range(current + 1, SCHEMA_VERSION + 1):
                    _run_script(self.db, _MIGRATIONS[v])
                self.db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

        _retrying(upgrade)

    def _tx(self):
        db = self.db

        class _Tx:
            def __enter__(self):
                db.execute("BEGIN IMMEDIATE")

            def __exit__(self, exc_type, *_):
                db.execute("ROLLBACK" if exc_type else "COMMIT")

        return _Tx()

    def close(self) -> None:
        self.db.close()
        if getattr(self, "_copy_dir", None) is not None:  # (a read-only folder's store, read from a copy)
            self._copy_dir.cleanup()

    def start_run(self, command: str = "", device: Any = None, sm_clock_mhz: int | None = None) -> int:
        row = {
            "started": _now(), "simtlab_version": __version__, "git_commit": git_commit(), "command": command,
            "host": socket.gethostname(),
            "device": getattr(device, "name", None),
            "compute_capability": ".".join(map(str, device.compute_capability)) if device else None,
            "driver": getattr(device, "driver_version", None), "sm_clock_mhz": sm_clock_mhz,
            "device_json": json.dumps(device.as_dict()) if device else None, "uid": uuid.uuid4().hex,
        }
        with self._tx():
            cur = self.db.execute(f"INSERT INTO runs ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                                  list(row.values()))
        return int(cur.lastrowid)

    _RESULT_COLUMNS = ("family", "rung", "stage", "params", "problem", "dtype", "median_ms", "spread", "min_ms",
                       "reps", "gflops", "gbs", "pct_of_reference", "reference", "rel_error", "tolerance", "status",
                       "error", "registers", "shared_bytes", "spill_bytes", "occupancy", "extra")

    def add_result(self, run_id: int, **fields: Any) -> int:
        unknown = set(fields) - set(self._RESULT_COLUMNS)
        if unknown:
            raise ValueError(f"unknown result fields: {sorted(unknown)}")
        for key in ("params", "extra"):
            if key in fields and not isinstance(fields[key], (str, type(None))):
                fields[key] = json.dumps(fields[key], sort_keys=True)
        cols = ["run_id", "created", *fields]
        with self._tx():
            cur = self.db.execute(f"INSERT INTO results ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                                  [run_id, _now(), *fields.values()])
        return int(cur.lastrowid)

    def run_ids(self) -> set[int]:
        return {r[0] for r in self.db.execute("SELECT id FROM runs").fetchall()}

    def count_runs(self) -> int:
        return self.db.execute("SELECT count(*) FROM runs").fetchone()[0]

    def devices(self) -> list[str]:
        """The device names the runs were made on, the latest run's first."""
        return [r[0] for r in self.db.execute("SELECT device FROM runs WHERE device IS NOT NULL GROUP BY device "
                                              "ORDER BY MAX(id) DESC").fetchall()]

    def runs(self, limit: int = 20) -> list[dict]:
        rows = self.db.execute("SELECT * FROM runs ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
        return [dict(r) for r in rows]

    def results(self, run_id: int | None = None, family: str | None = None, status: str | None = None,
                limit: int | None = None) -> list[dict]:
        where, args = [], []
        for col, val in (("run_id", run_id), ("family", family), ("status", status)):
            if val is not None:
                where.append(f"{col} = ?")
                args.append(val)
        sql = "SELECT * FROM results" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id"
        if limit:
            sql += f" LIMIT {int(limit)}"
        return [dict(r) for r in self.db.execute(sql, args).fetchall()]

    def best(self, family: str, rung: str, problem: str, device: str, names=None, source: str | None = None) -> dict | None:
        """The fastest verified result of a rung for a problem on a device (the tuner's memory).
        `names`: only rows whose parameters are exactly these (the rung's knobs as they are now);
        `source`: rows measured on that source digest first, any other version after them."""
        rows = self.db.execute(
            "SELECT r.* FROM results r JOIN runs u ON u.id = r.run_id WHERE r.family = ? AND r.rung = ? "
            "AND r.problem = ? AND u.device = ? AND r.status = 'ok' ORDER BY r.median_ms",
            (family, rung, problem, device)).fetchall()
        if names is not None:
            rows = [r for r in rows if r["params"] and set(json.loads(r["params"])) == set(names)]
        if source is not None:
            rows = sorted(rows, key=lambda r: json.loads(r["extra"] or "{}").get("source") != source)  # (stable)
        return dict(rows[0]) if rows else None

    # --- the questions the analyses, the report and the tuner ask (all SQL lives in this module) ---

    def latest_ladder_runs(self) -> dict[str, int]:
        """Per family, the most recent run that measured its first rung (a ladder, not a sweep)."""
        rows = self.db.execute("SELECT family, MAX(run_id) FROM results WHERE stage = 1 GROUP BY family").fetchall()
        return {fam: run for fam, run in rows}

    def best_reference(self, device: str, reference: str, column: str) -> tuple:
        """(the best value of `column` - gbs or gflops - among a reference's stored rows on a device,
        how many rows there are, the runs they come from joined by commas)."""
        if column not in ("gbs", "gflops"):
            raise ValueError(f"column is gbs or gflops, not {column!r}")
        return tuple(self.db.execute(
            f"SELECT MAX(r.{column}), COUNT(*), GROUP_CONCAT(DISTINCT r.run_id) FROM results r JOIN runs u "
            "ON u.id = r.run_id WHERE u.device = ? AND r.rung = ? AND r.status = 'reference'",
            (device, reference)).fetchone())

    def rows_per_problem(self, family: str, rung: str, device: str | None = None,
                         source: str | None = None) -> dict[str, list[dict]]:
        """Per problem, a rung's verified rows (run id, time, rates, share of its reference), oldest run
        first (on a device; measured on one version of its source)."""
        sql = ("SELECT r.problem, r.run_id, r.median_ms, r.gflops, r.gbs, r.pct_of_reference FROM results r JOIN runs u "
               "ON u.id = r.run_id WHERE r.family = ? AND r.rung = ? AND r.status = 'ok'")
        args = [family, rung]
        sql += _on_device(device, args)
        if source:
            sql += " AND json_extract(r.extra, '$.source') = ?"
            args.append(source)
        out: dict[str, list[dict]] = {}
        for problem, run, ms, gflops, gbs, pct in self.db.execute(sql + " ORDER BY r.run_id, r.id", args).fetchall():
            out.setdefault(problem, []).append({"run": run, "median_ms": ms, "gflops": gflops, "gbs": gbs,
                                                "pct_of_reference": pct})
        return out

    def reference_per_problem(self, family: str, reference: str, device: str | None = None) -> dict[str, float]:
        """Per problem, a reference's best GB/s among a family's stored rows (on a device) - the
        device copy's, say, which the memory-bound ladders time beside their library."""
        sql = ("SELECT r.problem, MAX(r.gbs) FROM results r JOIN runs u ON u.id = r.run_id WHERE r.family = ? "
               "AND r.rung = ? AND r.status = 'reference' AND r.gbs IS NOT NULL")
        args = [family, reference]
        sql += _on_device(device, args)
        return dict(self.db.execute(sql + " GROUP BY r.problem", args).fetchall())

    def fastest_params_elsewhere(self, family: str, rung: str, problem: str) -> list[tuple[str, float]]:
        """(parameters as JSON, best GFLOP/s) of a rung's verified rows on other problems, fastest first."""
        return [tuple(r) for r in self.db.execute(
            "SELECT params, MAX(gflops) AS g FROM results WHERE family = ? AND rung = ? AND problem != ? "
            "AND status = 'ok' AND params IS NOT NULL AND gflops IS NOT NULL GROUP BY params ORDER BY g DESC",
            (family, rung, problem)).fetchall()]

    def evaluations(self, family: str, rung: str, problem: str, device: str | None = None) -> list[tuple]:
        """(parameters as JSON, median ms, status, error) of every stored row of a rung on a problem
        that carries parameters (on a device), in the order they were stored."""
        sql = ("SELECT r.params, r.median_ms, r.status, r.error FROM results r JOIN runs u ON u.id = r.run_id "
               "WHERE r.family = ? AND r.rung = ? AND r.problem = ? AND r.params IS NOT NULL")
        args = [family, rung, problem]
        sql += _on_device(device, args)
        return [tuple(r) for r in self.db.execute(sql + " ORDER BY r.id", args).fetchall()]

    def merge_from(self, other: str | Path, skipped: list | None = None) -> int:
        """Copy every run of another store (and its results) into this one, in the other's order,
        under new ids; a run already here is skipped - the same run id made at its start (`uid`), or,
        for runs stored before runs had one, the same start time, host, command, commit, device and
        device properties and the same results. Returns the number of runs copied; `skipped`, if
        given, receives a line for each run left out and why. Results from several machines or
        sessions can then be reported, compared and tuned from as one history."""
        src = Store(other, readonly=True)
        try:
            run_cols = [c for c in _columns(src.db, "runs") if c != "id"]
            res_cols = [c for c in _columns(src.db, "results") if c not in ("id", "run_id")]
            copied = 0
            for run in src.db.execute("SELECT * FROM runs ORDER BY id").fetchall():
                # one transaction a run: a run arrives whole or not at all, and a writer beside a long
                # merge waits for one run's copy at most, never the whole merge
                rows = src.db.execute("SELECT * FROM results WHERE run_id = ? ORDER BY id", (run["id"],)).fetchall()
                with self._tx():
                    same = self._same_run(src, run)
                    if same is not None:
                        if skipped is not None:
                            skipped.append(f"run {run['id']} ({run['command'] or 'no command'}, {run['started']}): "
                                           f"already here as run {same}")
                        continue
                    cur = self.db.execute(f"INSERT INTO runs ({', '.join(run_cols)}) VALUES "
                                          f"({', '.join('?' * len(run_cols))})", [run[c] for c in run_cols])
                    new_id = cur.lastrowid
                    self.db.executemany(f"INSERT INTO results (run_id, {', '.join(res_cols)}) VALUES "
                                        f"(?, {', '.join('?' * len(res_cols))})",
                                        [[new_id, *(r[c] for c in res_cols)] for r in rows])
                    copied += 1
            return copied
        finally:
            src.close()

    def _same_run(self, src: "Store", run) -> int | None:
        """This store's id of the run `run` of `src`, if it is here already."""
        keys = run.keys()
        if "uid" in keys and run["uid"]:
            hit = self.db.execute("SELECT id FROM runs WHERE uid = ?", (run["uid"],)).fetchone()
            return hit[0] if hit else None
        key = tuple(run[c] if c in keys else None for c in ("started", "host", "command", "git_commit", "device",
                                                           "device_json"))
        fingerprint = _results_fingerprint(src.db, run["id"])
        for (candidate,) in self.db.execute(
                "SELECT id FROM runs WHERE uid IS NULL AND started IS ? AND host IS ? AND command IS ? AND git_commit IS ? "
                "AND device IS ? AND device_json IS ?", key).fetchall():
            if _results_fingerprint(self.db, candidate) == fingerprint:
                return candidate
        return None

    def write_text(self, path: str | Path, run_ids: Iterable[int] | None = None) -> int:
        """The store (or these runs) as JSON Lines: a line per run ({"run": {...}}), then a line per
        result ({"result": {...}}, its run_id the run's id here), keys sorted - diffable text that
        `Store(path, readonly=True)` reads back and `merge` copies from. Returns the results written."""
        runs = self.db.execute("SELECT * FROM runs ORDER BY id").fetchall()
        if run_ids is not None:
            wanted = set(run_ids)
            runs = [r for r in runs if r["id"] in wanted]
        from .files import sweep_stale_temporaries, temporary_beside

        tmp = temporary_beside(Path(path))
        sweep_stale_temporaries(tmp.parent)
        n = 0
        try:
            with open(tmp, "w") as out:
                for run in runs:
                    out.write(json.dumps({"run": dict(run)}, sort_keys=True) + "\n")
                for run in runs:
                    for r in self.db.execute("SELECT * FROM results WHERE run_id = ? ORDER BY id", (run["id"],)):
                        out.write(json.dumps({"result": {k: r[k] for k in r.keys() if k != "id"}}, sort_keys=True) + "\n")
                        n += 1
            os.replace(tmp, path)
        except BaseException:  # (interrupted or failed: no half-written file left behind)
            tmp.unlink(missing_ok=True)
            raise
        return n

    def integrity_ok(self) -> bool:
        return self.db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


TEXT_SUFFIX = ".jsonl"


def _load_text(path: Path) -> sqlite3.Connection:
    """An in-memory store holding the runs and results of a JSON Lines file (Store.write_text)."""
    db = sqlite3.connect(":memory:", isolation_level=None)
    _run_script(db, _SCHEMA)
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    columns = {t: set(_columns(db, t)) for t in _TABLES}
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise StoreError(f"cannot read results text {path}: {exc}") from None
    db.execute("BEGIN")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            (kind, row), = entry.items()
            table = {"run": "runs", "result": "results"}[kind]
            unknown = set(row) - columns[table]
            if unknown:
                raise ValueError(f"unknown {kind} fields {sorted(unknown)}")
            db.execute(f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                       list(row.values()))
        except (ValueError, KeyError, TypeError, AttributeError, sqlite3.Error) as exc:
            raise StoreError(f"{path}:{number} is not a simtlab results line ({type(exc).__name__}: {exc})") from None
    db.execute("COMMIT")
    return db


def _results_fingerprint(db: sqlite3.Connection, run_id: int) -> tuple:
    """What a run measured, in order (rung, problem, status, time): two legacy runs with the same
    header are the same run only where these agree."""
    return tuple(tuple(r) for r in db.execute("SELECT rung, problem, status, median_ms FROM results WHERE run_id = ? "
                                              "ORDER BY id", (run_id,)).fetchall())


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in db.execute(f"PRAGMA table_info({table})").fetchall()]


def rows_as_json(rows: Iterable[dict]) -> str:
    return json.dumps(list(rows), indent=2, default=str)
