"""What a configuration's build says about its speed before it runs: the registers ptxas gave it,
the blocks an SM then holds, and how its grid's work falls into rounds of those slots at the
problem's size (wave quantization). Two points of one space can differ by 65% on this alone - gemm
rung 8's 64x128 tile at 2048³ runs 512 blocks in one round where ptxas gives it 127 registers (4
blocks an SM, 528 slots) and in two, the second 29% full, at 139 (3 an SM) - a cliff a model of the
parameters cannot see from a few measured points, and the tuner's cost model is given it
(docs/design/tune.md)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Mapping

from ..analyze.waves import Waves

__all__ = ["StaticProfile", "static_profile", "profile_of", "least_wasted", "profile_space"]


@dataclass(frozen=True)
class StaticProfile:
    registers: int
    blocks_per_sm: int
    warps_per_sm: int
    units: int  # the grid's blocks, or a persistent grid's tiles
    slots: int  # units that run at once (SMs x blocks an SM, or the persistent grid)

    @property
    def rounds(self) -> float:
        return Waves(self.units, self.slots).rounds

    @property
    def idle_share(self) -> float:
        """Share of the slots' time the last round leaves idle (every unit taking the same time)."""
        return Waves(self.units, self.slots).idle_share

    def features(self) -> list[float]:
        """What the cost model sees: whole rounds, the idle share, warps an SM, registers."""
        return [float(math.ceil(self.rounds)), self.idle_share, float(self.warps_per_sm), float(self.registers)]

    def as_dict(self) -> dict:
        return asdict(self)


def static_profile(rung, params: Mapping[str, int], problem, arch: str, sms: int, device=None) -> StaticProfile | None:
    """`rung` built at `params` (the configuration completed as it runs: size defaults and fixed
    parameters under it) for `arch` - from the compile cache where the precompiler built it - and
    launched on `problem` over `sms` SMs; None where no block fits on an SM."""
    from ..analyze.waves import waves
    from ..launch import build

    inst = build(rung, params, arch)
    launch = inst.geometry(problem, device)
    vec = rung.widest_vec
    occ = inst.occupancy(launch, vec)
    w = waves(rung, inst.params, problem, launch.blocks, occ.blocks_per_sm, sms)
    if w is None:
        return None
    return StaticProfile(inst.resources(vec).registers, occ.blocks_per_sm, occ.warps_per_sm, w.units, w.slots)


def least_wasted(configs: list, profile, most_idle: float = 0.2) -> list:
    """The configurations whose last round leaves at most `most_idle` of the slots' time idle (points
    without a profile left out)."""
    out = []
    for c in configs:
        p = profile(c)
        if p is not None and p.idle_share <= most_idle:
            out.append(c)
    return out


def profile_of(rung, params: Mapping[str, int], problem, arch: str, sms: int, device=None) -> tuple:
    """(its StaticProfile, None), or (None, why it has none): it does not compile, the launch
    refuses it at this size, or no block of it fits on an SM."""
    from ..compile import CompileError

    try:
        p = static_profile(rung, params, problem, arch, sms, device)
    except CompileError as exc:
        return None, f"does not compile: {str(exc).splitlines()[0]}"
    except ValueError as exc:  # (the launch's refusal, as session.runnable_at counts it)
        return None, str(exc)
    return (p, None) if p is not None else (None, "no block of it fits on an SM")


def profile_space(rung, configs: list, complete, problem, device, compiler=None, on_done=None) -> tuple[dict, dict]:
    """Every configuration's profile on `device` (Space.key -> StaticProfile), built by `compiler`'s
    processes where given (tune.worker.Precompiler), and the configurations that have none, counted
    by reason (profile_of's: they would fail without running). `complete(config)` gives the
    parameters it is built with; `on_done()` hears each one."""
    from ..space import Space

    if compiler is not None:
        compiler.submit(configs)
    profiles, refused = {}, {}
    for c in configs:
        if compiler is not None:
            compiler.wait(c)
        p, reason = profile_of(rung, rung.params(device.arch, complete(c)), problem, device.arch, device.sms, device)
        if p is not None:
            profiles[Space.key(c)] = p
        else:
            refused[reason] = refused.get(reason, 0) + 1
        if on_done:
            on_done()
    return profiles, refused
