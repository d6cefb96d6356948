"""The wgmma-rate kernels compile for sm_90a with the wgmma shape asked for, without spills."""

import pytest


@pytest.mark.parametrize("n,dtype", [(64, "fp16"), (248, "bf16"), (256, "fp16")])
def test_kernel_has_the_asked_wgmma_shape(bench_script, n, dtype):
    from simtlab.analyze.sass import disassemble
    from simtlab.compile import compile_source

    mod = bench_script("wgmma_rate")
    name = f"rate_n{n}"
    cubin = compile_source(mod.kernel_source(n, dtype), f"{name}.cu", [name], arch="sm_90a")
    assert cubin.resources(name).spill_bytes == 0
    sass = disassemble(cubin.path, cubin.mangled(name))
    assert f"HGMMA.64x{n}x16.F32{'.BF16' if dtype == 'bf16' else ' '}" in sass  # (fp16 is SASS's default type)


def test_n_must_be_a_wgmma_width(bench_script):
    mod = bench_script("wgmma_rate")
    with pytest.raises(ValueError, match="multiple of 8"):
        mod.kernel_source(250, "fp16")
