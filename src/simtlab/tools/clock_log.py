"""The SM clock and board power sampled by nvidia-smi while kernels are timed.

Two kernels at the same speed per clock can differ in time by the clock the card picks under
its power limit; a table that shows the clock and the power beside each time says which it was.

    with ClockLog() as log:
        t0 = time.time(); ...time something...; t1 = time.time()
    log.summary(t0, t1)  # {"sm_mhz": 1545.0, "watts": 690.2, "samples": 18}
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
from dataclasses import dataclass
from datetime import datetime

__all__ = ["Sample", "parse_samples", "ClockLog"]

QUERY = "timestamp,clocks.sm,power.draw"


@dataclass(frozen=True)
class Sample:
    time: float  # seconds since the epoch, the machine's own clock
    sm_mhz: float
    watts: float


def parse_samples(text: str) -> list[Sample]:
    """nvidia-smi's `--format=csv,noheader,nounits` lines of QUERY; lines it could not fill
    ("[N/A]", a partial last line) are dropped."""
    out = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3:
            continue
        try:
            stamp = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            out.append(Sample(stamp, float(parts[1]), float(parts[2])))
        except ValueError:
            continue
    return out


class ClockLog:
    """nvidia-smi sampling every `period_ms` in a child process for the life of the block."""

    def __init__(self, period_ms: int = 50, gpu: int = 0):
        self.period_ms, self.gpu = period_ms, gpu
        self.samples: list[Sample] = []
        self._proc = None

    def __enter__(self) -> ClockLog:
        exe = shutil.which("nvidia-smi")
        if exe is not None:  # without it the summaries are empty, the timings still stand
            self._proc = subprocess.Popen(
                [exe, f"--id={self.gpu}", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits",
                 f"--loop-ms={self.period_ms}"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        return self

    def __exit__(self, *exc) -> None:
        if self._proc is not None:
            self._proc.terminate()
            out, _ = self._proc.communicate(timeout=10)
            self.samples = parse_samples(out)

    def summary(self, start: float, end: float) -> dict:
        """Median SM clock and mean power over the samples taken between `start` and `end`."""
        inside = [s for s in self.samples if start <= s.time <= end]
        if not inside:
            return {"sm_mhz": None, "watts": None, "samples": 0}
        return {"sm_mhz": statistics.median(s.sm_mhz for s in inside),
                "watts": round(statistics.fmean(s.watts for s in inside), 1), "samples": len(inside)}
