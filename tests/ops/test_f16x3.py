"""Rung 13 (three fp16 products of scaled parts) on the CPU: what it is built with at each size, that
its three kernels compile spill-free for sm_90, and where its scratch puts things."""

import pytest

from simtlab.catalog import family
from simtlab.ops import f16x3, tf32x3
from simtlab.ops.gemm import GemmProblem


@pytest.mark.parametrize("M,N,K", [(4096, 4096, 4096), (127, 129, 65), (300, 262, 520), (1, 1, 1)])
def test_size_defaults_are_fp16_parts_with_b_transposed_and_whole_tiles(M, N, K):
    p = GemmProblem(M, N, K)
    d = family("gemm").rung("f16x3").params("sm_90", f16x3.size_defaults(p))
    assert (d["DT"], d["TA"], d["TB"], d["SPLIT"], d["SK"], d["AREG"], d["BN"]) == (0, 0, 1, 1, 0, 0, 128)
    assert d["EPI"] == (0 if N % 4 else 3)  # (C's TMA stores need whole 16-byte rows)
    assert d["CM"] == (1 if -(-M // 128) * -(-N // 128) <= 132 else 2)
    tc = f16x3.tc_problem(p)
    assert (tc.dtype, tc.out, tc.layout, tc.K % 8) == ("float16", "float32", "nt", 0) and tc.K >= K


def test_the_module_holds_the_maxima_split_and_main_kernels_spill_free():
    from simtlab.analyze.sass import cuobjdump
    import subprocess

    from simtlab.launch import build

    rung = family("gemm").rung("f16x3")
    inst = build(rung, rung.params("sm_90", f16x3.size_defaults(GemmProblem(4096, 4096, 4096))), "sm_90")
    out = subprocess.run([cuobjdump(), "--dump-resource-usage", str(inst.cubin.path)], capture_output=True,
                         text=True, check=True).stdout
    functions = [line.split("Function ")[1].rstrip(":") for line in out.splitlines() if "Function " in line]
    assert {"gemm_f16x3_max", "gemm_f16x3_split"} <= set(functions) and len(functions) == 3
    assert out.count("LOCAL:0") == 3, out


def test_scratch_keeps_every_part_and_the_exponents_on_16_byte_boundaries():
    k = object.__new__(f16x3.F16x3Gemm)  # (the layout alone: no GPU, no launches)
    for M, N, K in [(127, 129, 65), (1, 1, 1), (4096, 4096, 4096), (3, 5, 7)]:
        k.M, k.N, k.K, k.kp = M, N, K, f16x3.padded_k(K)
        s = k.scratch(1 << 20)
        parts = [s.a_big, s.a_small, s.b_big, s.b_small]
        assert all(p % 16 == 0 for p in parts) and s.scale % 16 == 0
        assert s.a_small - s.a_big == 2 * M * k.kp and s.b_small - s.b_big == 2 * N * k.kp
        assert s.bmax == s.b_small + 2 * N * k.kp and s.amax == s.bmax + 4 * N and s.scale >= s.amax + 4 * M
        assert s.scale + tf32x3.scale_bytes(M, N) <= (1 << 20) + k.parts_bytes
