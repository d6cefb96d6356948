"""The ladder chart shows the climb (CPU): every rung's bar on a logarithmic axis that holds the
slowest and the fastest, the family's reference drawn across it."""

import warnings

import matplotlib

matplotlib.use("Agg")


def test_every_rung_is_visible_on_a_log_axis(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    from simtlab.ladder import Row
    from simtlab.report.plot import ladder_chart

    rows = [Row("sort", "2^24", "CUB", None, "reference", median_ms=1.0, gbs=250.0)]
    rows += [Row("sort", "2^24", f"sort/0{i}_r", i, "ok", median_ms=1.0, gbs=g)
             for i, g in ((1, 2.5), (2, 9.0), (3, 90.0), (4, 260.0))]
    made = {}
    real = plt.subplots

    def capture(*a, **k):
        fig, ax = real(*a, **k)
        made["ax"] = ax
        return fig, ax

    monkeypatch.setattr(plt, "subplots", capture)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ladder_chart(rows, "gbs", tmp_path / "l.png", "sort ladder")
    ax = made["ax"]
    bottom, top = ax.get_ylim()
    assert ax.get_yscale() == "log" and bottom < 2.5 and top > 260.0
    assert [line.get_ydata()[0] for line in ax.get_lines()] == [250.0]  # (CUB across the chart)
    assert (tmp_path / "l.png").stat().st_size > 5_000
