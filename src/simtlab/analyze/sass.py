"""SASS report: the machine code NVRTC produced, per kernel, with no GPU.

Disassembles a cubin with `cuobjdump --dump-sass` (on the PATH, or from the
`nvidia-cuda-cuobjdump` wheel of the `sass` extra) and summarises it: the
instruction mix, memory access widths (LDG.E.128 vs LDG.E), barriers,
local-memory traffic (LDL/STL: spills), shuffles, tensor-core instructions,
and the main loop (the largest backward branch) with its FMA share - the
instruction-level facts each rung of a ladder is meant to change.

Each instruction's control bits (the top 23 bits of its 128-bit word, Volta
and later) are kept too, and two of their fields read: the stall count ptxas
wrote for it (cycles before the warp may issue its next instruction) and its
operand reuse flags. Summed along a path through the main loop, the stall counts
are the cycles one iteration takes with no dynamic stall at all - the fixed
latencies the compiler could not hide. The loop's paths (a slice with or
without copies, a predicated or unpredicated copy) are listed separately,
since summing both sides of a branch would describe no iteration that runs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

__all__ = ["SassUnavailable", "Instruction", "LoopPath", "cuobjdump", "disassemble", "parse_sass", "summarize",
           "loop_paths", "loop_cycles", "SassSummary"]


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
    """cuobjdump's SASS of a cubin (or one function of it). For a cubin of the compile cache the
    dump is kept beside it: a cached cubin's name is its content's key, so its disassembly never
    changes (a second `simtlab sass` reads it back instead of running cuobjdump again)."""
    import hashlib

    from ..compile import cache_dir

    tool = cuobjdump()
    cubin = Path(cubin)
    kept = None
    if cubin.parent.resolve() == cache_dir().resolve():
        tag = hashlib.sha256(f"{tool}:{function or ''}:{cubin.stat().st_size}:{cubin.stat().st_mtime_ns}".encode())
        kept = cubin.with_name(f"{cubin.name}.{tag.hexdigest()[:16]}.sass")
        try:
            return kept.read_text()
        except OSError:
            pass
    cmd = [tool, "--dump-sass"]
    if function:
        cmd += ["-fun", function]
    out = subprocess.run(cmd + [str(cubin)], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"cuobjdump failed on {cubin}: {out.stderr.strip()[:400]}")
    if kept is not None:
        try:  # (a read-only cache folder: the dump is simply not kept)
            tmp = kept.with_name(f".{kept.name}.{os.getpid()}.tmp")
            tmp.write_text(out.stdout)
            os.replace(tmp, kept)
        except OSError:
            pass
    return out.stdout


@dataclass(frozen=True)
class Instruction:
    address: int
    predicate: str  # '' or e.g. '@!P0'
    opcode: str  # with modifiers: 'LDG.E.128.CONSTANT'
    operands: str
    control: int | None = None  # the control bits (bits 105-127 of the word), when the dump has them

    @property
    def stall(self) -> int:
        """Cycles before the warp may issue its next instruction (1 = back to back; 1 when unknown)."""
        return self.control & 0xF if self.control is not None else 1

    @property
    def reuse_flags(self) -> int:
        """One bit per source operand slot kept in the operand reuse cache (`.reuse` in the text)."""
        return self.control >> 17 & 0xF if self.control is not None else 0

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
_WORD = re.compile(r"/\*\s*(0x[0-9a-f]{16})\s*\*/\s*$")  # a 64-bit half of the encoding, at a line's end


def parse_sass(text: str) -> dict[str, list[Instruction]]:
    """Instructions per function, in address order. cuobjdump prints each 128-bit instruction as
    two 64-bit words, the low one on the instruction's line and the high one (control bits in its
    top 23 bits) on the next line; a dump without them leaves `control` None."""
    out: dict[str, list[Instruction]] = {}
    current = None
    high_word_next = False  # the last instruction's line carried its low word: the next line has the high one
    for line in text.splitlines():
        m = _FUNC.match(line)
        if m:
            current = m.group(1)
            out[current] = []
            high_word_next = False
            continue
        m = _INSTR.match(line)
        if m and current is not None:
            out[current].append(Instruction(int(m.group(1), 16), (m.group(2) or "").strip(), m.group(3),
                                            m.group(4).strip()))
            high_word_next = bool(_WORD.search(line))
            continue
        w = _WORD.search(line)
        if w and high_word_next:
            out[current][-1] = replace(out[current][-1], control=int(w.group(1), 16) >> 41)
            high_word_next = False
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
    loop_paths: list = field(default_factory=list)  # LoopPath per way through the body, shortest first

    @property
    def loop_fma_share(self) -> float:
        fmas = sum(self.loop_mix.get(op, 0) for op in _MULTIPLY_ADDS)
        return fmas / self.loop_instructions if self.loop_instructions else 0.0

    def has(self, pattern: str) -> bool:
        """Whether an opcode (base, or base.width like 'LDG.128') appears anywhere; 'A|B': either
        (one instruction spelled differently by two architectures, as sm_80's RED and sm_90's REDG)."""
        return any(self.mix.get(p, 0) > 0 or self.memory.get(p, 0) > 0 for p in pattern.split("|"))

    def as_dict(self) -> dict:
        return {"function": self.function, "instructions": self.instructions, "mix": self.mix, "memory": self.memory,
                "spill_instructions": self.spill_instructions, "barriers": self.barriers,
                "loop_instructions": self.loop_instructions, "loop_fma_share": round(self.loop_fma_share, 4),
                "loop_mix": self.loop_mix, "loop_paths": [p.as_dict() for p in self.loop_paths]}


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


@dataclass(frozen=True)
class LoopPath:
    """One way through the main loop's body, from its first instruction to its backward branch."""

    instructions: int  # issued (NOPs not counted)
    cycles: int  # the stall counts summed (NOPs included): an iteration with no dynamic stall
    mix: dict[str, int]

    @property
    def fixed_stalls(self) -> int:
        """Cycles beyond one an instruction: the latencies ptxas waits out in the control codes."""
        return self.cycles - self.instructions

    def as_dict(self) -> dict:
        return {"instructions": self.instructions, "cycles": self.cycles, "fixed_stalls": self.fixed_stalls,
                "mix": self.mix}


def _target(ins: Instruction) -> int | None:
    m = re.search(r"0x([0-9a-f]+)", ins.operands) if ins.base == "BRA" else None
    return int(m.group(1), 16) if m else None


def loop_paths(loop: list[Instruction], limit: int = 64) -> list[LoopPath]:
    """The distinct paths through a loop body (`_main_loop`), shortest first; where there are more
    than `limit`, only the two with the fewest and the most cycles (most such combinations of
    branches never run together). A branch forward inside the body may be taken or not; the
    branch back to the top ends the iteration; branches out of the body (the retry side of a barrier wait, placed after the
    function) and backward branches inside it (retry loops) are taken as not taken - the path a
    warp follows when it does not wait. Needs the control bits (`Instruction.control`)."""
    if not loop or any(i.control is None for i in loop):
        return []
    top, bottom = loop[0].address, loop[-1].address
    index = {ins.address: k for k, ins in enumerate(loop)}
    # basic blocks: leaders at the top, at forward targets inside the body, after every branch
    leaders = {0}
    for k, ins in enumerate(loop):
        t = _target(ins)
        if t is not None:
            if k + 1 < len(loop):
                leaders.add(k + 1)
            if top < t <= bottom and t > ins.address:
                leaders.add(index[t])
    starts = sorted(leaders)
    blocks = []  # (first, last) indices
    for a, b in zip(starts, starts[1:] + [len(loop)]):
        blocks.append((a, b - 1))
    block_of = {a: n for n, (a, _) in enumerate(blocks)}

    def successors(n: int) -> list[int | None]:  # None: the end of the iteration
        last = loop[blocks[n][1]]
        nxt = n + 1 if n + 1 < len(blocks) else None
        if last.base in ("EXIT", "RET"):
            return []
        t = _target(last)
        if t is None:
            return [nxt]
        taken = None if t == top else block_of.get(index[t]) if top < t <= bottom and t > last.address else "out"
        if not last.predicate:  # always taken (a jump out of the body: not followed)
            return [] if taken == "out" else [taken]
        return [nxt] if taken == "out" else [nxt, taken]

    def cost(n: int) -> int:
        return sum(i.stall for i in loop[blocks[n][0]:blocks[n][1] + 1])

    paths: list[list[int]] = []
    steps = [0]  # blocks visited: a walk whose branches mostly end off the body (a jump out, EXIT)
    # adds no paths, so the count of paths alone would not bound it

    def walk(n: int | None, path: list[int]) -> bool:
        steps[0] += 1
        if len(paths) > limit or steps[0] > 200 * limit:
            return False
        if n is None:
            paths.append(path)
            return True
        return all(walk(m, path + [n]) for m in successors(n))

    if not walk(0, []):  # too many: the extremes, by dynamic programming from the bottom up
        paths = []
        for pick in (min, max):
            best: dict[int | None, tuple[int, list[int]]] = {None: (0, [])}
            for n in reversed(range(len(blocks))):
                options = [best[m] for m in successors(n) if m in best]
                if options:
                    c, rest = pick(options, key=lambda o: o[0])
                    best[n] = (cost(n) + c, [n] + rest)
            if 0 in best:
                paths.append(best[0][1])
    distinct = {}  # (paths that differ only in blocks of the same instructions and cycles: one)
    for path in paths:
        body = [ins for n in path for ins in loop[blocks[n][0]:blocks[n][1] + 1]]
        mix = dict(sorted(Counter(i.base for i in body if i.base != "NOP").items()))
        found = LoopPath(sum(mix.values()), sum(i.stall for i in body), mix)
        distinct[(found.instructions, found.cycles, tuple(mix.items()))] = found
    return sorted(distinct.values(), key=lambda p: (p.instructions, p.cycles))


def loop_cycles(paths: list[dict]) -> str:
    """The main loop's cycles an iteration with no dynamic stall (its control codes' stall counts),
    per path through it (`LoopPath.as_dict()`s), shortest first: "2202 / 2303 / 2535"; more than
    three paths: the range."""
    cycles = [p["cycles"] for p in paths]
    if len(cycles) > 3:
        return f"{min(cycles)}-{max(cycles)}"
    return " / ".join(map(str, cycles))


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
        loop_paths=loop_paths(loop),
    )


def kernel_sass(cubin, expression: str) -> SassSummary:
    """Summary of one kernel of a compiled module (a `simtlab.compile.Cubin`)."""
    mangled = cubin.mangled(expression)
    funcs = parse_sass(disassemble(cubin.path, mangled))
    if mangled not in funcs:
        raise RuntimeError(f"cuobjdump printed no SASS for {expression} ({mangled})")
    return summarize(expression, funcs[mangled])
