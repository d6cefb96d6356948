"""Compare the access analyzer's shared-memory load conflicts with Nsight Compute's
counters from a committed H200 log (no GPU needed):

    python benchmarks/gemm_conflicts_vs_ncu.py [benchmarks/results/2026-12-02_h200_91760c/log.txt]

For the GEMM rungs 5-8 at 2048^3 every LDS.128 in the main loop is either an A-fragment load or a
B-fragment load, half each (two of each per k step); the prediction is
    LDS instructions / 2 x (conflicts per A load + conflicts per B load).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from simtlab.analyze.access import Block, addresses, shared_access

LOG = Path(__file__).resolve().parent / "results" / "2026-12-02_h200_91760c" / "log.txt"
B = Block(256)

# (A-fragment index, B-fragment index) of one LDS.128 of each kind, per thread id, in floats.
PATTERNS = {
    "gemm_2d_blocktiling": (lambda t, *_: (t // 16) * 8 * 8, lambda t, *_: (t % 16) * 8),  # As[row][k..k+3], Bs[tcol*8]
    "gemm_vectorized": (lambda t, *_: (t // 16) * 8, lambda t, *_: (t % 16) * 8),
    "gemm_bank_conflict_free": (lambda t, *_: (t // 16) * 4, lambda t, *_: (t % 16) * 4),
    "gemm_warptiling": (lambda t, *_: ((t % 32) // 8) * 4, lambda t, *_: (t % 8) * 4),
}


def measured(log: str) -> dict[str, dict[str, int]]:
    out, current = {}, None
    for line in log.splitlines():
        m = re.match(r"\s+void (gemm_\w+)<", line)
        if m:
            current = out.setdefault(m.group(1), {})
            continue
        m = re.match(r"\s+(\S+)\s+(?:inst\s+)?([\d,]+)\s*$", line)
        if m and current is not None:
            current[m.group(1)] = int(m.group(2).replace(",", ""))
    return out


def main() -> int:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else LOG
    counters = measured(path.read_text())
    shown = path.resolve().relative_to(Path(__file__).resolve().parents[1]) if path.is_absolute() else path
    print(f"ncu counters from {shown}")
    print(f"{'kernel':28s} {'LDS instr':>12s} {'measured':>12s} {'predicted':>12s} {'per LDS meas/pred':>18s}")
    for kernel, (a_idx, b_idx) in PATTERNS.items():
        c = counters.get(kernel)
        if not c:
            print(f"{kernel:28s} not in the log")
            continue
        lds = c["smsp__inst_executed_op_shared_ld.sum"]
        meas = c["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"]
        per = shared_access(addresses(a_idx, B), 16).conflicts + shared_access(addresses(b_idx, B), 16).conflicts
        pred = lds // 2 * per
        print(f"{kernel:28s} {lds:12,d} {meas:12,d} {pred:12,d} {meas / lds:9.3f} / {pred / lds:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
