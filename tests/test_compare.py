import json

import pytest
from typer.testing import CliRunner

from simtlab.cli import app
from simtlab.report.compare import compare_rows
from simtlab.store import Store

runner = CliRunner()


def row(kernel, ms, spread=0.005, status="ok", problem="4096"):
    return {"family": "gemm", "rung": kernel, "problem": problem, "median_ms": ms, "spread": spread, "status": status}


def test_noise_aware_verdicts():
    base = [row("a", 1.0), row("b", 1.0), row("c", 1.0, spread=0.05), row("d", 1.0), row("e", 1.0, status="wrong"),
            row("gone", 1.0)]
    new = [row("a", 1.01), row("b", 1.10), row("c", 1.10, spread=0.05), row("d", 1.0, status="wrong"),
           row("e", 0.9), row("fresh", 1.0)]
    v = {c.kernel: c.verdict for c in compare_rows(base, new)}
    assert v == {"a": "same", "b": "regression", "c": "same", "d": "regression", "e": "fixed", "gone": "missing",
                 "fresh": "new"}
    # c: 10% slower but each timing's spread was 5%: threshold 3*sqrt(2)*5% = 21%
    c = next(c for c in compare_rows(base, new) if c.kernel == "c")
    assert c.threshold == pytest.approx(3 * (2 * 0.05**2) ** 0.5)
    assert next(c for c in compare_rows(base, [row("a", 0.9)]) if c.kernel == "a").verdict == "faster"


def test_best_row_per_kernel_is_compared():
    base = [row("t", 2.0), row("t", 1.0)]
    new = [row("t", 1.0), row("t", 0.5, status="wrong")]
    (c,) = [c for c in compare_rows(base, new) if c.kernel == "t"]
    assert c.base_ms == 1.0 and c.new_ms == 1.0 and c.verdict == "same"


def _store_with_two_runs(tmp_path, slower: float):
    s = Store(tmp_path / "r.db")
    for factor in (1.0, slower):
        run = s.start_run("t")
        for k in ("gemm/09_multistage", "gemm/10_tuned"):
            s.add_result(run, family="gemm", rung=k, problem="2048x2048x2048", status="ok", median_ms=factor,
                         spread=0.004)
    return s.path


def test_cli_exit_codes_and_exports(tmp_path):
    db = _store_with_two_runs(tmp_path, 1.01)
    ok = runner.invoke(app, ["compare", "1", "2", "--db", str(db)])
    assert ok.exit_code == 0, ok.output
    (tmp_path / "x").mkdir()
    db2 = _store_with_two_runs(tmp_path / "x", 1.2)
    bad = runner.invoke(app, ["compare", "1", "2", "--db", str(db2)])
    assert bad.exit_code == 1 and "regression" in bad.output
    for fmt in ("csv", "json"):
        out = tmp_path / f"run1.{fmt}"
        res = runner.invoke(app, ["results", "--db", str(db2), "--run", "1", "--export", fmt, "-o", str(out)])
        assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["compare", str(tmp_path / "run1.csv"), str(tmp_path / "run1.json"), "--json"])
    assert res.exit_code == 0 and {c["verdict"] for c in json.loads(res.output)} == {"same"}
    missing = runner.invoke(app, ["compare", "7", "2", "--db", str(db2)])
    assert missing.exit_code == 2 and "run 7 has no results" in missing.output
    assert runner.invoke(app, ["results", "--db", str(db2), "--export", "xml"]).exit_code == 2
