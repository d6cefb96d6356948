"""A static plan for a GPU you may not have: per rung, the compile-time facts
(registers, shared memory, spills, occupancy and its limiter), the bytes it
requests from global memory per FLOP (what tiling changes), and the roof the
problem would hit on that GPU (datasheet ceilings, or measured ones from the
store)."""

from __future__ import annotations

from ..catalog import Family
from .roofline import Ceilings
from .static import static_report
from .waves import waves


def plan(fam: Family, arch: str, ceilings: Ceilings | None, size: str | None = None, sms: int | None = None) -> dict:
    """`sms`: the GPU's SM count, for each rung's rounds of work (wave quantization)."""
    op = fam.op()
    problem = op.parse_size(size or fam.default_sizes[-1])
    intensity = problem.flops / problem.bytes
    rows = []
    for e in static_report(fam, arch, size=problem.label.split()[0]):
        if e.get("error") or e.get("variant") == "predicated scalar":
            if e.get("error"):
                rows.append(e)
            continue
        rung = fam.rung(e["rung"].split("/")[-1].split("_", 1)[1])
        requested = rung.requested_bytes(e["params"], problem)
        row = {**e, "requested_bytes": requested, "flop_per_requested_byte": problem.flops / requested}
        if sms:
            w = waves(rung, e["params"], problem, e["grid_blocks"], e["blocks_per_sm"], sms)
            row["waves"] = w.as_dict() if w else None
        rows.append(row)
    out = {"family": fam.name, "arch": arch, "problem": problem.label, "flops": problem.flops,
           "min_bytes": problem.bytes, "intensity": intensity, "rungs": rows}
    if ceilings is not None:
        out.update(ceilings=ceilings.as_dict(), roof_gflops=ceilings.roof(intensity), bound=ceilings.bound(intensity))
    return out
