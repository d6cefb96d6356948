"""`simtlab explain`: why a rung runs at the speed it does.

One page per rung: its lesson and the header of its kernel file (what changed
and what it should buy), the predicted effect against the rung it changes (the
one before, or the one its header names: Rung.builds_on) from static facts
(registers, occupancy, bytes requested per FLOP, the SASS: access widths, shared
loads, barriers, main-loop FMA share), the measured effect from the store, and
the limiter that the numbers point to.
"""

from __future__ import annotations

import statistics

from ..catalog import Family, Rung
from ..compile import KERNELS_DIR
from ..launch import build, choose_params, rung_source
from ..ops.base import DEFAULT_SMS
from .waves import waves


def header_comment(rung: Rung) -> str:
    lines = []
    for line in (KERNELS_DIR / rung.source).read_text().splitlines():
        if not line.startswith("//"):
            break
        lines.append(line[2:].strip())
    return " ".join(lines)


def static_facts(rung: Rung, arch: str, problem) -> dict:
    from .sass import SassUnavailable, kernel_sass, loop_cycles

    vec = rung.widest_vec
    inst = build(rung, choose_params(rung, problem, None, vec), arch)  # (the size's shape, where it has one)
    launch = inst.geometry(problem, None)
    res = inst.resources(vec)
    occ = inst.occupancy(launch, vec)
    facts = {
        "expression": inst.expression(vec), "threads": launch.threads, "registers": res.registers,
        "shared_bytes": res.shared_static + launch.shared, "spill_bytes": res.spill_bytes,
        "occupancy": occ.occupancy, "limiter": occ.limiter,
        "flop_per_requested_byte": problem.flops / rung.requested_bytes(inst.params, problem),
    }
    w = waves(rung, inst.params, problem, launch.blocks, occ.blocks_per_sm, DEFAULT_SMS)  # (the geometry above assumes the same SM count)
    if w is not None:
        facts["rounds"] = f"{w.rounds:.2f} on {DEFAULT_SMS} SMs, {w.idle_share:.0%} idle"
    try:
        s = kernel_sass(inst.cubin, inst.expression(vec))
        facts.update(sass_memory=s.memory, barriers=s.barriers, loop_instructions=s.loop_instructions,
                     loop_fma_share=s.loop_fma_share, loop_cycles=loop_cycles([p.as_dict() for p in s.loop_paths]),
                     tensor_cores="HGMMA" if s.has("HGMMA") else "HMMA" if s.has("HMMA") else None)
    except SassUnavailable:
        pass
    return facts


def measured(store, fam: Family, rung: Rung, device: str | None) -> tuple[dict[str, dict], bool]:
    """Per problem, a rung's verified results among the rows measured on its source as it stands
    (where there are none, among all the rows of earlier versions: second value True): the best
    row (its time, rates and share of the reference), and the share of the reference in the latest
    run and the median over the runs (each run's best), with the count of runs - the best alone
    overstates what a run gives, the latest alone is one draw of the noise."""
    if store is None:
        return {}, False
    rows = store.rows_per_problem(fam.name, rung.id, device, source=rung_source(rung))
    earlier = not rows
    if earlier:
        rows = store.rows_per_problem(fam.name, rung.id, device)
    out = {}
    for problem, found in rows.items():
        best = min(found, key=lambda r: r["median_ms"] if r["median_ms"] is not None else float("inf"))
        per_run: dict[int, dict] = {}
        for r in found:  # (a run's best row: sweeps store several)
            if r["run"] not in per_run or (r["median_ms"] or 0) < (per_run[r["run"]]["median_ms"] or 0):
                per_run[r["run"]] = r
        shares = [r["pct_of_reference"] for r in per_run.values() if r["pct_of_reference"] is not None]
        latest = per_run[max(per_run)]
        out[problem] = {**{k: best[k] for k in ("median_ms", "gflops", "gbs", "pct_of_reference")},
                        "best_run": best["run"], "latest_pct": latest["pct_of_reference"], "latest_run": latest["run"],
                        "median_pct": statistics.median(shares) if shares else None, "runs": len(per_run)}
    return out, bool(out) and earlier


COPY = "device copy"  # the memory-bound ladders' bandwidth yardstick, timed beside their library


def copy_share(got: dict[str, dict], copy: dict[str, float], problem: str | None = None) -> float | None:
    """The share of the device copy's bandwidth a rung reached on `problem` (the page's), or where
    that was not measured beside the copy, on the largest problem that was - the figure the limiter
    reads (None where the copy was not timed beside the rung at all)."""
    timed = [p for p in got if got[p].get("gbs") and copy.get(p)]
    if not timed:
        return None
    if problem not in timed:
        problem = max(timed, key=_size_of)
    return got[problem]["gbs"] / copy[problem]


def _size_of(label: str) -> float:
    """A problem label's size, for picking the largest: the product of its numbers (2^30, 4096x4096)."""
    import re

    size = 1.0
    for base, power in re.findall(r"(\d+)(?:\^(\d+))?", label.split(":")[0]):
        size *= float(base) ** (int(power) if power else 1)
    return size


def limiter(fam: Family, facts: dict, pct_of_reference: float | None, copy: float | None = None) -> str:
    """The most likely limit, read off the numbers (a lead to check with a profiler, not a proof).
    `copy`: the share of the device copy's bandwidth reached, where the family's reference is a
    library (CUB, cuSPARSE) rather than the copy - being at the library's rate is not being at
    the memory's then."""
    tensor = facts.get("tensor_cores")
    if fam.metric == "gbs" and copy is not None:
        if copy >= 0.85:
            return f"memory bandwidth: {copy * 100:.0f}% of the device copy's rate"
        if pct_of_reference is not None and pct_of_reference >= 90:
            return (f"not memory bandwidth: {copy * 100:.0f}% of the device copy's rate, yet at the library's - the "
                    "work done on each byte besides moving it sets the pace (check the stall reasons with `ncu`)")
    if pct_of_reference is not None and pct_of_reference >= 90:
        if fam.metric == "gbs":
            return "memory bandwidth: at the device copy's rate"
        return ("compute: at the library's rate, near the tensor cores' practical limit" if tensor
                else "compute: at the library's rate, near the FMA pipe's practical limit")
    if tensor == "HMMA":  # one MMA instruction does the work of hundreds of FMAs: its feed is the limit
        return ("feeding the tensor cores: fragments go through registers (ldmatrix/LDS) and every warp waits "
                "on barriers between slices; Hopper's wgmma reads shared memory directly, fed by TMA")
    if tensor == "HGMMA":
        return "the wgmma pipeline: slice waits and epilogue stores between multiplies (check stall reasons with `ncu`)"
    if fam.metric == "gbs":
        if facts["occupancy"] < 0.5:
            return "latency: low occupancy leaves too few bytes in flight"
        return "latency: too few bytes in flight per thread (wider or more independent loads)"
    if facts["flop_per_requested_byte"] < 4:
        return "memory: every FMA waits on global loads (no on-chip reuse)"
    if facts.get("loop_fma_share", 1.0) < 0.7:
        return (f"instruction overhead: only {facts['loop_fma_share'] * 100:.0f}% of the main loop's instructions "
                "are FMAs (shared loads, address math, barriers)")
    if facts["occupancy"] <= 0.25:
        return (f"latency: {facts['occupancy'] * 100:.0f}% occupancy ({facts['limiter']}) leaves few warps to hide "
                "shared-memory and barrier stalls")
    return "latency/scheduling: check stall reasons with `ncu`"


def explain(fam: Family, rung: Rung, arch: str, store=None, device: str | None = None, size: str | None = None) -> dict:
    problem = fam.op().parse_size(size or fam.default_sizes[-1])
    prev = next((r for r in fam.rungs if r.stage == rung.base_stage), None)
    here = static_facts(rung, arch, problem)
    before = static_facts(prev, arch, problem) if prev else None
    got, earlier = measured(store, fam, rung, device)
    got_prev = measured(store, fam, prev, device)[0] if prev else {}
    speedups = {p: got_prev[p]["median_ms"] / m["median_ms"] for p, m in got.items() if p in got_prev}
    best_pct = max((m["pct_of_reference"] or 0 for m in got.values()), default=None) if got else None
    share = (copy_share(got, store.reference_per_problem(fam.name, COPY, device), problem.label)
             if store is not None and got else None)
    return {
        "rung": rung.id, "lesson": rung.lesson, "header": header_comment(rung), "arch": arch,
        "problem": problem.label, "previous": prev.id if prev else None, "static": here, "static_previous": before,
        "measured": got, "measured_on_earlier_source": earlier, "speedup_over_previous": speedups,
        "limiter": limiter(fam, here, best_pct, share),
    }
