"""clock_compare pairs each ladder row with the clock samples taken while it ran."""

import json
import sys
from datetime import datetime

from simtlab.ladder import Row
from simtlab.tools import clock_log
from simtlab.tools.clock_log import parse_samples


def test_rows_get_the_clock_of_their_own_window(bench_script, monkeypatch, tmp_path):
    mod = bench_script("clock_compare")
    clock = iter([100.0, 101.0, 102.0, 103.0])  # on_step, on_row, on_step, on_row
    monkeypatch.setattr("time.time", lambda: next(clock))

    def fake_ladder(fam, sizes, rungs, opts, on_step, on_row):
        rows = [Row("gemm", "4096x4096x4096", "cublas", None, "reference", gflops=50e3, pct_of_reference=100.0),
                Row("gemm", "4096x4096x4096", "gemm/10_tuned", 10, "ok", gflops=48e3, pct_of_reference=96.0)]
        for r in rows:
            on_step(r.name)
            on_row(r)
        return rows

    def stamp(t):
        return datetime.fromtimestamp(t).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]

    class FakeLog:  # the real summary over made-up samples, no nvidia-smi
        summary = clock_log.ClockLog.summary

        def __enter__(self):
            self.samples = parse_samples(f"{stamp(100.5)}, 1600, 650\n{stamp(102.5)}, 1500, 700\n")
            return self

        def __exit__(self, *exc):
            pass

    monkeypatch.setattr("simtlab.ladder.run_ladder", fake_ladder)
    monkeypatch.setattr("simtlab.tools.clock_log.ClockLog", FakeLog)
    out = tmp_path / "c.json"
    monkeypatch.setattr(sys, "argv", ["clock_compare", "gemm", "--rung", "10", "--size", "4096", "--json", str(out)])
    mod.main()
    rows = json.loads(out.read_text())
    assert [(r["sm_mhz"], r["watts"]) for r in rows] == [(1600, 650), (1500, 700)]
    assert abs(rows[1]["tflops_per_ghz"] - 48 / 1.5) < 1e-9
