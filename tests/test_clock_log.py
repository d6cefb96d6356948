"""The clock log samples NVML in the background and summarises the samples inside a window."""

import sys
import time
import types

from simtlab.tools import clock_log
from simtlab.tools.clock_log import ClockLog, Sample, sustained


def _fake_nvml(calls: list):
    nvml = types.SimpleNamespace(NVML_CLOCK_SM=1)
    nvml.nvmlInit = lambda: calls.append("init")
    nvml.nvmlShutdown = lambda: calls.append("shutdown")
    nvml.nvmlDeviceGetClockInfo = lambda h, which: 1545 if which == 1 else 0
    nvml.nvmlDeviceGetPowerUsage = lambda h: 690_500  # milliwatts
    nvml.nvmlDeviceGetCurrentClocksEventReasons = lambda h: 0x4 | 0x1
    return nvml


def test_samples_in_the_background_while_the_block_runs(monkeypatch):
    calls = []
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(calls))
    monkeypatch.setattr(clock_log, "_nvml_handle", lambda nvml: "gpu0")
    with ClockLog(period_ms=2) as log:
        t0 = time.time()
        time.sleep(0.05)
        s = log.summary(t0, time.time())  # live: samples are there before the block ends
    assert s["samples"] >= 3 and s["sm_mhz"] == 1545 and s["watts"] == 690.5 and s["power_capped"] == 1.0
    assert calls == ["init", "shutdown"] and log.unavailable is None and log.power_source == "1 s average"


def test_instant_power_is_read_where_nvml_has_it(monkeypatch):
    calls = []
    nvml = _fake_nvml(calls)
    nvml.NVML_FI_DEV_POWER_INSTANT = 186
    value = types.SimpleNamespace(nvmlReturn=0, valueType=1, value=types.SimpleNamespace(uiVal=612_000))
    nvml.nvmlDeviceGetFieldValues = lambda h, fields: [value] if fields == [186] else []
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.setattr(clock_log, "_nvml_handle", lambda nvml: "gpu0")
    with ClockLog(period_ms=2) as log:
        time.sleep(0.02)
    assert log.power_source == "instant" and {s.watts for s in log.samples} == {612.0}


def test_summary_takes_only_the_window():
    log = ClockLog(period_ms=20)
    log.samples = [Sample(10.0, 1500, 700.0, True), Sample(10.1, 1600, 650.0, False), Sample(11.0, 1980, 120.0, False)]
    assert log.summary(9.9, 10.2) == {"sm_mhz": 1550.0, "watts": 675.0, "power_capped": 0.5, "samples": 2}
    assert log.summary(10.105, 10.11)["sm_mhz"] == 1600  # shorter than a period: the sample beside it
    assert log.summary(0.0, 1.0) == {"sm_mhz": None, "watts": None, "power_capped": None, "samples": 0}


def test_without_nvml_the_log_is_empty_and_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    with ClockLog() as log:
        pass
    assert log.samples == [] and "pynvml" in log.unavailable and log.summary(0.0, 2e9)["samples"] == 0


def test_power_counts_only_for_timings_that_kept_the_gpu_busy():
    assert sustained(148, 2.7) and sustained(3, 141.0)
    assert not sustained(200, 0.19) and not sustained(None, 1.0) and not sustained(5, None)


def test_nvml_without_a_cuda_device_is_shut_down_again(monkeypatch):
    calls = []
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml(calls))

    def no_device(nvml):
        raise RuntimeError("no CUDA device")

    monkeypatch.setattr(clock_log, "_nvml_handle", no_device)
    with ClockLog() as log:
        pass
    assert calls == ["init", "shutdown"] and "no CUDA device" in log.unavailable and log.samples == []
