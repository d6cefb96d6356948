"""The access analyzer's predictions next to Nsight Compute's counters.

Each check names a rung, the ncu capture it is read from (benchmarks/ncu_capture.sh writes one CSV
per rung; `*_source.csv` is ncu's per-SASS-instruction source page) and two numbers: what the
analyzer predicts from the index expressions alone, and what the hardware counted. Kernel-level
counters are sums over every launch of the rung's kernel; instruction-level ones (the source page)
isolate one SASS opcode, which is how an intra-instruction conflict or a divergent path is seen
without the noise of other instructions."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .access import ANALYSES, Block, addresses, shared_access

__all__ = ["Check", "CHECKS", "kernel_totals", "source_rows", "evaluate", "tree_wavefronts"]

LD_REQ, LD_SEC = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
ST_REQ, ST_SEC = "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"
SH_REQ, SH_WF = "smsp__inst_executed_op_shared_ld.sum", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"


def kernel_totals(text: str) -> dict[str, float]:
    """Every numeric metric of an `ncu --csv --metrics` capture, summed over its launches."""
    from ..tools.nvtools import parse_ncu_csv

    out: dict[str, float] = {}
    for metrics in parse_ncu_csv(text).values():
        for name, value in metrics.items():
            if isinstance(value, float):
                out[name] = out.get(name, 0.0) + value
    return out


def source_rows(text: str) -> list[dict[str, str]]:
    """The per-instruction rows of `ncu --page source --print-source sass --csv`."""
    start = text.find('"Address"')
    return list(csv.DictReader(io.StringIO(text[start:]))) if start >= 0 else []


def _opcode(sass: str) -> str:
    parts = sass.split()
    if parts and parts[0].startswith("@"):
        parts = parts[1:]
    return parts[0].split(".")[0] if parts else ""


def _num(s: str) -> float:
    return float(str(s).replace(",", "") or 0)


def per_instruction(rows, opcode: str, column: str) -> float:
    """`column` averaged over the executions of every `opcode` instruction (weighted by how often
    each ran, so a rarely taken tail does not count as much as the main loop)."""
    total = weight = 0.0
    for r in rows:
        if _opcode(r.get("Source", "")) != opcode:
            continue
        n = _num(r.get("Instructions Executed", 0))
        total += n * _num(r.get(column, 0))
        weight += n
    if not weight:
        raise ValueError(f"no executed {opcode} instruction in the capture")
    return total / weight


def tree_wavefronts(index: Callable[[int, int], int], active: Callable[[int, int], bool], strides,
                    block: int = 256) -> tuple[int, int]:
    """Shared-load wavefronts and issued LDS instructions of one block's reduction tree, with the
    `if` predicated (what NVRTC emits for these one-line bodies): every warp issues both loads of
    every step; only active lanes touch memory. Plus the final `s[0]` read, issued by every warp."""
    warps = block // 32
    wavefronts = requests = 0
    for s in strides:
        for w in range(warps):
            for offset in (0, s):  # s[i] and s[i + stride]
                addrs = addresses(lambda tx, *_: index(tx, s) + offset if active(tx, s) else None, Block(block), w)
                requests += 1
                if any(a is not None for a in addrs):
                    wavefronts += shared_access(addrs, 4).wavefronts
    requests += warps
    wavefronts += 1
    return wavefronts, requests


_DOWN = (1, 2, 4, 8, 16, 32, 64, 128)


def _reduction_prediction(rung: int) -> float:
    if rung == 1:
        wf, rq = tree_wavefronts(lambda t, s: t, lambda t, s: t % (2 * s) == 0, _DOWN)
    elif rung == 2:
        wf, rq = tree_wavefronts(lambda t, s: 2 * s * t, lambda t, s: 2 * s * t < 256, _DOWN)
    else:
        wf, rq = tree_wavefronts(lambda t, s: t, lambda t, s: t < s, _DOWN[::-1])
    return wf / rq


def _analysis(name: str, field: str) -> Callable[[], float]:
    return lambda: float(getattr(ANALYSES[name][1](), field))


def _mean(*fns) -> Callable[[], float]:
    return lambda: sum(f() for f in fns) / len(fns)


@dataclass(frozen=True)
class Check:
    name: str
    capture: str  # file stem in the capture folder
    quantity: str
    predict: Callable[[], float]
    measure: Callable[[str], float]  # from the capture's text
    why: str = ""


def _ratio(num: str, den: str) -> Callable[[str], float]:
    def measure(text: str) -> float:
        t = kernel_totals(text)
        return t[num] / t[den]

    return measure


def _source(opcode: str, column: str) -> Callable[[str], float]:
    return lambda text: per_instruction(source_rows(text), opcode, column)


def _per_warp_divergent_branches(text: str) -> float:
    rows = source_rows(text)
    divergent = sum(_num(r.get("Divergent Branches", 0)) for r in rows)
    warps = per_instruction_count(rows, "EXIT") or 1.0
    return divergent / warps


def per_instruction_count(rows, opcode: str) -> float:
    """Warp-level executions of the first `opcode` instruction (e.g. EXIT: once per warp)."""
    for r in rows:
        if _opcode(r.get("Source", "")) == opcode:
            return _num(r.get("Instructions Executed", 0))
    return 0.0


CHECKS: tuple[Check, ...] = (
    Check("gemm/01_naive loads (A and B, one each per k)", "gemm_1", "global load sectors / request",
          _mean(_analysis("gemm/01_naive A load", "sectors"), _analysis("gemm/01_naive B load", "sectors")),
          _ratio(LD_SEC, LD_REQ)),
    Check("gemm/02_coalesced loads (A and B, one each per k)", "gemm_2", "global load sectors / request",
          _mean(_analysis("gemm/02_coalesced A load", "sectors"), _analysis("gemm/02_coalesced B load", "sectors")),
          _ratio(LD_SEC, LD_REQ)),
    Check("transpose/01_naive read in[y][x]", "transpose_naive", "global load sectors / request",
          _analysis("transpose naive read (in[y][x])", "sectors"), _ratio(LD_SEC, LD_REQ)),
    Check("transpose/01_naive write out[x][y]", "transpose_naive", "global store sectors / request",
          _analysis("transpose naive write (out[x][y])", "sectors"), _ratio(ST_SEC, ST_REQ)),
    Check("transpose/02_shared_tile column read", "transpose_shared_tile", "shared load wavefronts / request",
          _analysis("transpose tile[32][32] column read", "wavefronts"), _ratio(SH_WF, SH_REQ)),
    Check("transpose/03_padded_tile column read", "transpose_padded_tile_source", "LDS n-way conflict (SASS)",
          _analysis("transpose tile[32][33] column read (padded)", "wavefronts"),
          _source("LDS", "L1 Conflicts Shared N-Way"),
          "instruction level: the kernel-level counter adds arbitration between warps (1.12 here)"),
    Check("transpose/05_wide_tile column read", "transpose_wide_tile_source", "LDS n-way conflict (SASS)",
          _analysis("transpose wide tile[64][65] column read", "wavefronts"),
          _source("LDS", "L1 Conflicts Shared N-Way")),
    Check("reduction/01 tree, tid % (2s) == 0", "reduction_1", "shared load wavefronts / request",
          lambda: _reduction_prediction(1), _ratio(SH_WF, SH_REQ),
          "whole tree simulated lane by lane; predicated-off warps issue LDS with no wavefront"),
    Check("reduction/02 tree, s[2*s*tid]", "reduction_2", "shared load wavefronts / request",
          lambda: _reduction_prediction(2), _ratio(SH_WF, SH_REQ)),
    Check("reduction/03 tree, tid < s", "reduction_3", "shared load wavefronts / request",
          lambda: _reduction_prediction(3), _ratio(SH_WF, SH_REQ)),
    Check("branch/01_even_odd polynomial FMAs", "branch_1_source", "active lanes per FFMA (SASS)",
          lambda: 32 * ANALYSES["branch i & 1 (even/odd lanes)"][1]().work_fraction,
          _source("FFMA", "Avg. Threads Executed")),
    Check("branch/01_even_odd parity branch", "branch_1_source", "divergent branches per warp",
          lambda: float(ANALYSES["branch i & 1 (even/odd lanes)"][1]().divergent), _per_warp_divergent_branches),
    Check("branch/02_branch_free (no branch)", "branch_2", "active lanes per instruction",
          lambda: 32.0, _ratio("smsp__thread_inst_executed.sum", "smsp__inst_executed.sum")),
)


def evaluate(folder: str | Path, checks=CHECKS) -> list[dict]:
    """One row per check whose capture is in `folder`: prediction, measurement, relative difference."""
    folder = Path(folder)
    rows = []
    for c in checks:
        path = folder / f"{c.capture}.csv"
        row = {"check": c.name, "quantity": c.quantity, "predicted": c.predict(), "measured": None,
               "difference": None, "note": c.why}
        if path.is_file():
            try:
                row["measured"] = c.measure(path.read_text())
                row["difference"] = abs(row["measured"] - row["predicted"]) / abs(row["predicted"])
            except (KeyError, ValueError, ZeroDivisionError) as exc:
                row["note"] = f"not measured: {exc}"
        else:
            row["note"] = f"no capture {path.name}"
        rows.append(row)
    return rows
