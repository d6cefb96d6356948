import pytest

from simtlab.catalog import all_rungs
from simtlab.compile import CompileError, compile_file, compile_source
from simtlab.launch import build

ARCHS = ("sm_80", "sm_90")


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("rung", all_rungs(), ids=lambda r: r.id)
def test_every_rung_compiles_without_spills(rung, arch):
    from simtlab.launch import UnsupportedArchError, arch_capability

    if not rung.supports(arch_capability(arch)):  # sm_90a-only rungs on sm_80: refused by name
        with pytest.raises(UnsupportedArchError, match=rung.id):
            build(rung, None, arch)
        return
    inst = build(rung, None, arch)
    assert inst.arch == (arch + "a" if rung.arch_specific else arch)
    for vec in (True, False) if rung.vec_variant else (None,):
        res = inst.resources(vec)
        assert res.registers > 0
        assert res.spill_bytes == 0, f"{inst.expression(vec)} spills {res.spill_bytes} bytes on {arch}"
        assert res.stack_frame == 0
        assert res.max_threads_declared, "every rung declares __launch_bounds__"
    assert inst.cubin.data()[:4] == b"\x7fELF"


SIMPLE = "template <int S> __global__ void scale(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] *= S; }"


def test_the_install_compiles_with_nvrtc_13_0():
    """pyproject admits the NVRTC every figure and committed build profile was made with (13.0, the
    H200 image's); a resolver that brings another (13.5 spills sort rungs 4-5 and stencil rung 3) fails here."""
    from simtlab.compile import nvrtc_version

    assert nvrtc_version() == (13, 0)


def test_second_compile_hits_cache(tmp_cache):
    first = compile_source(SIMPLE, "scale.cu", ["scale<2>"], arch="sm_90")
    second = compile_source(SIMPLE, "scale.cu", ["scale<2>"], arch="sm_90")
    assert not first.from_cache and second.from_cache
    assert second.symbols == first.symbols and second.data() == first.data()
    assert second.resources("scale<2>").registers == first.resources("scale<2>").registers


def test_key_covers_arch_options_and_expressions(tmp_cache):
    base = compile_source(SIMPLE, "scale.cu", ["scale<2>"], arch="sm_90")
    others = [
        compile_source(SIMPLE, "scale.cu", ["scale<2>"], arch="sm_80"),
        compile_source(SIMPLE, "scale.cu", ["scale<3>"], arch="sm_90"),
        compile_source(SIMPLE, "scale.cu", ["scale<2>"], arch="sm_90", options={"use_fast_math": True}),
    ]
    assert all(not o.from_cache for o in others)
    assert len({base.key, *(o.key for o in others)}) == 4


def test_extra_ptxas_options_join_the_resource_report(tmp_cache):
    """ptxas options given by a caller are added to the -v the resource report reads, not put in its place."""
    for extra in ("-O1", ["-O1"]):
        cub = compile_source(SIMPLE, "scale.cu", ["scale<2>"], arch="sm_90", options={"ptxas_options": extra})
        assert cub.resources("scale<2>").registers > 0
    assert cub.key != compile_source(SIMPLE, "scale.cu", ["scale<2>"], arch="sm_90").key


def test_header_change_invalidates_cache(tmp_cache, tmp_path):
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "factor.cuh").write_text("#define FACTOR 2\n")
    src = '#include "factor.cuh"\n__global__ void k(float* x) { x[0] *= FACTOR; }'
    a = compile_source(src, "k.cu", arch="sm_90", include_dirs=[inc])
    (inc / "factor.cuh").write_text("#define FACTOR 3\n")
    b = compile_source(src, "k.cu", arch="sm_90", include_dirs=[inc])
    assert a.key != b.key and not b.from_cache


def test_angle_included_header_change_invalidates_cache(tmp_cache, tmp_path):
    """<...> includes are part of the key too (the toolkit's headers: an edited mma.h recompiles),
    transitively through the headers they include."""
    inc = tmp_path / "inc"
    (inc / "sub").mkdir(parents=True)
    (inc / "outer.h").write_text("#include <sub/inner.h>\n")
    (inc / "sub" / "inner.h").write_text("#define FACTOR 2\n")
    src = "#include <outer.h>\n__global__ void k(float* x) { x[0] *= FACTOR; }"
    a = compile_source(src, "k.cu", arch="sm_90", include_dirs=[inc])
    (inc / "sub" / "inner.h").write_text("#define FACTOR 3\n")
    b = compile_source(src, "k.cu", arch="sm_90", include_dirs=[inc])
    assert a.key != b.key and not b.from_cache


def test_macro_included_header_change_invalidates_cache(tmp_cache, tmp_path):
    """`#include SOME_MACRO` names its file only to the preprocessor: every header in the include
    path is then part of the key."""
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "factor.cuh").write_text("#define FACTOR 2\n")
    src = '#define HEADER "factor.cuh"\n#include HEADER\n__global__ void k(float* x) { x[0] *= FACTOR; }'
    a = compile_source(src, "k.cu", arch="sm_90", include_dirs=[inc])
    assert compile_source(src, "k.cu", arch="sm_90", include_dirs=[inc]).from_cache
    (inc / "factor.cuh").write_text("#define FACTOR 3\n")
    b = compile_source(src, "k.cu", arch="sm_90", include_dirs=[inc])
    assert a.key != b.key and not b.from_cache


# ~180 KB of straight-line volatile loads and stores: several seconds of NVRTC (the time grows with
# the square of the length)
RUNAWAY = ("__global__ void k(volatile float* x) { float a = x[threadIdx.x];\n"
           + "".join(f"a = a * x[{i}] + 1.0f; x[{i + 1}] = a;\n" for i in range(5000)) + "}")


def test_a_compile_past_its_limit_is_stopped_with_a_clear_error(tmp_cache):
    """NVRTC runs in a child process that is killed at the limit; the next compile starts a new one."""
    import time

    from simtlab.nvrtc_worker import shared_worker

    t0 = time.monotonic()
    with pytest.raises(CompileError, match=r"did not finish within 1 s.*SIMTLAB_COMPILE_TIMEOUT"):
        compile_source(RUNAWAY, "slow.cu", arch="sm_90", timeout=1)
    assert time.monotonic() - t0 < 5
    assert shared_worker()._proc is None  # killed, not left running
    assert compile_source(SIMPLE, "scale.cu", ["scale<2>"], arch="sm_90").symbols


def test_the_limit_comes_from_the_environment(tmp_cache, monkeypatch):
    from simtlab.compile import compile_timeout

    monkeypatch.setenv("SIMTLAB_COMPILE_TIMEOUT", "12.5")
    assert compile_timeout() == 12.5
    monkeypatch.setenv("SIMTLAB_COMPILE_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="SIMTLAB_COMPILE_TIMEOUT='soon'"):
        compile_timeout()
    monkeypatch.setenv("SIMTLAB_COMPILE_TIMEOUT", "0")  # no limit: NVRTC in this process
    cub = compile_source(SIMPLE + "// in process", "scale.cu", ["scale<2>"], arch="sm_90")
    assert cub.resources("scale<2>").registers > 0


def test_the_key_names_the_nvrtc_build():
    from simtlab.compile import nvrtc_build, nvrtc_version

    major, minor = nvrtc_version()
    assert nvrtc_build().startswith(f"{major}.{minor} libnvrtc")  # and the library file's size


def test_headers_come_from_the_wheels(monkeypatch):
    """cuda_fp16.h, cuda_bf16.h, mma.h and crt/mma.h from the installed wheels, also with every
    system toolkit excluded (SIMTLAB_WHEEL_HEADERS_ONLY=1, which .ci/run sets for a second run of
    the compile tests)."""
    from simtlab import compile as comp

    monkeypatch.setenv(comp.WHEEL_HEADERS_ONLY, "1")
    comp.toolkit_include_dirs.cache_clear()
    try:
        (d,) = comp.toolkit_include_dirs()
        assert "site-packages" in d.parts and all((d / h).is_file() for h in ("cuda_fp16.h", "cuda_bf16.h", "mma.h",
                                                                              "crt/mma.h"))
    finally:
        comp.toolkit_include_dirs.cache_clear()


def test_corrupt_cache_entry_is_rebuilt(tmp_cache):
    first = compile_source(SIMPLE, "scale.cu", ["scale<2>"], arch="sm_90")
    first.path.write_bytes(b"garbage")
    again = compile_source(SIMPLE, "scale.cu", ["scale<2>"], arch="sm_90")
    assert not again.from_cache and again.data()[:4] == b"\x7fELF"
    (tmp_cache / f"{first.key}.json").write_text("{not json")
    third = compile_source(SIMPLE, "scale.cu", ["scale<2>"], arch="sm_90")
    assert not third.from_cache


def test_compile_error_carries_file_and_line(tmp_cache):
    src = "__global__ void k(float* x) {\n  x[0] = 1.0f;\n  int y = ;\n}\n"
    with pytest.raises(CompileError) as info:
        compile_source(src, "broken.cu", arch="sm_90")
    err = info.value
    assert err.line == 3 and err.file == "broken.cu"
    assert "expected an expression" in str(err) and "broken.cu:3" in str(err)
    assert "error" in err.log


def test_static_assert_in_a_rung_is_a_compile_error(tmp_cache):
    from simtlab.catalog import family

    rung = family("gemm").rung("warptiling")
    with pytest.raises(CompileError, match="warp sub-tile"):
        build(rung, {"WM": 48}, "sm_90")


def test_bad_arch_is_rejected():
    with pytest.raises(ValueError, match="arch must look like"):
        compile_source(SIMPLE, "scale.cu", ["scale<2>"], arch="hopper")


def test_compile_file_missing():
    with pytest.raises(FileNotFoundError):
        compile_file("gemm/99_missing.cu", arch="sm_90")


def test_unknown_name_expression_is_explained(tmp_cache):
    cubin = compile_source(SIMPLE, "scale.cu", ["scale<2>"], arch="sm_90")
    with pytest.raises(KeyError, match="not instantiated"):
        cubin.mangled("scale<5>")


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("mnk", [(8192, 8192, 8192), (1536, 1536, 64), (1024, 1024, 1024), (4097, 4095, 4093)])
def test_tuned_size_defaults_do_not_spill(arch, mnk):
    from simtlab.catalog import family
    from simtlab.ops import gemm

    class Dev:
        sms = 132

    rung = family("gemm").rung("tuned")
    p = gemm.GemmProblem(*mnk)
    vec = mnk[1] % 4 == 0 and mnk[2] % 4 == 0
    inst = build(rung, gemm.tuned_defaults(p, Dev(), vec), arch)
    assert inst.resources(vec).spill_bytes == 0, (inst.expression(vec), arch)


@pytest.mark.parametrize("arch", ARCHS)
def test_tuned_interior_copies_are_spill_free_and_carry_no_bounds_predicate(arch):
    """INTERIOR 1 adds a copy of a slice with no src-size predicate: one per 4-byte copy of A and
    16-byte copy of B (8 + 4 a thread at the 128x256 default), none in the INTERIOR 0 build."""
    import re

    from simtlab.analyze.sass import disassemble
    from simtlab.catalog import family

    rung = family("gemm").rung("tuned")

    def unpredicated_copies(params):
        inst = build(rung, params, arch)
        assert inst.resources(True).spill_bytes == inst.resources(False).spill_bytes == 0
        sass = disassemble(inst.cubin.path, inst.cubin.mangled(inst.expression(True)))
        copies = re.findall(r"LDGSTS[.\w]* \[[^\]]*\], [^;]*;", sass)
        return sum(not re.search(r", !?P[T0-9]+ *;", c) for c in copies)

    assert unpredicated_copies({"INTERIOR": 0}) == 0
    assert unpredicated_copies({"INTERIOR": 1}) >= 8 + 4


def test_rung_refuses_an_architecture_it_does_not_support():
    from simtlab.analyze.static import static_report
    from simtlab.catalog import family
    from simtlab.launch import UnsupportedArchError, arch_capability, build

    assert arch_capability("sm_90a") == (9, 0) and arch_capability("sm_120") == (12, 0)
    rung = family("gemm").rung("multistage")  # cp.async: sm_80+
    with pytest.raises(UnsupportedArchError, match=r"needs compute capability 8.0\+; sm_75 does not have it"):
        build(rung, None, "sm_75")
    rows = static_report(family("gemm"), "sm_75", [family("gemm").rung("naive"), rung])
    assert "error" not in rows[0] and "sm_75 does not have it" in rows[1]["error"]


def test_kahan_option_compiles_spill_free_with_compensation_in_the_sass():
    from simtlab.analyze.sass import kernel_sass
    from simtlab.catalog import family
    from simtlab.launch import build

    rung = family("gemm").rung("warptiling")
    plain = build(rung, None, "sm_90")
    kahan = build(rung, {"KAHAN": 1, "MINB": 1}, "sm_90")
    for vec in (True, False):
        assert kahan.resources(vec).spill_bytes == 0
        p, k = kernel_sass(plain.cubin, plain.expression(vec)), kernel_sass(kahan.cubin, kahan.expression(vec))
        assert p.mix.get("FFMA") == k.mix.get("FFMA")  # one FMA per product either way...
        assert k.mix.get("FADD", 0) >= 2 * k.mix["FFMA"] > 0 == p.mix.get("FADD", 0)  # ...plus the compensation


# tensor-core rung 6's variants the GPU tests run: spill-free for every input type
CLUSTER_VARIANTS = [dict(CM=1, CN=1, EPI=0), dict(CM=2, EPI=1), dict(CM=1, CN=2, EPI=1), dict(CM=1, CN=2, EPI=3, KEEP=5),
                    dict(CM=2, EPI=2), dict(BM=64, BN=256, CM=2, EPI=2),
                    dict(CM=2, EPI=3), dict(BM=64, BN=64, CM=1, EPI=3),
                    dict(CM=2, EPI=3, KEEP=5), dict(CM=2, EPI=3, KEEP=0),
                    dict(CM=2, CN=2, EPI=3), dict(CM=2, CN=2, EPI=1),
                    dict(CM=2, CN=2, BM=64, BN=128, EPI=2),
                    dict(CM=2, EPI=3, OUT=1), dict(CM=2, EPI=3, KEEP=5, OUT=2), dict(CM=2, EPI=1, OUT=2),
                    dict(CM=2, EPI=3, KEEP=5, LEAN=0), dict(CM=2, CN=2, EPI=1, LEAN=0), dict(BM=64, BN=64, CM=1, EPI=3, LEAN=0)]


@pytest.mark.parametrize("variant", CLUSTER_VARIANTS, ids=lambda v: "-".join(f"{k}{v[k]}" for k in sorted(v)))
@pytest.mark.parametrize("dt", [0, 1, 2])
def test_cluster_rung_variants_do_not_spill(variant, dt):
    from simtlab.catalog import family

    rung = family("gemm_tc").rung("wgmma_cluster")
    inst = build(rung, rung.params("sm_90", {**variant, "DT": dt}), "sm_90")
    res = inst.resources(None)
    assert res.spill_bytes == 0 and res.stack_frame == 0, inst.expression()


@pytest.mark.parametrize("dt", [0, 1, 2])
def test_cluster_rung_lean_descriptors_stay_in_uniform_registers(dt):
    """LEAN 1 steps the wgmma descriptors' low words in uniform registers (the consumer's warpgroup
    index read back through a warp reduction): between the first HGMMA of a slice and its last, no
    vector register is moved into a uniform one (R2UR) and no 64-bit add carries (IADD3 + IMAD.X),
    as LEAN 0's descriptors do."""
    from simtlab.analyze.sass import disassemble
    from simtlab.catalog import family

    rung = family("gemm_tc").rung("wgmma_cluster")
    for lean in (0, 1):
        inst = build(rung, rung.params("sm_90a", {"DT": dt, "LEAN": lean}), "sm_90a")
        lines = disassemble(inst.cubin.path, inst.cubin.mangled(inst.expression(None))).splitlines()
        hgmma = [i for i, line in enumerate(lines) if "HGMMA" in line]
        between = [line for line in lines[hgmma[0]:hgmma[-1]] if "/*" in line]
        moves = sum("R2UR" in line or "IMAD.X" in line for line in between)
        assert (moves == 0) == (lean == 1), (lean, moves)


def test_the_source_digest_follows_the_kernel_and_our_headers(tmp_path):
    """Which version of a rung's source a stored row measured: the digest changes with the kernel's
    text and with a header of ours it includes (transitively), and is the same from anywhere."""
    from simtlab.compile import source_digest

    (tmp_path / "helper.cuh").write_text("#pragma once\n__device__ int two() { return 2; }\n")
    kernel = tmp_path / "k.cu"
    kernel.write_text('#include "helper.cuh"\n__global__ void k(int* o) { *o = two(); }\n')
    first = source_digest(kernel)
    assert len(first) == 12 and source_digest(kernel) == first
    (tmp_path / "helper.cuh").write_text("#pragma once\n__device__ int two() { return 1 + 1; }\n")
    second = source_digest(kernel)
    assert second != first
    kernel.write_text('#include "helper.cuh"\n__global__ void k(int* o) { *o = 2 * two(); }\n')
    third = source_digest(kernel)
    assert third not in (first, second)
    # a comment, or the layout of the lines, is not a new version
    kernel.write_text('#include "helper.cuh"  // two\n/* doubled */ __global__ void k(int* o) {\n  *o = 2 * two();\n}\n')
    assert source_digest(kernel) == third
    # a rung's source by its path under the package's kernels folder
    assert len(source_digest("gemm/10_tuned.cu")) == 12


def test_an_interrupted_compile_never_hands_its_cubin_to_the_next(tmp_cache, monkeypatch):
    """Ctrl-C caught in a notebook (or any exception) while the worker compiles: the worker is
    killed, so the next compile gets its own kernel, and the cache holds what it was asked for."""
    from simtlab.nvrtc_worker import NvrtcWorker, shared_worker

    worker = shared_worker()
    real_read = NvrtcWorker._read
    calls = []

    def interrupted(proc, n, deadline):
        calls.append(n)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real_read(proc, n, deadline)

    monkeypatch.setattr(NvrtcWorker, "_read", staticmethod(interrupted))
    bomb = "template <int S> __global__ void bomb(float* x) { x[0] = S; }"
    with pytest.raises(KeyboardInterrupt):
        compile_source(bomb, "bomb.cu", ["bomb<3>"], arch="sm_90")
    assert worker._proc is None  # killed: its reply is never read
    monkeypatch.setattr(NvrtcWorker, "_read", staticmethod(real_read))
    first = compile_source(SIMPLE, "scale.cu", ["scale<2>"], arch="sm_90")
    assert list(first.symbols) == ["scale<2>"] and "scale" in first.mangled("scale<2>")
    assert compile_source(SIMPLE, "scale.cu", ["scale<2>"], arch="sm_90").symbols == first.symbols


def test_a_reply_to_another_request_or_lacking_a_symbol_is_refused(tmp_cache, monkeypatch):
    """A reply tagged for another request kills the worker; a module without the requested
    symbols is an error and is not cached."""
    from simtlab import nvrtc_worker
    from simtlab.compile import cache_dir
    from simtlab.nvrtc_worker import CompilerDied, NvrtcWorker

    worker = NvrtcWorker()
    try:
        worker.compile(SIMPLE, {"arch": "sm_90", "std": "c++17"}, ("scale<2>",), 60)
        bomb = "template <int S> __global__ void bomb(float* x) { x[0] = S; }"
        nvrtc_worker._send(worker._proc.stdin, (99, bomb, {"arch": "sm_90", "std": "c++17"}, ("bomb<3>",)))
        # (a request whose reply was never read, as an interrupted exchange would leave it)
        with pytest.raises(CompilerDied, match="answered request"):
            worker.compile(SIMPLE, {"arch": "sm_90", "std": "c++17"}, ("scale<2>",), 60)
        assert worker._proc is None
    finally:
        worker.kill()
    monkeypatch.setattr(nvrtc_worker.NvrtcWorker, "compile",
                        lambda self, *a: ("ok", b"\x7fELF", {"bomb<3>": "_Z4bombILi3EEvPf"}, ""))
    with pytest.raises(CompileError, match="lacks"):
        compile_source(SIMPLE + "// other", "scale.cu", ["scale<2>"], arch="sm_90")
    assert not list(cache_dir().glob("*.cubin")) if cache_dir().exists() else True


# a few hundred bytes that NVRTC takes seconds over (6000 straight-line volatile loads and stores):
# a request that fits in the pipe at once, so the parent can die before its worker's Python starts
SLOW_SMALL = ("#define S a = a * x[1] + 1.0f; x[2] = a;\n#define T S S S S S S S S S S\n"
              "#define H T T T T T T T T T T\n#define K H H H H H H H H H H\n"
              "__global__ void k(volatile float* x) { float a = x[0]; K K K K K K }\n")


def test_a_compile_worker_dies_with_a_parent_killed_at_once(tmp_path):
    """The worker's die-with-parent signal is armed before its Python starts: a parent killed right
    after sending a long compile (before the worker could arm it itself) leaves no compiler running."""
    import os
    import subprocess
    import sys
    import time

    script = tmp_path / "parent.py"
    script.write_text(
        "import os\n"
        "from simtlab.nvrtc_worker import NvrtcWorker, _send\n"
        "p = NvrtcWorker()._start()\n"
        f"_send(p.stdin, (1, {SLOW_SMALL!r}, {{'arch': 'sm_90', 'std': 'c++17'}}, ()))\n"
        "print(p.pid, flush=True)\n"
        "os.kill(os.getpid(), 9)\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    pid = int(out.stdout.split()[0])
    time.sleep(2)  # (the compile takes seconds: a worker that survived is still at it)
    try:
        with open(f"/proc/{pid}/stat") as f:
            alive = not f.read().split(") ")[-1].startswith("Z")  # (a zombie is dead, not yet reaped)
    except FileNotFoundError:
        alive = False
    if alive:
        os.kill(pid, 9)
        pytest.fail("the compile worker outlived its killed parent")


def test_an_infinite_limit_waits_for_the_compile(tmp_cache, monkeypatch):
    monkeypatch.setenv("SIMTLAB_COMPILE_TIMEOUT", "inf")
    assert compile_source(SIMPLE + "// inf", "scale.cu", ["scale<2>"], arch="sm_90").symbols
