"""simtlab.Kernel: compile-time behaviour on any machine; launching, verifying and timing on a GPU."""

import numpy as np
import pytest

import simtlab
from simtlab import CompileError, Kernel

SAXPY = """
__global__ void saxpy(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""
TEMPLATED = """
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) scale(float* x, float s, long long n) {
  long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) x[i] *= s;
}
"""


def grid_for(y, x, a, n):
    return (-(-int(n) // 256),)


def test_static_facts_without_a_gpu(tmp_cache):
    k = Kernel(SAXPY, "saxpy", grid=grid_for, block=256)
    assert k.param_sizes("sm_90") == [8, 8, 4, 4]
    info = k.explain(arch="sm_90")
    assert info["registers"] > 0 and info["spill_bytes"] == 0 and info["occupancy"] == 1.0
    assert info["sass"]["memory"]["LDG.32"] >= 2
    t = Kernel(TEMPLATED, "scale", [128], block=128)
    assert t.expression == "scale<128>" and t.resources("sm_80").max_threads_declared == 128


def test_source_from_a_file(tmp_path, tmp_cache):
    path = tmp_path / "saxpy.cu"
    path.write_text(SAXPY)
    assert Kernel(path, "saxpy").param_sizes("sm_90") == [8, 8, 4, 4]
    with pytest.raises(FileNotFoundError):
        Kernel(tmp_path / "missing.cu", "saxpy")
    with pytest.raises(ValueError, match="does not appear"):
        Kernel(SAXPY, "daxpy")


def test_compile_errors_name_the_line(tmp_cache):
    with pytest.raises(CompileError) as err:
        Kernel("__global__ void bad(float* x) {\n  x[0] = undefined_thing;\n}\n", "bad").compile("sm_90")
    assert err.value.line == 2


def test_exported_from_the_package():
    assert simtlab.Kernel is Kernel


AXPY_OUT = """
__global__ void axpy(float* out, const float* x, const float* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n - SKIP) out[i] = a * x[i] + y[i];
}
"""


def test_variants_share_the_source(tmp_cache):
    base = Kernel(TEMPLATED, "scale", [128], block=128)
    v = base.variant([256], block=256)
    assert v.expression == "scale<256>" and v.block == 256 and base.expression == "scale<128>"
    assert v.resources("sm_90").max_threads_declared == 256


@pytest.mark.gpu
def test_tune_a_users_kernel():
    import cupy

    from simtlab.tune import Space

    n = 1 << 20
    x = cupy.ones(n, cupy.float32)
    k = Kernel(TEMPLATED, "scale", [128], grid=lambda x, s, n: (-(-int(n) // 128),), block=128)
    space = Space({"BLOCK": (64, 128, 256, 512, 1024)})
    result = k.tune(space, x, 1.0, np.int64(n), template=lambda c: [c["BLOCK"]],
                    launch=lambda c: {"block": c["BLOCK"], "grid": lambda x, s, n: (-(-int(n) // c["BLOCK"]),)},
                    strategy="brute", budget=5, target_ms=5)
    assert len(result.measured) == 5 and result.best.value > 0


@pytest.mark.gpu
def test_verify_time_and_bad_arguments():
    import cupy

    n = 100_003
    rng = cupy.random.default_rng(0)
    x, y, out = (rng.random(n, dtype=cupy.float32) for _ in range(3))
    grid = lambda out, x, y, a, n: (-(-int(n) // 256),)  # noqa: E731
    good = Kernel(AXPY_OUT, "axpy", grid=grid, block=256, options={"define_macro": ("SKIP", "0")})
    v = good.verify(lambda out, x, y, a, n: a * x + y, out, x, y, 2.0, n, outputs=[0])
    assert v.ok, v.reason
    buggy = Kernel(AXPY_OUT, "axpy", grid=grid, block=256, options={"define_macro": ("SKIP", "1")})
    v = buggy.verify(lambda out, x, y, a, n: a * x + y, out, x, y, 2.0, n, outputs=[0])
    assert not v.ok and "never written" in v.reason and f"({n - 1},)" in v.reason
    assert good.time(out, x, y, 2.0, n, target_ms=5).median_ms > 0
    with pytest.raises(TypeError, match="takes 5 arguments"):
        good(out, x, y, 2.0)
    with pytest.raises(TypeError, match="host"):
        good(np.ones(n, np.float32), x, y, 2.0, n)
    with pytest.raises(ValueError, match="not contiguous"):
        good(out[::2], x, y, 2.0, n)
    with pytest.raises(ValueError, match="block 2048 has 2048 threads; a block holds at most 1024"):
        good(out, x, y, 2.0, n, block=2048)
    t = Kernel(TEMPLATED, "scale", [128], grid=lambda x, s, n: (-(-int(n) // 128),), block=128)
    z = cupy.ones(1000, cupy.float32)
    t(z, 3.0, np.int64(1000))
    assert float(z.sum()) == 3000.0
    with pytest.raises(simtlab.launch.LaunchError, match="__launch_bounds__"):
        t(z, 3.0, np.int64(1000), block=256)


AXPY = ("__global__ void axpy(float* y, const float* x, float a, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] += a * x[i]; }")


@pytest.mark.parametrize("block, error, says", [
    ("abc", TypeError, "block is an int or 1 to 3 ints"), (True, TypeError, "1 to 3 ints"),
    ((32, 2.5), TypeError, "1 to 3 ints"), ((1, 1, 1, 1), TypeError, "1 to 3 ints"),
    (0, ValueError, "at least 1"), (-32, ValueError, "at least 1"), (2048, ValueError, "at most 1024"),
    ((32, 64), ValueError, "2048 threads"),
])
def test_a_fixed_block_is_checked_when_the_kernel_is_made(block, error, says):
    with pytest.raises(error, match=says):
        simtlab.Kernel(AXPY, "axpy", block=block)
    simtlab.Kernel(AXPY, "axpy", block=(32, 32), grid=lambda *a: 1)  # 1024 threads: fine


def test_a_name_only_in_a_comment_is_not_a_kernel():
    with pytest.raises(ValueError, match="outside its comments"):
        simtlab.Kernel("// scale is next\n/* scale */\n" + AXPY, "scale")


def test_compile_options_are_checked_and_ptxas_text_is_split(tmp_cache):
    with pytest.raises(ValueError, match="unknown compile option in \\['fast_math'\\]"):
        simtlab.compile_source(AXPY, arch="sm_90", options={"fast_math": True})
    cub = simtlab.compile_source(AXPY, arch="sm_90", options={"ptxas_options": "-O1 --warn-on-spills"})
    assert cub.resources()  # (one argument each: ptxas accepted both)


def test_compile_file_takes_a_path_from_the_working_directory(tmp_path, monkeypatch, tmp_cache):
    (tmp_path / "axpy.cu").write_text(AXPY)
    monkeypatch.chdir(tmp_path)
    assert b"axpy" in simtlab.compile_file("axpy.cu", arch="sm_90").data()  # the caller's file, not the package's
    assert simtlab.compile_file("gemm/01_naive.cu", ["gemm_naive<16>"], arch="sm_90").symbols  # a package kernel


NVCC_STYLE = r"""
#include <cstdio>
#include <cassert>
#include <cstdint>
#include <cmath>
#include <climits>
#include <cfloat>
#include <cuda_runtime.h>
__global__ void written_for_nvcc(int M, uint N, float alpha, const float* A, float* C) {
  uint i = blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t j = i;
  ushort s = 1; ulong l = 2;
  if (i < N) C[i] = alpha * A[i] + (INT_MAX > 0 ? 0.0f : FLT_MAX) + sqrtf(fabsf(A[i])) * (s + l) * 0.0f;
  assert(j == i);
  if (i == 0 && M < 0) printf("%d %f\n", M, INFINITY);
}
"""


def test_kernels_written_for_nvcc_compile(tmp_cache):
    """uint / ushort / ulong from nvcc's host headers, <cstdio>, <cassert>, <cstdint>, <cmath>,
    <climits>, <cfloat> and <cuda_runtime.h> includes: compiled as written."""
    k = Kernel(NVCC_STYLE, "written_for_nvcc", grid=1, block=32)
    assert k.resources("sm_90").registers > 0 and k.param_sizes("sm_90") == [4, 4, 4, 8, 8]


@pytest.mark.parametrize("header, says", [("cublas_v2.h", "belongs to host code"), ("vector", "belongs to host code"),
                                          ("cuda_profiler_api.h", "belongs to host code"),
                                          ("unistd.h", "simtlab supplies <cstdio>")])
def test_a_header_nvrtc_cannot_open_says_what_to_do(header, says, tmp_cache):
    src = f"#include <{header}>\n__global__ void k(float* x) {{ x[0] = 1.0f; }}\n"
    with pytest.raises(CompileError, match=says) as info:
        Kernel(src, "k", grid=1, block=1).compile("sm_90")
    assert info.value.line == 1


def test_errors_keep_the_users_line_numbers(tmp_cache):
    with pytest.raises(CompileError) as info:
        Kernel("#include <cmath>\n__global__ void k(float* x) {\n  x[0] = y;\n}\n", "k", grid=1, block=1).compile("sm_90")
    assert info.value.line == 3 and "y" in str(info.value).splitlines()[0]


INOUT = r"""
__global__ void axpby(float* C, const float* A, float alpha, float beta, int n, int skip, int nan_at) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n || i == skip) return;
  C[i] = alpha * A[i] + (beta != 0.0f ? beta * C[i] : 0.0f) + (i == nan_at ? __int_as_float(0x7fffffff) : 0.0f);
}
"""


@pytest.mark.gpu
def test_verify_reads_inouts_and_tells_never_written_from_nan_computed():
    """C = alpha*A + beta*C reads its output: declared an inout, C keeps its contents (handed to the
    reference, restored before each launch) and verifies even with beta = 0; an element skipped is
    'never written', a NaN the kernel makes is 'computed'."""
    import cupy

    n = 10_001
    rng = cupy.random.default_rng(1)
    A, C = rng.random(n, dtype=cupy.float32), rng.random(n, dtype=cupy.float32)
    k = Kernel(INOUT, "axpby", grid=lambda *a: (-(-n // 256),), block=256)
    ref = lambda C, A, alpha, beta, n, skip, nan_at: alpha * A + beta * C  # noqa: E731
    for beta in (0.0, 0.5):
        v = k.verify(ref, C, A, 2.0, beta, n, -1, -1, inouts=[0])
        assert v.ok, v.reason
    v = k.verify(ref, C, A, 2.0, 0.5, n, 17, -1, inouts=[0])
    assert not v.ok  # (an inout keeps its old value where not written: a wrong value, not a poison)
    out = cupy.empty(n, cupy.float32)  # (beta = 0: C is not read, as BLAS does - written only)
    v = k.verify(lambda C, *a: 2.0 * a[0], out, A, 2.0, 0.0, n, 17, 40, outputs=[0])
    assert not v.ok and "1 elements never written" in v.reason and "(17,)" in v.reason
    assert "1 NaN/Inf computed" in v.reason and "(40,)" in v.reason
