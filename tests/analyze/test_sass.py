import pytest

from simtlab.analyze.sass import Instruction, disassemble, parse_sass, summarize
from simtlab.analyze.static import sass_report
from simtlab.catalog import FAMILIES

VEC = "_Z11vadd_float4ILi256ELb1EEvPKfS1_Pfx"  # vadd_float4<256, true>
SCALAR = "_Z11vadd_float4ILi256ELb0EEvPKfS1_Pfx"


def test_parse_a_compiled_cubin():
    """elementwise rung 2 compiled for sm_90 (no binary kept in the repository): both paths parsed."""
    from simtlab.catalog import family
    from simtlab.launch import build

    cubin = build(family("elementwise").rung("float4"), {"BLOCK": 256}, "sm_90").cubin.path
    funcs = parse_sass(disassemble(cubin))
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


def _ctrl(stall: int) -> int:
    return stall  # (the stall count is the control bits' low four)


def test_loop_paths_follow_forward_branches_and_sum_the_stall_counts():
    """A body with an if (a forward branch around two instructions) and a wait whose retry side lies
    after the function: two paths, the retry branch not taken, NOPs counted in cycles only."""
    def ins(addr, op, operands="", pred="", stall=1):
        return Instruction(addr, pred, op, operands, _ctrl(stall))

    loop = [ins(0x00, "BAR", "SYNC", stall=2),
            ins(0x10, "SYNCS", "", stall=1),
            ins(0x20, "BRA", "0x200", pred="@!P0", stall=3),  # retry side, outside the body
            ins(0x30, "BRA", "0x60", pred="@P1", stall=5),    # skip the copies
            ins(0x40, "LDGSTS", "[R1], [R2.64]", stall=13),
            ins(0x50, "LDGSTS", "[R1+0x40], [R2.64]", stall=2),
            ins(0x60, "FFMA", "R0, R1, R2, R0", stall=1),
            ins(0x70, "NOP", stall=4),
            ins(0x80, "BRA", "0x0", pred="@P2", stall=6)]
    from simtlab.analyze.sass import loop_paths

    short, long = loop_paths(loop)
    assert (short.instructions, short.cycles) == (6, 2 + 1 + 3 + 5 + 1 + 4 + 6)
    assert (long.instructions, long.cycles) == (8, short.cycles + 13 + 2)
    assert long.mix["LDGSTS"] == 2 and "LDGSTS" not in short.mix and "NOP" not in long.mix
    assert long.fixed_stalls == long.cycles - 8
    assert loop_paths([Instruction(0, "", "FFMA", "R0, R1, R2, R0")]) == []  # no control bits: nothing claimed


def test_loop_paths_stay_bounded_where_most_branches_lead_out_of_the_body():
    """Forty forward branches in a row, the body ending in a jump out of it (so no walk reaches the
    loop's end and none counts as a path): the walk stops after a bounded number of blocks instead
    of trying 2^40 branch combinations (gemm rung 12's SASS hung the report this way)."""
    import time

    from simtlab.analyze.sass import loop_paths

    loop = []
    for k in range(40):  # a predicated skip over one instruction, forty times
        loop += [Instruction(0x20 * k, "@P0", "BRA", f"0x{0x20 * k + 0x20:x}", _ctrl(1)),
                 Instruction(0x20 * k + 0x10, "", "FFMA", "R0, R1, R2, R0", _ctrl(1))]
    loop.append(Instruction(0x20 * 40, "", "BRA", "0x9000", _ctrl(1)))  # out, unconditionally
    t0 = time.monotonic()
    assert loop_paths(loop) == []
    assert time.monotonic() - t0 < 5


def _rung_sass(family_name, rung_name, arch, params):
    from simtlab.catalog import family
    from simtlab.launch import build

    rung = family(family_name).rung(rung_name)
    inst = build(rung, rung.params(arch, params), arch)
    expr = inst.expression(True if rung.vec_variant else None)
    (instrs,) = parse_sass(disassemble(inst.cubin.path, inst.cubin.mangled(expr))).values()
    return instrs


def test_control_bits_agree_with_the_disassembly():
    """The reuse flags decoded from each instruction's control bits mark exactly the operands
    cuobjdump prints with `.reuse` (fp32 rung 10: ~2,000 of them), and every stall count is 0-15."""
    instrs = _rung_sass("gemm", "tuned", "sm_90", {})
    assert all(i.control is not None for i in instrs)
    assert all(bin(i.reuse_flags).count("1") == i.operands.count(".reuse") for i in instrs)
    assert sum(i.operands.count(".reuse") for i in instrs) > 1000
    assert {i.stall for i in instrs} <= set(range(16)) and max(i.stall for i in instrs) > 1


def test_interior_copies_cost_fewer_fixed_stalls():
    """Rung 10's lesson in the control codes: with INTERIOR 1 a slice copied inside the matrices
    waits out fewer fixed latencies than any predicated copy (the general path, which both builds
    keep for edge tiles); the slices without copies are the shortest path in both."""
    from simtlab.analyze.sass import _main_loop, loop_paths

    copying = {}
    for interior in (0, 1):
        paths = loop_paths(_main_loop(_rung_sass("gemm", "tuned", "sm_90", {"INTERIOR": interior})))
        assert "LDGSTS" not in paths[0].mix and all(p.mix["FFMA"] == 2048 for p in paths)
        copying[interior] = [p.fixed_stalls for p in paths if p.mix.get("LDGSTS")]
    assert len(copying[1]) == len(copying[0]) + 1
    assert min(copying[1]) < min(copying[0]) / 2


def test_lean_bookkeeping_shortens_the_tensor_core_main_loop():
    """Tensor-core rung 6 with LEAN 1: a slice's shortest path (no kept piece due) issues fewer
    instructions and waits out fewer fixed cycles than LEAN 0's, the same four HGMMAs in both."""
    from simtlab.analyze.sass import _main_loop, loop_paths

    short = {lean: loop_paths(_main_loop(_rung_sass("gemm_tc", "wgmma_cluster", "sm_90a", {"LEAN": lean, "DT": 1})))[0]
             for lean in (0, 1)}
    assert short[0].mix["HGMMA"] == short[1].mix["HGMMA"] == 4
    assert short[1].instructions < short[0].instructions - 15 and short[1].cycles < short[0].cycles
