"""The HTML report: built from a store, self-contained, and rendered by a real headless browser."""

import base64
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest
from typer.testing import CliRunner

from simtlab.cli import app
from simtlab.report.html import build_report
from simtlab.store import Store


class Dev:
    name, compute_capability, driver_version = "NVIDIA H200", (9, 0), 13000

    def as_dict(self):
        return {"name": self.name, "sms": 132}


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "r.db")
    run = s.start_run("simtlab ladder gemm", Dev())
    s.add_result(run, family="gemm", rung="cuBLAS", problem="2048x2048x2048", status="reference", median_ms=0.34,
                 gflops=50000.0, gbs=150.0, pct_of_reference=100.0, spread=0.003)
    for stage, name, ms in ((1, "naive", 17.8), (2, "coalesced", 2.4)):
        s.add_result(run, family="gemm", rung=f"gemm/{stage:02d}_{name}", stage=stage, problem="2048x2048x2048",
                     status="ok", median_ms=ms, gflops=17179.9 / ms, gbs=50.0 / ms, pct_of_reference=34 / ms,
                     registers=32, shared_bytes=0, occupancy=1.0, rel_error=8e-7, params={"BLOCK": 16},
                     extra={"limiter": "warps"})
    s.add_result(run, family="gemm", rung="gemm/03_smem_tiling", stage=3, problem="2048x2048x2048",
                 status="wrong", error="relative error 1e-2 > tolerance")
    run2 = s.start_run("simtlab ladder elementwise", Dev())
    s.add_result(run2, family="elementwise", rung="device copy", problem="1000", status="reference",
                 median_ms=1.0, gflops=1.0, gbs=4200.0, pct_of_reference=100.0)
    s.add_result(run2, family="elementwise", rung="elementwise/01_scalar", stage=1, problem="1000", status="ok",
                 median_ms=1.2, gflops=0.8, gbs=3500.0, pct_of_reference=83.0, occupancy=1.0)
    return s


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.imgs, self.text = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "img":
            self.imgs.append(dict(attrs)["src"])

    def handle_data(self, data):
        self.text.append(data)


def test_report_is_self_contained(store):
    page = build_report(store)
    p = _Collect()
    p.feed(page)
    text = " ".join(p.text)
    assert p.tags.count("table") == 3  # device, one gemm problem, one elementwise problem
    assert len(p.imgs) == 3  # roofline + two ladder charts
    for src in p.imgs:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:4] == b"\x89PNG"
    assert "http" not in re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", page)  # nothing fetched
    for needle in ("gemm", "elementwise", "02_coalesced", "relative error 1e-2", "Measured ceilings", "likely limiter"):
        assert needle in text, needle


def test_report_cli(store, tmp_path):
    out = tmp_path / "r.html"
    res = CliRunner().invoke(app, ["report", "--db", str(store.path), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_text().startswith("<!DOCTYPE html>")
    res = CliRunner().invoke(app, ["report", "--db", str(store.path), "-o", str(out), "--run", "9"])
    assert res.exit_code == 2 and "no run 9 in" in res.output
    empty = Store(tmp_path / "empty.db")
    res = CliRunner().invoke(app, ["report", "--db", str(empty.path), "-o", str(out)])
    assert res.exit_code == 2 and "no ladder runs" in res.output


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium installed (apt-get install chromium)")
def test_browser_renders_tables_and_plots(store, tmp_path):
    page = tmp_path / "r.html"
    page.write_text(build_report(store))
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
             f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(flags + ["--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120).stdout
    assert dom.count("<table") == 3 and dom.count("<img") == 3 and "02_coalesced" in dom
    shot = tmp_path / "shot.png"
    subprocess.run(flags + [f"--screenshot={shot}", "--window-size=1300,3000", page.as_uri()],
                   capture_output=True, timeout=120)
    import matplotlib.image as mpimg

    pixels = mpimg.imread(shot)
    assert pixels.shape[0] >= 3000 and pixels.shape[1] >= 1300
    # content, not pixels: the rendered page is not blank, and the chart area holds colour (the bars)
    assert pixels[..., :3].std() > 0.05
    saturated = (abs(pixels[..., 0] - pixels[..., 2]) > 0.3).mean()
    assert saturated > 0.001


def test_docs_pages_from_the_store(store, tmp_path):
    from simtlab.report.docs import write_docs

    pages = write_docs(store, tmp_path / "docs")
    names = {p.name for p in pages}
    assert {"README.md", "gemm.md", "elementwise.md", "reduction.md", "transpose.md"} <= names
    gemm = (tmp_path / "docs" / "gemm.md").read_text()
    assert "| 02_coalesced |" in gemm and "![gemm ladder](gemm_ladder.png)" in gemm
    assert "Rung 1 - naive" in gemm  # the kernel file's header comment
    assert (tmp_path / "docs" / "gemm_ladder.png").read_bytes()[:4] == b"\x89PNG"
    assert "No ladder run of this family" in (tmp_path / "docs" / "transpose.md").read_text()


def test_a_rung_removed_from_the_catalog_keeps_its_stored_rows(store):
    """Stored results outlive the catalog: a retired rung's rows still render, marked as such."""
    run = store.start_run("simtlab ladder gemm", Dev())
    store.add_result(run, family="gemm", rung="gemm/01_naive", stage=1, problem="64", status="ok", median_ms=1.0,
                     gflops=1.0, gbs=1.0)
    store.add_result(run, family="gemm", rung="gemm/11_retired", stage=11, problem="64", status="ok", median_ms=0.5,
                     gflops=2.0, gbs=2.0)
    page = build_report(store)
    assert "11_retired" in page and "no longer in the catalog" in page


def test_clock_columns_only_where_a_row_has_them():
    from rich.console import Console

    from simtlab.ladder import Row
    from simtlab.report.html import ladder_cells
    from simtlab.report.table import ladder_table

    old = [Row("gemm", "64", "cuBLAS", None, "reference", median_ms=1.0, gflops=1.0),
           Row("gemm", "64", "gemm/10_tuned", 10, "ok", median_ms=1.0, gflops=1.0)]
    head, _ = ladder_cells(old, "tflops")
    assert "MHz" not in head and "W" not in head  # runs before clocks were sampled
    timed = [Row("gemm", "64", "cuBLAS", None, "reference", median_ms=2.7, gflops=1.0, reps=148, sm_mhz=1980.0),
             Row("gemm", "64", "gemm/10_tuned", 10, "ok", median_ms=2.8, gflops=1.0, reps=140, sm_mhz=1755.0),
             Row("gemm", "64", "gemm/09_multistage", 9, "wrong")]
    head, body = ladder_cells(timed, "tflops")
    assert "MHz" in head and "W" not in head  # power only where NVML read it instantaneously
    assert body[0][0][head.index("MHz")] == "1980" and body[2][0][head.index("status")] == "wrong"
    console = Console(width=200, record=True)
    console.print(ladder_table(timed, "tflops", "cuBLAS"))
    text = console.export_text()
    assert "MHz" in text and "1755" in text
    burst = Row("gemm", "64", "gemm/10_tuned", 10, "ok", median_ms=0.19, gflops=1.0, reps=200, sm_mhz=1980.0, watts=118.0)
    busy = Row("gemm", "64", "cuBLAS", None, "reference", median_ms=2.7, gflops=1.0, reps=148, sm_mhz=1980.0, watts=568.0)
    head, body = ladder_cells([burst], "tflops")
    assert "W" not in head and "MHz" not in head  # 38 ms of work in a mostly idle window: not the kernel's
    head, body = ladder_cells([busy, burst], "tflops")
    assert [cells[head.index("MHz")] for cells, _, _ in body] == ["1980", ""]
    assert [cells[head.index("W")] for cells, _, _ in body] == ["568", ""]
