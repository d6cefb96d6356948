"""SASS report: the machine code NVRTC produced, per kernel, with no GPU.

Disassembles a cubin with `cuobjdump --dump-sass` (on the PATH, or from the
`nvidia-cuda-cuobjdump` wheel of the `sass` extra) and summarises it: the
instruction mix, memory access widths (LDG.E.128 vs LDG.E), barriers,
local-memory traffic (LDL/STL: spills), shuffles, tensor-core instructions,
and the main loop (the largest backward branch) with its FMA share - the
instruction-level facts each rung of a ladder is meant to change.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

__all__ = ["SassUnavailable", "Instruction", "cuobjdump", "disassemble", "parse_sass", "summarize", "SassSummary"]


class SassUnavailable(RuntimeError):
    """No cuobjdump: install the `sass` extra (pip install 'simtlab[sass]') or a CUDA toolkit."""


@cache
def cuobjdump() -> str:
    env = os.environ.get("SIMTLAB_CUOBJDUMP")
    if env:
        return env
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        import nvidia  # namespace package of NVIDIA's CUDA wheels

        for base in nvidia.__path__:
            for cand in sorted(Path(base).glob("*/bin/cuobjdump")):
                if os.access(cand, os.X_OK):
                    return str(cand)
    except ImportError:
        pass
    raise SassUnavailable("cuobjdump not found: pip install 'simtlab[sass]' (or put a CUDA toolkit on PATH)")


def disassemble(cubin: Path, function: str | None = None) -> str:
    cmd = [cuobjdump(), "--dump-sass"]
    if function:
        cmd += ["-fun", function]
    out = subprocess.run(cmd + [str(cubin)], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"cuobjdump failed on {cubin}: {out.stderr.strip()[:400]}")
    return out.stdout


@dataclass(frozen=True)
class Instruction:
    address: int
    predicate: str  # '' or e.g. '@!P0'
    opcode: str  # with modifiers: 'LDG.E.128.CONSTANT'
    operands: str

    @property
    def base(self) -> str:
        return self.opcode.split(".")[0]

    @property
    def width(self) -> int:
        """Access width in bits for memory instructions (32 when no width modifier is given)."""
        for part in self.opcode.split(".")[1:]:
            if part in ("8", "16", "32", "64", "128"):
                return int(part)
            if part in ("U8", "S8"):
                return 8
            if part in ("U16", "S16"):
                return 16
        return 32


_FUNC = re.compile(r"^\s*Function : (\S+)")
_INSTR = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)\s*([^;]*);")


def parse_sass(text: str) -> dict[str, list[Instruction]]:
    """Instructions per function, in address order."""
    out: dict[str, list[Instruction]] = {}
    current = None
    for line in text.splitlines():
        m = _FUNC.match(line)
        if m:
            current = m.group(1)
            out[current] = []
            continue
        m = _INSTR.match(line)
        if m and current is not None:
            out[current].append(Instruction(int(m.group(1), 16), (m.group(2) or "").strip(), m.group(3),
                                            m.group(4).strip()))
    return out


_MEMORY = ("LDG", "STG", "LDS", "STS", "LDL", "STL", "LDGSTS", "LDSM", "STSM", "ATOMG", "RED")


@dataclass
class SassSummary:
    function: str
    instructions: int
    mix: dict[str, int]  # base opcode -> count
    memory: dict[str, int]  # e.g. 'LDG.128' -> count
    spill_instructions: int  # LDL + STL
    barriers: int
    loop_instructions: int  # the main loop's body (0 if none)
    loop_mix: dict[str, int] = field(default_factory=dict)

    @property
    def loop_fma_share(self) -> float:
        fmas = sum(self.loop_mix.get(op, 0) for op in _MULTIPLY_ADDS)
        return fmas / self.loop_instructions if self.loop_instructions else 0.0

    def has(self, pattern: str) -> bool:
        """Whether an opcode (base, or base.width like 'LDG.128') appears anywhere."""
        return self.mix.get(pattern, 0) > 0 or self.memory.get(pattern, 0) > 0

    def as_dict(self) -> dict:
        return {"function": self.function, "instructions": self.instructions, "mix": self.mix, "memory": self.memory,
                "spill_instructions": self.spill_instructions, "barriers": self.barriers,
                "loop_instructions": self.loop_instructions, "loop_fma_share": round(self.loop_fma_share, 4),
                "loop_mix": self.loop_mix}


_MULTIPLY_ADDS = ("FFMA", "HMMA", "HGMMA", "DFMA", "HFMA2")


def _main_loop(instrs: list[Instruction]) -> list[Instruction]:
    """The hot loop: of the backward branches' bodies that hold multiply-adds and contain no
    other such loop (a persistent kernel's loop over tiles contains its main loop), the one with
    the most; without multiply-adds, the largest body."""
    loops = []  # (first address, branch address, body, multiply-adds)
    for ins in instrs:
        if ins.base != "BRA":
            continue
        m = re.search(r"0x([0-9a-f]+)", ins.operands)
        if not m or int(m.group(1), 16) >= ins.address:
            continue
        target = int(m.group(1), 16)
        body = [i for i in instrs if target <= i.address <= ins.address]
        loops.append((target, ins.address, body, sum(1 for i in body if i.base in _MULTIPLY_ADDS)))
    hot = [lp for lp in loops if lp[3] and not any(
        o is not lp and o[3] and lp[0] <= o[0] and o[1] <= lp[1] for o in loops)]
    if hot:
        return max(hot, key=lambda lp: (lp[3], -len(lp[2])))[2]
    return max((lp[2] for lp in loops), key=len, default=[])


def summarize(function: str, instrs: list[Instruction]) -> SassSummary:
    mix = Counter(i.base for i in instrs if i.base != "NOP")
    memory = Counter(f"{i.base}.{i.width}" for i in instrs if i.base in _MEMORY)
    loop = _main_loop(instrs)
    return SassSummary(
        function=function,
        instructions=sum(mix.values()),
        mix=dict(mix),
        memory=dict(memory),
        spill_instructions=mix.get("LDL", 0) + mix.get("STL", 0),
        barriers=mix.get("BAR", 0),
        loop_instructions=sum(1 for i in loop if i.base != "NOP"),
        loop_mix=dict(Counter(i.base for i in loop if i.base != "NOP")),
    )


def kernel_sass(cubin, expression: str) -> SassSummary:
    """Summary of one kernel of a compiled module (a `simtlab.compile.Cubin`)."""
    mangled = cubin.mangled(expression)
    funcs = parse_sass(disassemble(cubin.path, mangled))
    if mangled not in funcs:
        raise RuntimeError(f"cuobjdump printed no SASS for {expression} ({mangled})")
    return summarize(expression, funcs[mangled])
