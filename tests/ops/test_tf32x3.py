"""The fp32 ladder's rung 11 (3xTF32) on the CPU: its build, defaults, scratch layout and bytes."""

import re
from pathlib import Path

import pytest

from simtlab.analyze.sass import disassemble
from simtlab.catalog import family
from simtlab.launch import build
from simtlab.ops import gemm, gemm_tc, tf32x3


def test_rung_11_is_rung_6_walking_k_three_times():
    r = family("gemm").rung("tf32x3")
    six = family("gemm_tc").rung("wgmma_cluster")
    assert r.stage == 11 and r.kernel == six.kernel and r.template_params == six.template_params + ("SPLIT", "SK", "AREG")
    assert r.params()["SPLIT"] == 2 and r.params()["DT"] == 2 and r.can(gemm.TF32X3)
    assert r.supports((9, 0)) and not r.supports((8, 0))  # wgmma and TMA: sm_90a only


@pytest.mark.parametrize("params", [{"BN": 128}, {"BN": 128, "EPI": 0, "CM": 1}, {"BN": 128, "SPLIT": 4, "STAGES": 6},
                                    {"BN": 128, "SK": 1}, {"BN": 128, "SK": 1, "KEEP": 3, "CM": 1},
                                    {"BN": 128, "SK": 1, "KEEP": 3, "SPLIT": 1}, {"BN": 128, "AREG": 1, "EPI": 2},
                                    {"BN": 128, "AREG": 1, "EPI": 0, "CM": 1},
                                    {"BN": 128, "SK": 1, "EPI": 0}])
def test_rung_11_compiles_spill_free(params):
    inst = build(family("gemm").rung("tf32x3"), params, "sm_90")
    res = inst.resources(None)
    assert res.spill_bytes == 0 and res.stack_frame == 0, res
    same = {k: v for k, v in params.items() if k not in ("SPLIT", "SK", "AREG")}
    six = build(family("gemm_tc").rung("wgmma_cluster"), {"DT": 2, **same}, "sm_90").resources(None)
    assert res.registers == six.registers  # (the launch bound: 168 a thread before setmaxnreg)


def test_size_defaults_pick_the_epilogue_by_c_rows():
    d = tf32x3.size_defaults(gemm.GemmProblem(4096, 4096, 4096))
    assert d["SPLIT"] == 2 and d["DT"] == 2 and d["KEEP"] == 4 and "EPI" not in d and d["TA"] == d["TB"] == 0
    assert d["BN"] == 128 and d["CM"] == 2  # 1024 tiles of 128 x 128: paired
    assert tf32x3.size_defaults(gemm.GemmProblem(100, 1013, 37))["EPI"] == 0  # rows not 16-byte units: no TMA store
    assert tf32x3.size_defaults(gemm.GemmProblem(1024, 1536, 2048))["CM"] == 1  # 96 tiles, one round: unpaired
    # short products promote every slice (SGEMM's own error is small there)
    assert [tf32x3.size_defaults(gemm.GemmProblem(512, 512, k))["SPLIT"] for k in (64, 255, 256, 16384)] == [1, 1, 2, 2]
    # the last round cut into chunks of K (SK 1, 3 kept pieces) only where it is at most a quarter full
    d = tf32x3.size_defaults(gemm.GemmProblem(4097, 4095, 4093))  # 544 cluster tiles: 16 in the last round
    assert (d["SK"], d["KEEP"], d["EPI"]) == (1, 3, 0)
    assert "SK" not in tf32x3.size_defaults(gemm.GemmProblem(4096, 4096, 4096))  # 50 of 66: fuller
    assert "SK" not in tf32x3.size_defaults(gemm.GemmProblem(1024, 1024, 16384))  # 64 tiles, one partial round
    p = tf32x3.tc_problem(gemm.GemmProblem(5, 6, 7))
    assert (p.M, p.N, p.K, p.dtype) == (5, 6, 8, "float32") and tf32x3.tc_problem(p) is p


def test_parts_are_laid_out_on_16_byte_boundaries():
    class Stub:  # (the layout only: no kernels)
        M, N, kp = 3, 5, tf32x3.padded_k(9)
        sk_bytes, flag_bytes, areg = 0, 0, False

    s = tf32x3.Tf32x3Gemm.parts(Stub, 1 << 20)
    assert Stub.kp == 12 and s.a_big == 1 << 20
    assert (s.a_small - s.a_big, s.b_big - s.a_small, s.b_small - s.b_big) == (4 * 3 * 12, 4 * 3 * 12, 4 * 5 * 12)
    assert s.scale - s.b_small == 4 * 5 * 12 and s.partials == s.flags == s.scale  # no SK scratch
    assert all(x % 16 == 0 for x in (s.a_small, s.b_big, s.b_small, s.scale))
    assert tf32x3.Tf32x3Gemm.parts_bytes.fget(Stub) == 4 * 2 * (3 + 5) * 12 + 48  # (1 + 3 + 5 words: 48 bytes)
    Stub.sk_bytes, Stub.flag_bytes = 2 * 64 * 128 * 4, 16  # SK 1: partials, then flags just before the scale
    s = tf32x3.Tf32x3Gemm.parts(Stub, 1 << 20)
    assert (s.partials - s.b_small, s.flags - s.partials, s.scale - s.flags) == (4 * 5 * 12, 2 * 64 * 128 * 4, 16)


def test_split_cuts_the_last_round_into_chunks_of_k():
    p = tf32x3.tc_problem(gemm.GemmProblem(4096, 4096, 4096))
    params = {**family("gemm").rung("tf32x3").params("sm_90"), "SK": 1}
    # 512 cluster tiles over 66 clusters: 7 rounds and 50 tiles, each cut into 5 chunks of its 384
    # slices: 4 rounds of 77 slices (and hand-overs) instead of one of 384
    assert gemm_tc.cluster_work(params, p) == 512 and gemm_tc.kernel_slices(params, p) == 384
    assert gemm_tc.tail_split(params, p, 66) == (50, 5)
    assert gemm_tc.tail_scratch(params, (50, 5)) == (50 * 4 * 2 * 2 * 64 * 128 * 4, 50 * 4 * 2 * 2)
    assert gemm_tc.tail_scratch(params, (0, 1)) == (0, 0)
    assert gemm_tc.tail_split({**params, "SK": 0}, p, 66) == (0, 1)
    assert gemm_tc.tail_split(params, p, 64) == (0, 1)  # whole rounds: nothing to cut
    assert gemm_tc.tail_split(params, tf32x3.tc_problem(gemm.GemmProblem(2048, 2048, 2048)), 66) == (0, 1)  # 62 of 66
    few = tf32x3.tc_problem(gemm.GemmProblem(1024, 1024, 16384))  # 64 unpaired tiles on 132 SMs: split-K by 2
    assert gemm_tc.tail_split({**params, "CM": 1}, few, 132) == (64, 2)
    assert gemm_tc.tail_split(params, tf32x3.tc_problem(gemm.GemmProblem(4000, 4000, 1)), 66) == (0, 1)  # 3 slices


def test_sk_keeps_three_pieces_whatever_keep_says():
    """SK 1 caps the kept epilogue pieces at 3 (the hand-over of partial sums needs a fourth's
    registers): KEEP 4 and 3 compile to the same code, so the tuner's SK points stay spill-free."""
    from simtlab.hw.resources import code_identity

    r = family("gemm").rung("tf32x3")
    four, three = (build(r, {"SK": 1, "KEEP": k}, "sm_90") for k in (4, 3))
    assert code_identity(four.cubin.path.read_bytes()) == code_identity(three.cubin.path.read_bytes())
    assert code_identity(build(r, {"KEEP": 4}, "sm_90").cubin.path.read_bytes()) != \
        code_identity(build(r, {"KEEP": 3}, "sm_90").cubin.path.read_bytes())


def test_slice_order_of_b_matches_a_fragments():
    """AREG 1: the k order B's parts take within a 32-deep slice (slice_row_of in simtlab_tf32.cuh,
    mirrored here) is a permutation whose inverse is slice_position_of, and k step s, column q of a
    thread t's fragment (q = t or t + 4) is float 2 s + q // 4 of its 8 consecutive floats 8 t.."""
    def row_of(pos):
        s, q = (pos & 31) >> 3, pos & 7
        return (pos & ~31) | ((q & 3) << 3) | (s << 1) | (q >> 2)

    def position_of(row):
        p = row & 31
        return (row & ~31) | (((p >> 1) & 3) << 3) | (p >> 3) | ((p & 1) << 2)

    assert sorted(row_of(p) for p in range(64)) == list(range(64))
    assert all(position_of(row_of(p)) == p for p in range(96))
    for t in range(4):
        for s in range(4):
            for j in range(2):
                assert row_of(8 * s + t + 4 * j) == 8 * t + 2 * s + j
    # and the kernel source says the same
    src = (Path(tf32x3.__file__).parents[1] / "kernels/include/simtlab_tf32.cuh").read_text()
    assert "((q & 3) << 3) | (s << 1) | (q >> 2)" in src and "(((p >> 1) & 3) << 3) | (p >> 3) | ((p & 1) << 2)" in src


def test_requested_bytes_count_the_split_and_three_passes():
    r = family("gemm").rung("tf32x3")
    p = gemm.GemmProblem(4096, 4096, 4096)
    params = r.params("sm_90")
    one_pass = 4 * 4096 * (32 * 128 * 32 + 32 * 128 * 32)  # 32 x 32 tiles of 128 x 128
    split = 4 * 4096 * 8192 + 8 * 4096 * 8192
    assert r.requested_bytes(params, p) == split + 3 * one_pass + 4 * 4096 * 4096


def test_work_units_are_rung_6s_cluster_tiles():
    r = family("gemm").rung("tf32x3")
    params = r.params("sm_90")
    p = gemm.GemmProblem(4096, 4096, 4096)
    assert r.work_units(params, p, 132) == (gemm_tc.cluster_work(params, tf32x3.tc_problem(p)), 66)
    assert family("gemm").rung("tuned").work_units(family("gemm").rung("tuned").params(), p, 132) is None


def test_rung_11_declares_a_space_whose_corners_build_spill_free():
    r = family("gemm").rung("tf32x3")
    space = r.space(227 * 1024)
    configs = list(space.valid())
    assert r.params()["SPLIT"] in space.params["SPLIT"] and len(configs) > 50
    assert all(gemm_tc.cluster_smem({**r.params(), **c}) <= 227 * 1024 for c in configs)
    assert not any(c["BN"] == 128 and c["STAGES"] == 7 for c in configs)  # 7 x 32 KiB + staging: too much
    for c in ({"BN": 64, "STAGES": 8, "CM": 1, "SPLIT": 1}, {"BN": 128, "STAGES": 6, "CM": 2, "SPLIT": 4}):
        res = build(r, c, "sm_90").resources(None)
        assert res.spill_bytes == 0 and res.stack_frame == 0, c


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_short_k_path_sums_in_float64_spill_free(arch):
    """precision="tf32x3" below TF32X3_MIN_K: rung 8 with KAHAN 2 (float64 sums) at the plan's
    tile, both variants (float4 and scalar copies), without spills; the SASS multiplies in DFMA."""
    from simtlab.ops.gemm_plans import F64_SUMS_PARAMS, TF32X3_MIN_K

    r = family("gemm").rung("warptiling")
    inst = build(r, dict(F64_SUMS_PARAMS), arch)
    assert inst.params["KAHAN"] == 2 and 16 <= TF32X3_MIN_K <= 256
    for vec in (True, False):
        res = inst.resources(vec)
        assert res.spill_bytes == 0 and res.stack_frame == 0, (vec, res)
    assert "DFMA" in disassemble(inst.cubin.path, inst.cubin.mangled(inst.expression(True)))


def test_split_kernels_move_whole_16_byte_pieces():
    """The pre-pass (one launch for A and B) reads and writes 16 bytes an instruction where it can:
    four of A's groups and four of B's tile rows in flight a thread, two stores a group; scalar
    reads stay for rows that are not 16-byte units."""
    body = disassemble(build(family("gemm").rung("tf32x3"), None, "sm_90").cubin.path, "gemm_split_tf32")
    assert body.count("LDG.E.128") >= 4 + 4 and body.count("STG.E.128") >= 2 * 4 + 2 * 4  # A's groups, B's tile
    assert re.search(r"LDG\.E(\.CONSTANT)? ", body)  # (the scalar fallback)
