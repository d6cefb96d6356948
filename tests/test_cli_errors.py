"""Bad input at the command line: one line naming the problem on stderr, no traceback, and an exit
code that says what kind of failure it was (2 input, 3 store; 1 stays for `compare`'s regressions)."""

import sqlite3
from pathlib import Path

import pytest

from simtlab.cli import EXIT_INPUT, EXIT_STORE, main

COMPILE = ["compile", "gemm", "--arch", "sm_90", "--rung", "1", "--size"]

BAD_INPUT = [  # (arguments, exit code, what the message says)
    (COMPILE + ["abc"], EXIT_INPUT, "is not a size"),
    (COMPILE + ["-5"], EXIT_INPUT, "must be >= 1"),
    (COMPILE + ["0"], EXIT_INPUT, "must be >= 1"),
    (COMPILE + ["4096x"], EXIT_INPUT, "use N \\(a cube\\) or MxNxK"),
    (COMPILE + ["4096:int8"], EXIT_INPUT, "is not a size"),
    (COMPILE + ["99999999999"], EXIT_INPUT, "exceeds 2\\^31 - 1"),
    (["compile", "reduction", "--arch", "sm_90", "--rung", "1", "--size", "1e6:min"], EXIT_INPUT, "must be one of sum"),
    (["explain", "softmax", "4", "--arch", "sm_90", "--size", "abc"], EXIT_INPUT, "use ROWSxCOLS"),
    (["compile", "elementwise", "--arch", "sm_999"], EXIT_INPUT, "does not compile for sm_999: it takes sm_75"),
    (["compile", "elementwise", "--arch", "sm_50"], EXIT_INPUT, "does not compile for sm_50"),
    (["compile", "elementwise", "--arch", "ninety"], EXIT_INPUT, "arch must look like 'sm_90'"),
    (["compile", "nosuch", "--arch", "sm_90"], EXIT_INPUT, "nosuch"),
    (["results", "--family", "nosuch"], EXIT_INPUT, "nosuch"),
    (["report", "-o", "/missing/dir/r.html"], EXIT_INPUT, "the folder /missing/dir does not exist"),
    (["ladder", "gemm", "--timeout", "0"], EXIT_INPUT, "--timeout 0: give a positive number of seconds"),
]


def _one_line_error(capsys) -> str:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, captured.err
    return lines[0]


@pytest.mark.parametrize("args, code, says", BAD_INPUT, ids=lambda a: " ".join(a) if isinstance(a, list) else None)
def test_bad_input_is_one_line_and_exit_2(args, code, says, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("SIMTLAB_DB", str(tmp_path / "none.db"))
    assert main(args) == code
    line = _one_line_error(capsys)
    assert line.startswith("error: ")
    import re

    assert re.search(says, line), line


def _stores(tmp_path):
    good = tmp_path / "good.db"
    from simtlab.store import Store

    Store(good).close()
    truncated = tmp_path / "truncated.db"
    truncated.write_bytes(good.read_bytes()[:100])
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE notes (x)")
    junk = tmp_path / "junk.db"
    junk.write_bytes(bytes(range(256)) * 16)
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    folder = tmp_path / "a_folder.db"
    folder.mkdir()
    return {"truncated": (truncated, "truncated.db is damaged"), "foreign": (foreign, "not a simtlab results store"),
            "junk": (junk, "file is not a database"), "empty": (empty, "is empty: a writer"),
            "folder": (folder, "is a folder, not a results store")}


@pytest.mark.parametrize("kind", ["truncated", "foreign", "junk", "empty", "folder"])
@pytest.mark.parametrize("command", [["results"], ["results", "--runs"], ["report", "-o", "REPORT"]])
def test_a_damaged_store_is_named_with_exit_3(kind, command, tmp_path, monkeypatch, capsys):
    path, says = _stores(tmp_path)[kind]
    monkeypatch.setenv("SIMTLAB_DB", str(path))
    args = [str(tmp_path / "r.html") if a == "REPORT" else a for a in command]
    assert main(args) == EXIT_STORE
    line = _one_line_error(capsys)
    assert says in line, line
    if kind == "empty":
        assert path.stat().st_size == 0  # a read command wrote nothing into it


def test_usage_errors_are_the_parsers_with_exit_2(capsys):
    assert main(["results", "--limit", "-1"]) == EXIT_INPUT
    assert main(["nosuchcommand"]) == EXIT_INPUT
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "--limit" in captured.err and "nosuchcommand" in captured.err


def test_debug_lets_the_traceback_through(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMTLAB_DB", str(tmp_path / "none.db"))
    with pytest.raises(ValueError, match="is not a size"):
        main(COMPILE + ["abc", "--debug"])


SHIPPED = str(Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "h200.jsonl")


@pytest.mark.parametrize("args, says", [
    (["results", "--run", "99999"], "no run 99999"),
    (["roofline", "--run", "99999", "-o", "OUT/r.png"], "no run 99999"),
    (["roofline", "-o", "OUT/x.txt"], "written as .png"),
    (["report", "--run", "99999", "-o", "OUT/r.html"], "no run 99999"),
    (["explain", "gemm", "8", "--device", "unknown"], "no runs of device 'unknown'"),
    (["explain", "gemm_tc", "6", "--arch", "sm_80"], "needs compute capability exactly 9.0"),
    (["docs", "-o", "FILE"], "is a file"),
    (["compare", "BINARY", "BINARY"], "BINARY"),
])
def test_what_used_to_answer_with_silence_or_a_traceback_is_one_line(args, says, tmp_path, capsys):
    """Empty tables, charts without points, PNG bytes in a .txt, 'no measurements' for a device the
    store never saw, an internal error for a rung another GPU cannot run: each a one-line error."""
    (tmp_path / "FILE").write_text("x")
    (tmp_path / "BINARY").write_bytes(bytes(range(256)) * 8)
    args = [a.replace("OUT", str(tmp_path)) if "OUT" in a else str(tmp_path / a) if a in ("FILE", "BINARY") else a
            for a in args]
    assert main([*args, "--db", SHIPPED] if args[0] != "compare" else args) == EXIT_INPUT
    line = _one_line_error(capsys)
    assert says in line.replace(str(tmp_path) + "/", ""), line


def test_results_runs_says_how_many_it_shows(capsys):
    assert main(["results", "--runs", "--db", SHIPPED]) == 0
    out = capsys.readouterr().out
    assert "the 20 most recent of" in out


def test_a_report_to_a_read_only_folder_fails_before_the_work(tmp_path, capsys, monkeypatch):
    import os

    folder = tmp_path / "ro"
    folder.mkdir()
    os.chmod(folder, 0o555)
    try:
        if os.access(folder, os.W_OK):  # (root writes anywhere: the check stood in for)
            import simtlab.commands as commands

            monkeypatch.setattr(commands, "_writable", lambda p: False)
        assert main(["report", "-o", str(folder / "r.html"), "--db", SHIPPED]) == EXIT_INPUT
        assert "not writable" in _one_line_error(capsys)
    finally:
        os.chmod(folder, 0o755)


@pytest.mark.parametrize("args, says", [
    (["plan", "reduction", "--size", "2^80", "--gpu", "h200"], "over 2^40"),
    (["plan", "reduction", "--size", "2^36", "--gpu", "h100"], "needs 274.9 GB for its operands; the NVIDIA H100 SXM has 80 GB"),
    (["plan", "gemm_tc", "--size", "200000", "--gpu", "h100"], "has 80 GB"),
    (["plan", "gemm", "--size", "0", "--gpu", "h200"], "must be >= 1"),
])
def test_plans_for_problems_no_gpu_holds_are_refused(args, says, capsys):
    assert main(args) == EXIT_INPUT
    line = _one_line_error(capsys)
    assert says in line and "pass --gpu" not in line, line  # (no advice to pass the --gpu that was passed)


def test_usage_errors_are_one_line_and_help_shows_no_type_column(capsys):
    """The README promises one-line errors: the parser's too (no five-line box); --help lists a
    flag as a flag, not followed by <bool>."""
    assert main(["results", "--limit", "-1"]) == EXIT_INPUT
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--limit" in err and "simtlab results --help" in err
    assert main(["tune", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--json" in out and "<bool>" not in out and "╭" not in out
