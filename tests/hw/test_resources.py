from simtlab.hw.resources import kernel_resources, launch_bounds_from_cubin, parse_ptxas_log
from simtlab.compile import compile_source

LOG = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z1kPfi' for 'sm_90'
ptxas info    : Function properties for _Z1kPfi
ptxas         .     16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 72 registers, used 1 barriers, 1024 bytes smem, 380 bytes cmem[0]
ptxas info    : Compiling entry function '_Z1gv' for 'sm_90'
ptxas info    : Function properties for _Z1gv
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 4 registers
"""


def test_parse_ptxas_log():
    out = parse_ptxas_log(LOG)
    assert out["_Z1kPfi"] == {"stack_frame": 16, "spill_stores": 8, "spill_loads": 12, "registers": 72,
                              "barriers": 1, "shared_static": 1024, "constant": 380}
    assert out["_Z1gv"]["registers"] == 4 and out["_Z1gv"]["shared_static"] == 0


def test_launch_bounds_read_from_the_cubin(tmp_cache):
    src = ("__global__ void __launch_bounds__(384) bounded(float* x) { x[threadIdx.x] = 1; }\n"
           "__global__ void free_(float* x) { x[threadIdx.x] = 2; }")
    cubin = compile_source(src, "lb.cu", arch="sm_90")
    bounds = launch_bounds_from_cubin(cubin.data())
    assert bounds == {"_Z7boundedPf": 384}
    res = kernel_resources(cubin.log, cubin.data())
    assert res["_Z7boundedPf"].max_threads_declared == 384
    assert res["_Z5free_Pf"].max_threads_declared is None


def test_real_spills_are_reported(tmp_cache):
    # A runtime-indexed local array must live in local memory: a stack frame appears.
    src = ("__global__ void k(float* x, int j) { float a[64];\n"
           "  for (int i = 0; i < 64; ++i) a[i] = x[i];\n"
           "  for (int i = 0; i < 64; ++i) a[(i * j) & 63] += x[i + 64];\n"
           "  x[0] = a[j & 63]; }")
    cubin = compile_source(src, "local.cu", arch="sm_90")
    (res,) = cubin.resources().values()
    assert res.stack_frame >= 256 and res.local_bytes == res.stack_frame


def test_elf_and_ptxas_log_agree_for_every_rung():
    from simtlab.hw.resources import elf_resources
    from simtlab.catalog import all_rungs
    from simtlab.launch import arch_capability, build

    for arch in ("sm_80", "sm_90"):
        for rung in all_rungs():
            if not rung.supports(arch_capability(arch)):
                continue
            cubin = build(rung, None, arch).cubin
            from_log = {k: v for k, v in parse_ptxas_log(cubin.log).items() if "registers" in v}
            from_elf = elf_resources(cubin.data())
            assert set(from_elf) == set(from_log), rung.id
            for kernel, e in from_elf.items():
                for key in ("registers", "stack_frame", "shared_static", "barriers"):
                    assert e[key] == from_log[kernel].get(key, 0), (arch, rung.id, key)


def test_without_a_log_the_elf_still_reports(tmp_cache):
    src = ("__global__ void __launch_bounds__(256) k(float* x, int j) {\n"
           "  __shared__ float s[300]; s[threadIdx.x] = x[0]; __syncthreads(); x[1] = s[j]; }")
    for arch in ("sm_80", "sm_90"):
        cubin = compile_source(src, "nolog.cu", arch=arch)
        (with_log,) = kernel_resources(cubin.log, cubin.data()).values()
        (no_log,) = kernel_resources("", cubin.data()).values()
        assert no_log.registers == with_log.registers and no_log.shared_static == with_log.shared_static == 1200
        assert no_log.spill_bytes == 0 and no_log.max_threads_declared == 256 and no_log.barriers == 1


def test_parameter_sizes_from_the_cubin(tmp_cache):
    from simtlab.hw.resources import param_sizes_from_cubin

    src = "__global__ void k(float* x, int n, double d, char c, float4 v) { x[n] = d + c + v.x; }"
    cubin = compile_source(src, "params.cu", arch="sm_90")
    assert param_sizes_from_cubin(cubin.data()) == {"_Z1kPfidc6float4": [8, 4, 8, 1, 16]}


def test_the_code_identity_sees_through_template_names_not_through_code():
    """Sort rung 4's VALS does nothing for keys alone: the two builds differ in their template
    arguments (the functions' names) but not in their code, and have one identity; a knob that
    changes the code (the tile) changes it."""
    from simtlab.catalog import family
    from simtlab.hw.resources import code_identity
    from simtlab.launch import build

    rung = family("sort").rung("radix_onesweep")
    base = {**rung.defaults, "PAIRS": 0, "ITEMS": 8}
    same = {code_identity(build(rung, {**base, "VALS": v}, "sm_90").cubin.data()) for v in (0, 1)}
    assert len(same) == 1
    assert code_identity(build(rung, {**base, "ITEMS": 12}, "sm_90").cubin.data()) not in same
    assert code_identity(build(rung, {**base, "PAIRS": 1, "VALS": 1}, "sm_90").cubin.data()) not in same
