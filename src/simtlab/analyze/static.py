"""Static report of a family's rungs for an architecture: compile through
NVRTC (no GPU needed), read resources, compute theoretical occupancy at the
rung's launch geometry for a representative problem."""

from __future__ import annotations

from ..catalog import Family, Rung
from ..hw.occupancy import max_threads_per_block
from ..compile import CompileError
from ..launch import UnsupportedArchError, build, choose_params, unsupported_reason


def static_report(fam: Family, arch: str, rungs: list[Rung] | None = None, size: str | None = None,
                  on_rung=None) -> list[dict]:
    """`on_rung(rung)` is called as each rung starts (a progress bar)."""
    op = fam.op()
    problem = op.parse_size(size or fam.default_sizes[-1])
    entries = []
    for rung in rungs or fam.rungs:
        if on_rung:
            on_rung(rung)
        base = {"rung": rung.id, "stage": rung.stage, "lesson": rung.lesson, "arch": arch, "problem": problem.label}
        reason = unsupported_reason(rung, problem)
        if reason:  # e.g. a TF32 problem for a rung with no TF32 form: said, not compiled into an error
            entries.append({**base, "error": f"unsupported: {reason}", "log": reason, "unsupported": True,
                            "not_for": "problem"})
            continue
        try:  # at the parameters a run of this problem would use (its dtype, radius, row length...)
            inst = build(rung, choose_params(rung, problem, None, rung.widest_vec), arch)
        except (CompileError, UnsupportedArchError) as exc:
            entries.append({**base, "error": str(exc).splitlines()[0], "log": getattr(exc, "log", str(exc)),
                            "unsupported": isinstance(exc, UnsupportedArchError)})
            continue
        launch = inst.geometry(problem, None)
        for vec in ((True, False) if rung.vec_variant else (None,)):
            res = inst.resources(vec)
            occ = inst.occupancy(launch, vec)
            entries.append({
                **base,
                "params": inst.params,
                "expression": inst.expression(vec),
                "variant": {True: "128-bit", False: "predicated scalar", None: "single"}[vec],
                "threads": launch.threads,
                "grid_blocks": launch.blocks,
                "shared_dynamic": launch.shared,
                **res.as_dict(),
                "max_threads_per_block": max_threads_per_block(arch, res.registers, res.max_threads_declared),
                "occupancy": occ.occupancy,
                "blocks_per_sm": occ.blocks_per_sm,
                "limiter": occ.limiter,
                "cached": inst.cubin.from_cache,
            })
    return entries


def sass_report(fam: Family, arch: str, rungs: list[Rung] | None = None, on_rung=None) -> list[dict]:
    """Per rung and path: the SASS summary and whether the rung's expected instructions are there
    (checked on the 128-bit path, where the lesson lives) and no local-memory traffic appears.
    `on_rung(rung)` is called as each rung starts."""
    from .sass import kernel_sass

    entries = []
    for rung in rungs or fam.rungs:
        if on_rung:
            on_rung(rung)
        base = {"rung": rung.id, "stage": rung.stage, "arch": arch, "expected": list(rung.sass_expect)}
        try:
            inst = build(rung, None, arch)
        except (CompileError, UnsupportedArchError) as exc:
            entries.append({**base, "error": str(exc).splitlines()[0],
                            "unsupported": isinstance(exc, UnsupportedArchError)})
            continue
        for vec in ((True, False) if rung.vec_variant else (None,)):
            s = kernel_sass(inst.cubin, inst.expression(vec))
            missing = [p for p in rung.sass_expect if not s.has(p)] if vec in (True, None) else []
            entries.append({**base, "expression": inst.expression(vec),
                            "variant": {True: "128-bit", False: "predicated scalar", None: "single"}[vec],
                            **s.as_dict(), "missing": missing, "ok": not missing and s.spill_instructions == 0})
    return entries
