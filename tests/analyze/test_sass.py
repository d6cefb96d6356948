from pathlib import Path

import pytest

from simtlab.analyze.sass import Instruction, disassemble, parse_sass, summarize
from simtlab.analyze.static import sass_report
from simtlab.catalog import FAMILIES

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "vadd_float4_256_sm90.cubin"
VEC = "_Z11vadd_float4ILi256ELb1EEvPKfS1_Pfx"  # vadd_float4<256, true>
SCALAR = "_Z11vadd_float4ILi256ELb0EEvPKfS1_Pfx"


def test_parse_committed_cubin():
    funcs = parse_sass(disassemble(FIXTURE))
    assert set(funcs) == {VEC, SCALAR}
    vec = summarize("vec", funcs[VEC])
    scalar = summarize("scalar", funcs[SCALAR])
    # the float4 path: one 128-bit load per operand and one 128-bit store, plus the scalar tail
    assert vec.memory.get("LDG.128") == 2 and vec.memory.get("STG.128") == 1
    assert "LDG.128" not in scalar.memory and scalar.memory.get("LDG.32", 0) >= 2
    assert vec.spill_instructions == scalar.spill_instructions == 0
    assert vec.mix.get("FADD", 0) >= 4 and vec.has("EXIT")


def test_instruction_widths_and_predicates():
    text = """
        Function : k
        /*0000*/                   LDG.E.128.CONSTANT R4, desc[UR4][R2.64] ;
        /*0010*/              @!P0 LDS.U8 R5, [R1] ;
        /*0020*/                   STL.64 [R1], R4 ;
        /*0030*/                   FFMA R0, R1, R2, R3 ;
        /*0040*/               @P1 BRA 0x30 ;
        /*0050*/                   EXIT ;
    """
    (instrs,) = parse_sass(text).values()
    assert [i.width for i in instrs[:3]] == [128, 8, 64]
    assert instrs[1].predicate == "@!P0" and instrs[1].base == "LDS"
    s = summarize("k", instrs)
    assert s.spill_instructions == 1
    assert s.loop_instructions == 2 and s.loop_fma_share == pytest.approx(0.5)
    assert s.has("LDG.128") and not s.has("LDG.32")
    assert isinstance(instrs[0], Instruction)


def test_the_hot_loop_is_the_innermost_loop_with_the_multiply_adds():
    """A persistent kernel's loop over tiles contains its main loop: the main loop is the one
    reported (the outer one, with the epilogue in it, would understate the FMA share)."""
    text = """
        Function : k
        /*0000*/                   IADD3 R0, R0, 0x1, RZ ;
        /*0010*/                   FFMA R1, R2, R3, R1 ;
        /*0020*/                   FFMA R1, R2, R3, R1 ;
        /*0030*/               @P0 BRA 0x10 ;
        /*0040*/                   STG.E [R4.64], R1 ;
        /*0050*/                   STG.E [R4.64], R1 ;
        /*0060*/               @P1 BRA 0x0 ;
        /*0070*/                   IADD3 R6, R6, 0x1, RZ ;
        /*0080*/               @P2 BRA 0x70 ;
        /*0090*/                   EXIT ;
    """
    (instrs,) = parse_sass(text).values()
    s = summarize("k", instrs)
    assert s.loop_instructions == 3 and s.loop_fma_share == pytest.approx(2 / 3)
    no_fma = summarize("k", [i for i in instrs if i.base != "FFMA"])  # then the largest body
    assert no_fma.loop_instructions == 5


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", list(FAMILIES))
def test_every_rung_shows_its_lesson_in_sass(name, arch):
    for e in sass_report(FAMILIES[name], arch):
        if e.get("unsupported"):  # a Hopper rung (sm_90 or sm_90a) on sm_80: refused by name, nothing to read
            assert ("sm_90a" in e["error"] or "9.0+" in e["error"]) and arch != "sm_90", e
            continue
        assert not e.get("error"), e
        assert e["spill_instructions"] == 0, (e["expression"], "local-memory traffic")
        if e["variant"] != "predicated scalar":
            assert e["ok"], (e["expression"], "missing", e["missing"])
