"""The clock log parses nvidia-smi's samples and summarises the ones inside a window."""

from datetime import datetime

from simtlab.tools.clock_log import ClockLog, parse_samples

TEXT = """2026/12/03 10:15:01.100, 1545, 688.20
2026/12/03 10:15:01.150, 1530, 699.80
2026/12/03 10:15:01.200, [N/A], 700.00
2026/12/03 10:15:01.250, 1980, 120.00
2026/12/03 10:15:01.3"""


def _t(s: str) -> float:
    return datetime.strptime(s, "%Y/%m/%d %H:%M:%S.%f").timestamp()


def test_parse_drops_unfilled_and_partial_lines():
    samples = parse_samples(TEXT)
    assert [s.sm_mhz for s in samples] == [1545, 1530, 1980]
    assert samples[0].time == _t("2026/12/03 10:15:01.100") and samples[1].watts == 699.8


def test_summary_takes_only_the_window():
    log = ClockLog()
    log.samples = parse_samples(TEXT)
    s = log.summary(_t("2026/12/03 10:15:01.000"), _t("2026/12/03 10:15:01.200"))
    assert s == {"sm_mhz": 1537.5, "watts": 694.0, "samples": 2}
    assert log.summary(0.0, 1.0) == {"sm_mhz": None, "watts": None, "samples": 0}


def test_without_nvidia_smi_the_log_is_empty(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)
    with ClockLog() as log:
        pass
    assert log.samples == [] and log.summary(0.0, 2e9)["samples"] == 0
