"""The kernel ladders as data: one `Rung` entry per kernel file.

A rung names its source, its template and default parameters, its lesson, and
the function (in its family's op module) that turns parameters and a problem
into launch geometry. FLOP and byte counts belong to the problem and live in
the family's op module (`simtlab.ops.<family>`), shared by all its rungs.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import MappingProxyType, ModuleType
from typing import Mapping

from .hw.arch import Arch

__all__ = ["Rung", "Family", "FAMILIES", "family", "families", "all_rungs"]


def _frozen(d: Mapping | None = None) -> Mapping:
    return MappingProxyType(dict(d or {}))


@dataclass(frozen=True)
class Rung:
    family: str
    stage: int
    name: str
    source: str  # path under simtlab/kernels/
    kernel: str  # __global__ template name
    template_params: tuple[str, ...]  # template arguments, in order
    defaults: Mapping[str, int]
    lesson: str
    geometry: str  # launch-geometry function in the family's op module
    vec_variant: bool = False  # trailing `bool VEC` template argument: 128-bit path vs predicated scalar path
    arch_defaults: Mapping[str, Mapping[str, int]] = field(default_factory=_frozen)  # per-arch overrides
    tunable: tuple[str, ...] = ()
    min_cc: tuple[int, int] = (7, 0)  # cp.async needs (8, 0)
    from_store: bool = False  # take parameters from the best verified result in the store, when there is one
    size_defaults: str | None = None  # op-module function (problem, device, vec) -> params, when the store has none
    sass_expect: tuple[str, ...] = ()  # opcodes (base or base.width) the lesson must put in the SASS
    aliases: tuple[str, ...] = ()  # other names the CLI accepts (e.g. "warptile")
    arch_specific: bool = False  # built for min_cc's "a" target (wgmma, setmaxnreg): runs on exactly that capability

    @property
    def id(self) -> str:
        return f"{self.family}/{self.stage:02d}_{self.name}"

    def params(self, arch: str | None = None, overrides: Mapping[str, int] | None = None) -> dict[str, int]:
        p = dict(self.defaults)
        if arch is not None:
            p.update(self.arch_defaults.get(Arch(arch).base, {}))
        for k, v in (overrides or {}).items():
            if k not in p:
                raise ValueError(f"{self.id} has no parameter {k!r}; it has {', '.join(p)}")
            p[k] = int(v)
        return p

    def name_expression(self, params: Mapping[str, int], vec: bool | None = None) -> str:
        args = [str(int(params[k])) for k in self.template_params]
        if self.vec_variant:
            args.append("true" if (vec is None or vec) else "false")
        return f"{self.kernel}<{', '.join(args)}>"

    def name_expressions(self, params: Mapping[str, int]) -> tuple[str, ...]:
        if self.vec_variant:
            return (self.name_expression(params, True), self.name_expression(params, False))
        return (self.name_expression(params),)

    def supports(self, cc: tuple[int, int]) -> bool:
        return tuple(cc) == self.min_cc if self.arch_specific else tuple(cc) >= self.min_cc

    @property
    def requirement(self) -> str:
        """What the rung needs, in words: 'compute capability 8.0+' or 'exactly 9.0 (sm_90a)'."""
        cc = f"{self.min_cc[0]}.{self.min_cc[1]}"
        if self.arch_specific:
            return f"compute capability exactly {cc} (sm_{self.min_cc[0]}{self.min_cc[1]}a)"
        return f"compute capability {cc}+"

    def build_arch(self, arch: str) -> str:
        """The target a cubin is built for: the "a" variant for architecture-specific rungs."""
        return Arch(arch).specific if self.arch_specific else Arch(arch)


@dataclass(frozen=True)
class Family:
    name: str
    title: str
    op_module: str
    reference: str  # what every rung is compared with, timed in the same run
    default_sizes: tuple[str, ...]
    rungs: tuple[Rung, ...]
    metric: str = "tflops"  # headline figure: "tflops" (compute-bound) or "gbs" (memory-bound)
    check_size: str = "1000003"  # a small odd problem for sanitizers and quick checks

    def op(self) -> ModuleType:
        return importlib.import_module(self.op_module)

    def rung(self, key: str | int) -> Rung:
        """By name ('naive'), stage (3, '3', '03') or id ('gemm/03_smem_tiling')."""
        text = str(key).split("/")[-1]
        for r in self.rungs:
            if text in (r.name, f"{r.stage:02d}_{r.name}", *r.aliases) or (text.isdigit() and int(text) == r.stage):
                return r
        raise KeyError(f"family {self.name!r} has no rung {key!r}; rungs: {', '.join(r.name for r in self.rungs)}")


# Tile shapes of the warp-tiled rungs, shared by the tunable entries.
_WARP = ("BM", "BN", "BK", "WM", "WN", "WMITER", "WNITER")
_WARP_TUNABLE = _WARP + ("STAGES", "MINB")
# sm_80's ptxas needs a few more than 128 registers for the cp.async rungs: capping at two
# blocks per SM (MINB=2) spills there, so one block per SM is the spill-free default.
_SM80_NO_SPILL = _frozen({"sm_80": _frozen({"MINB": 1}), "sm_86": _frozen({"MINB": 1}), "sm_89": _frozen({"MINB": 1})})

GEMM = Family(
    name="gemm",
    title="fp32 GEMM on CUDA cores: C = alpha*A@B + beta*C, row-major",
    op_module="simtlab.ops.gemm",
    reference="cuBLAS SGEMM (TF32 off)",
    default_sizes=("1024", "2048", "4096"),
    rungs=(
        Rung("gemm", 1, "naive", "gemm/01_naive.cu", "gemm_naive", ("BLOCK",), _frozen({"BLOCK": 16}),
             "one thread per output; a warp's A loads are K*4 bytes apart: uncoalesced, no reuse",
             "geometry_naive"),
        Rung("gemm", 2, "coalesced", "gemm/02_coalesced.cu", "gemm_coalesced", ("BX", "BY"),
             _frozen({"BX": 32, "BY": 8}),
             "threadIdx.x walks columns: B and C accesses coalesce, A is a broadcast",
             "geometry_coalesced"),
        Rung("gemm", 3, "smem_tiling", "gemm/03_smem_tiling.cu", "gemm_smem_tiling", ("TILE",),
             _frozen({"TILE": 32}),
             "tiles of A and B staged in shared memory: global traffic / TILE, now bound by shared loads",
             "geometry_square_tile", sass_expect=("LDS", "BAR")),
        Rung("gemm", 4, "1d_blocktiling", "gemm/04_1d_blocktiling.cu", "gemm_1d_blocktiling",
             ("BM", "BN", "BK", "TM"), _frozen({"BM": 64, "BN": 64, "BK": 8, "TM": 8}),
             "TM outputs per thread: one B value in a register feeds TM FMAs",
             "geometry_1d"),
        Rung("gemm", 5, "2d_blocktiling", "gemm/05_2d_blocktiling.cu", "gemm_2d_blocktiling",
             ("BM", "BN", "BK", "TM", "TN"), _frozen({"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}),
             "TMxTN register tile per thread (outer product): 1/4 shared load per FMA at 8x8",
             "geometry_2d"),
        Rung("gemm", 6, "vectorized", "gemm/06_vectorized.cu", "gemm_vectorized",
             ("BM", "BN", "BK", "TM", "TN"), _frozen({"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}),
             "float4 global/shared accesses, A transposed in shared memory: 4x fewer memory instructions",
             "geometry_2d", vec_variant=True, sass_expect=("LDG.128", "LDS.128", "STG.128")),
        Rung("gemm", 7, "bank_conflict_free", "gemm/07_bank_conflict_free.cu", "gemm_bank_conflict_free",
             ("BM", "BN", "BK", "TM", "TN"), _frozen({"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}),
             "padded A tile and float4-strided thread fragments: no shared-memory bank conflicts",
             "geometry_2d", vec_variant=True, sass_expect=("LDG.128", "LDS.128", "STG.128")),
        Rung("gemm", 8, "warptiling", "gemm/08_warptiling.cu", "gemm_warptiling", _WARP + ("MINB", "KAHAN"),
             _frozen({"BM": 128, "BN": 128, "BK": 8, "WM": 32, "WN": 64, "WMITER": 2, "WNITER": 2, "MINB": 2,
                      "KAHAN": 0}),
             "block -> warp -> thread tiles: compact per-warp fragments, whole-line C stores",
             "geometry_warptile", vec_variant=True, tunable=_WARP + ("MINB",),
             sass_expect=("LDG.128", "LDS.128", "STG.128"), aliases=("warptile",)),
        Rung("gemm", 9, "multistage", "gemm/09_multistage.cu", "gemm_multistage", _WARP_TUNABLE,
             _frozen({"BM": 128, "BN": 128, "BK": 8, "WM": 32, "WN": 64, "WMITER": 2, "WNITER": 2,
                      "STAGES": 3, "MINB": 2}),
             "cp.async ring of STAGES shared buffers: loads of the next slices overlap this slice's FMAs",
             "geometry_multistage", vec_variant=True, tunable=_WARP_TUNABLE, min_cc=(8, 0),
             arch_defaults=_SM80_NO_SPILL, sass_expect=("LDGSTS.32", "LDGSTS.128", "LDS.128")),
        Rung("gemm", 10, "tuned", "gemm/10_tuned.cu", "gemm_tuned", _WARP_TUNABLE + ("GROUP_M", "INTERIOR"),
             # 128x256 blocks, 8x16 outputs per thread, four stages, one block per SM: the optimum of
             # the H200 brute-force tables at 2048^3 and 4096^3; spill-free on sm_80 and sm_90.
             _frozen({"BM": 128, "BN": 256, "BK": 16, "WM": 32, "WN": 128, "WMITER": 2, "WNITER": 4,
                      "STAGES": 4, "MINB": 1, "GROUP_M": 8, "INTERIOR": 1}),
             "rung 9 + grouped tile order for L2 reuse, interior slices copied without bounds checks, parameters "
             "from the tuner's store or per-arch defaults",
             "geometry_tuned", vec_variant=True, tunable=_WARP_TUNABLE + ("GROUP_M",), min_cc=(8, 0),
             from_store=True, size_defaults="tuned_defaults", sass_expect=("LDGSTS.32", "LDGSTS.128", "LDS.128")),
    ),
    check_size="127x129x65",
)

ELEMENTWISE = Family(
    name="elementwise",
    title="fp32 vector add z = x + y (memory-bound)",
    op_module="simtlab.ops.elementwise",
    reference="device-to-device copy of the same bytes",
    default_sizes=("268435456",),
    rungs=(
        Rung("elementwise", 1, "scalar", "elementwise/01_scalar.cu", "vadd_scalar", ("BLOCK",),
             _frozen({"BLOCK": 256}), "one 4-byte element per thread: coalesced but few bytes in flight",
             "geometry_scalar"),
        Rung("elementwise", 2, "float4", "elementwise/02_float4.cu", "vadd_float4", ("BLOCK",),
             _frozen({"BLOCK": 256}), "one 16-byte access per operand per thread: 4x fewer instructions",
             "geometry_float4", vec_variant=True, sass_expect=("LDG.128", "STG.128")),
        Rung("elementwise", 3, "grid_stride", "elementwise/03_grid_stride.cu", "vadd_grid_stride",
             ("BLOCK", "UNROLL"), _frozen({"BLOCK": 256, "UNROLL": 4}),
             "grid sized to the GPU, UNROLL independent float4 loads in flight per thread",
             "geometry_grid_stride", vec_variant=True, tunable=("BLOCK", "UNROLL"), sass_expect=("LDG.128", "STG.128")),
    ),
    metric="gbs",
)

def _reduction_rung(stage: int, name: str, kernel: str, lesson: str, **kw) -> Rung:
    return Rung("reduction", stage, name, f"reduction/{stage:02d}_{name}.cu", kernel, ("BLOCK", "OP"),
                _frozen({"BLOCK": 256, "OP": 0}), lesson, f"geometry_{name}", size_defaults="operator_params",
                tunable=("BLOCK",), **kw)


REDUCTION = Family(
    name="reduction",
    title="fp32 reduction to one value (sum, or max with n:max)",
    op_module="simtlab.ops.reduction",
    reference="CuPy sum/max (CUB), and a device copy of the bytes read",
    default_sizes=("1073741824",),
    rungs=(
        _reduction_rung(1, "interleaved_divergent", "reduce_interleaved_divergent",
                        "tid % (2s) == 0: half the lanes of every warp idle through each step (divergence)",
                        sass_expect=("BAR",)),
        _reduction_rung(2, "interleaved_strided", "reduce_interleaved_strided",
                        "contiguous active threads (no divergence), but a 2s word stride: bank conflicts"),
        _reduction_rung(3, "sequential", "reduce_sequential",
                        "s[tid] += s[tid + s]: no divergence, conflict-free; half the threads idle from step 1"),
        _reduction_rung(4, "first_add_during_load", "reduce_first_add",
                        "two elements per thread added on the way in: no idle first step, half the blocks"),
        _reduction_rung(5, "unrolled_last_warp", "reduce_unrolled_last_warp",
                        "the last six steps inside one warp with __syncwarp: six block barriers fewer"),
        _reduction_rung(6, "completely_unrolled", "reduce_completely_unrolled",
                        "BLOCK as a template constant: every step unrolled, no loop control"),
        _reduction_rung(7, "multiple_per_thread", "reduce_multiple_per_thread",
                        "grid-stride loop, many elements per thread in a register: few blocks, one tree each"),
        _reduction_rung(8, "warp_shuffle", "reduce_warp_shuffle",
                        "__shfl_down_sync inside warps: one shared write per warp, one barrier per block",
                        sass_expect=("SHFL",)),
        _reduction_rung(9, "vectorized_single_pass", "reduce_vectorized_single_pass",
                        "LDG.128 loads and a last-block finish: one launch, deterministic order",
                        vec_variant=True, sass_expect=("SHFL", "LDG.128", "ATOMG")),
    ),
    metric="gbs",
)

_TILE = ("TILE", "ROWS")
TRANSPOSE = Family(
    name="transpose",
    title="fp32 matrix transpose, any rows x cols",
    op_module="simtlab.ops.transpose",
    reference="device-to-device copy of the same bytes",
    default_sizes=("16384",),
    rungs=(
        Rung("transpose", 1, "naive", "transpose/01_naive.cu", "transpose_naive", _TILE,
             _frozen({"TILE": 32, "ROWS": 8}), "coalesced reads, writes 32 rows apart: one sector per element written",
             "geometry_tiles"),
        Rung("transpose", 2, "shared_tile", "transpose/02_shared_tile.cu", "transpose_shared_tile", _TILE,
             _frozen({"TILE": 32, "ROWS": 8}),
             "transpose inside a shared 32x32 tile: both sides coalesced, column reads 32-way bank-conflicted",
             "geometry_tiles", sass_expect=("LDS", "STS", "BAR")),
        Rung("transpose", 3, "padded_tile", "transpose/03_padded_tile.cu", "transpose_padded_tile", _TILE,
             _frozen({"TILE": 32, "ROWS": 8}), "tile[32][33]: one float of padding puts a column in 32 banks",
             "geometry_tiles", sass_expect=("LDS", "STS", "BAR")),
        Rung("transpose", 4, "vectorized", "transpose/04_vectorized.cu", "transpose_vectorized", ("TILE",),
             _frozen({"TILE": 32}), "LDG.128 / STG.128: four elements per access, a quarter of the instructions",
             "geometry_vectorized", vec_variant=True, sass_expect=("LDG.128", "STG.128")),
        Rung("transpose", 5, "wide_tile", "transpose/05_wide_tile.cu", "transpose_wide_tile", ("TILE", "THREADS"),
             _frozen({"TILE": 64, "THREADS": 256}),
             "64x64 tile, four LDG.128 in flight per thread before any shared store: enough bytes to fill the DRAM pipe",
             "geometry_wide", vec_variant=True, sass_expect=("LDG.128", "STG.128", "BAR")),
    ),
    metric="gbs",
    check_size="333x517",
)

BRANCH = Family(
    name="branch",
    title="warp divergence: even/odd branch vs branch-free (64-term polynomials, compute-bound)",
    op_module="simtlab.ops.branch",
    reference="device copy of the same bytes (the memory floor)",
    default_sizes=("67108864",),
    rungs=(
        Rung("branch", 1, "even_odd", "branch/01_even_odd.cu", "branch_even_odd", ("BLOCK", "DEGREE"),
             _frozen({"BLOCK": 256, "DEGREE": 64}), "neighbouring lanes take opposite sides: each warp runs both loops",
             "geometry"),
        Rung("branch", 2, "branch_free", "branch/02_branch_free.cu", "branch_free", ("BLOCK", "DEGREE"),
             _frozen({"BLOCK": 256, "DEGREE": 64}), "select the coefficients, not the code: one loop for every lane",
             "geometry"),
    ),
    metric="tflops",
)

BOUNDARY = Family(
    name="boundary",
    title="warp divergence: particles reflecting off walls, if/else chain vs select",
    op_module="simtlab.ops.boundary",
    reference="device copy of the same bytes",
    default_sizes=("268435456",),
    rungs=(
        Rung("boundary", 1, "if_else_chain", "boundary/01_if_else_chain.cu", "boundary_if_else", ("BLOCK",),
             _frozen({"BLOCK": 256}), "data-dependent if/else: lanes of a warp disagree on the branch", "geometry"),
        Rung("boundary", 2, "select", "boundary/02_select.cu", "boundary_select", ("BLOCK",),
             _frozen({"BLOCK": 256}), "the same reflection as selects: no control flow", "geometry"),
    ),
    metric="gbs",
)

GEMM_TC = Family(
    name="gemm_tc",
    title="tensor-core GEMM: fp16/bf16 in, fp32 accumulate and out, C = A@B, row-major",
    op_module="simtlab.ops.gemm_tc",
    reference="cuBLAS GemmEx (same types)",
    default_sizes=("4096", "4096:bf16"),
    rungs=(
        Rung("gemm_tc", 1, "wmma", "gemm_tc/01_wmma.cu", "gemm_tc_wmma", ("DT", "WARPS_M", "WARPS_N"),
             _frozen({"DT": 0, "WARPS_M": 2, "WARPS_N": 2}),
             "one warp, one 16x16 tile: WMMA fragments loaded straight from global, 4096 MACs per HMMA",
             "geometry_wmma", min_cc=(8, 0), size_defaults="dtype_params", sass_expect=("HMMA",)),
        Rung("gemm_tc", 2, "wmma_smem", "gemm_tc/02_wmma_smem.cu", "gemm_tc_wmma_smem",
             ("DT", "BM", "BN", "BK", "WARPS_M", "WARPS_N"),
             _frozen({"DT": 0, "BM": 128, "BN": 128, "BK": 32, "WARPS_M": 2, "WARPS_N": 4}),
             "block tiles in shared memory: each fragment loaded there feeds several HMMAs",
             "geometry_wmma_smem", vec_variant=True, min_cc=(8, 0), size_defaults="dtype_params",
             sass_expect=("HMMA", "LDS", "BAR")),
        Rung("gemm_tc", 3, "mma_multistage", "gemm_tc/03_mma_multistage.cu", "gemm_tc_mma",
             ("DT", "BM", "BN", "WM", "WN", "STAGES"),
             _frozen({"DT": 0, "BM": 128, "BN": 128, "WM": 64, "WN": 32, "STAGES": 4}),
             "mma.sync + ldmatrix on XOR-swizzled tiles, a cp.async ring of STAGES slices (the Ampere way)",
             "geometry_mma", vec_variant=True, min_cc=(8, 0), size_defaults="dtype_params",
             sass_expect=("HMMA", "LDSM", "LDGSTS.128")),
        Rung("gemm_tc", 4, "wgmma_tma", "gemm_tc/04_wgmma_tma.cu", "gemm_tc_wgmma", ("DT", "BM", "BN", "STAGES"),
             _frozen({"DT": 0, "BM": 128, "BN": 256, "STAGES": 4}),
             "Hopper: TMA copies whole swizzled slices onto mbarriers; wgmma multiplies straight from shared memory",
             "geometry_wgmma", min_cc=(9, 0), arch_specific=True, size_defaults="dtype_params",
             tunable=("BM", "BN", "STAGES"), sass_expect=("HGMMA", "UTMALDG", "SYNCS")),
        Rung("gemm_tc", 5, "wgmma_ws", "gemm_tc/05_wgmma_ws.cu", "gemm_tc_wgmma_ws",
             ("DT", "BM", "BN", "STAGES", "GROUP_M"), _frozen({"DT": 0, "BM": 128, "BN": 256, "STAGES": 4, "GROUP_M": 8}),
             "warp-specialised: a TMA producer warpgroup and wgmma consumers on full/empty mbarriers, "
             "setmaxnreg, a persistent grid whose next loads overlap the last tile's stores",
             "geometry_wgmma_ws", min_cc=(9, 0), arch_specific=True, size_defaults="dtype_params",
             tunable=("BM", "BN", "STAGES", "GROUP_M"), sass_expect=("HGMMA", "UTMALDG", "SYNCS", "USETMAXREG")),
        Rung("gemm_tc", 6, "wgmma_cluster", "gemm_tc/06_wgmma_cluster.cu", "gemm_tc_wgmma_cluster",
             ("DT", "BM", "BN", "STAGES", "GROUP_M", "CM", "CN", "EPI", "BUFS", "KEEP", "OUT", "WAIT", "LEAN", "TA",
              "TB"),
             _frozen({"DT": 0, "BM": 128, "BN": 256, "STAGES": 4, "GROUP_M": 16, "CM": 2, "CN": 1, "EPI": 3, "BUFS": 2,
                      "KEEP": 4, "OUT": 0, "WAIT": 0, "LEAN": 1, "TA": 0, "TB": 0}),
             "clusters of 2 blocks share each B slice by TMA multicast (a third less L2 traffic); results leave "
             "through swizzled shared memory and TMA stores",
             "geometry_wgmma_cluster", min_cc=(9, 0), arch_specific=True, size_defaults="cluster_params",
             tunable=("BM", "BN", "STAGES", "GROUP_M", "CM", "CN", "EPI", "BUFS", "KEEP", "WAIT", "LEAN"),
             sass_expect=("HGMMA", "UTMALDG", "UTMASTG", "SYNCS", "USETMAXREG")),
    ),
    check_size="127x129x65",
)

CONV2D = Family(
    name="conv2d",
    title="single-channel 2D filter, fp32, same size, zeros outside, radius 1-7",
    op_module="simtlab.ops.conv2d",
    reference="device copy of the image (read + write), cupyx.scipy.ndimage.correlate, PyTorch conv2d",
    default_sizes=("8192:r3",),
    rungs=(
        Rung("conv2d", 1, "naive", "conv2d/01_naive.cu", "conv2d_naive", ("BX", "BY"), _frozen({"BX": 32, "BY": 8}),
             "one thread per pixel; every tap's input and filter value loaded from global memory", "geometry_pixel"),
        Rung("conv2d", 2, "constant", "conv2d/02_constant.cu", "conv2d_constant", ("BX", "BY"),
             _frozen({"BX": 32, "BY": 8}),
             "filter in __constant__ memory: one broadcast per tap for the whole warp, half the loads",
             "geometry_pixel"),
        Rung("conv2d", 3, "smem_tile", "conv2d/03_smem_tile.cu", "conv2d_smem_tile", ("BX", "BY", "R"),
             _frozen({"BX": 32, "BY": 8, "R": 3}),
             "haloed input tile loaded once per block into shared memory; taps unrolled for the radius",
             "geometry_pixel", size_defaults="radius_params", sass_expect=("LDS", "BAR")),
        Rung("conv2d", 4, "register_x", "conv2d/04_register_x.cu", "conv2d_register_x", ("BX", "BY", "R"),
             _frozen({"BX": 32, "BY": 8, "R": 3}),
             "four outputs per thread: each window row read once (LDS.128) feeds 4(2R+1) FMAs",
             "geometry_register_x", size_defaults="radius_params", sass_expect=("LDS.128", "STG.128")),
        Rung("conv2d", 5, "register_xy", "conv2d/05_register_xy.cu", "conv2d_register_xy", ("BX", "BY", "TY", "R"),
             _frozen({"BX": 32, "BY": 8, "TY": 4, "R": 3}),
             "a TYx4 patch per thread: each input row read once feeds every output row it touches; FMA-bound",
             "geometry_register_xy", size_defaults="radius_rows_params", sass_expect=("LDS.128", "STG.128")),
        Rung("conv2d", 6, "pipelined", "conv2d/06_pipelined.cu", "conv2d_pipelined", ("BX", "BY", "TX", "TY", "R", "NT"),
             _frozen({"BX": 32, "BY": 8, "TX": 4, "TY": 4, "R": 3, "NT": 2}),
             "a block walks NT tiles down a strip; cp.async fills the next tile (16-byte copies) while "
             "this one computes",
             "geometry_pipelined", min_cc=(8, 0), size_defaults="radius_rows_params",
             sass_expect=("LDGSTS", "LDS.128")),
        Rung("conv2d", 7, "tma", "conv2d/07_tma.cu", "conv2d_tma", ("BX", "BY", "TX", "TY", "R", "NT"),
             _frozen({"BX": 32, "BY": 8, "TX": 4, "TY": 8, "R": 3, "NT": 8}),
             "one thread asks the copy engine (TMA) for each haloed tile, zeros outside the image included: "
             "no fill instructions left",
             "geometry_tma", min_cc=(9, 0), size_defaults="tma_params", sass_expect=("UTMALDG", "SYNCS")),
    ),
    metric="gbs",
    check_size="333x517:r7",
)

STENCIL = Family(
    name="stencil",
    title="3D 7-point Jacobi step, fp32, zeros outside the grid",
    op_module="simtlab.ops.stencil",
    reference="device copy of the grid (read + write), CuPy slices",
    default_sizes=("512",),
    rungs=(
        Rung("stencil", 1, "naive", "stencil/01_naive.cu", "stencil_naive", ("BX", "BY"), _frozen({"BX": 32, "BY": 8}),
             "one thread per point, seven global loads: the z neighbours are a plane away", "geometry_naive"),
        Rung("stencil", 2, "blocking_25d", "stencil/02_blocking_25d.cu", "stencil_25d", ("BX", "BY", "ZC"),
             _frozen({"BX": 32, "BY": 8, "ZC": 64}),
             "2.5D: the plane in shared memory with its halo, z neighbours in registers, marching along z",
             "geometry_25d", sass_expect=("LDS", "BAR")),
        Rung("stencil", 3, "pipelined_25d", "stencil/03_pipelined_25d.cu", "stencil_25d_pipelined",
             ("BX", "BY", "RY", "ZC"), _frozen({"BX": 32, "BY": 8, "RY": 4, "ZC": 32}),
             "2.5D with plane z+2 loading while plane z computes (double-buffered tile, one barrier a plane)",
             "geometry_25d_pipelined", sass_expect=("LDS", "BAR")),
        Rung("stencil", 4, "async_ring", "stencil/04_async_ring.cu", "stencil_async_ring",
             ("BX", "BY", "RY", "ZC", "P"), _frozen({"BX": 256, "BY": 2, "RY": 8, "ZC": 32, "P": 2}),
             "planes stream by cp.async into a ring of shared slots P planes ahead: loads in flight "
             "without registers",
             "geometry_async_ring", min_cc=(8, 0), sass_expect=("LDGSTS", "BAR")),
    ),
    metric="gbs",
    check_size="33x65x17",
)

SOFTMAX = Family(
    name="softmax",
    title="row-wise softmax over the last dimension, fp32 or bf16 storage, fp32 math",
    op_module="simtlab.ops.softmax",
    reference="device copy of the matrix (read + write), PyTorch softmax",
    default_sizes=("32768x4096",),
    rungs=(
        Rung("softmax", 1, "three_pass", "softmax/01_three_pass.cu", "softmax_three_pass", ("DT", "BLOCK"),
             _frozen({"DT": 0, "BLOCK": 256}), "max, sum of exponentials, normalise: three launches, three reads of x",
             "geometry_row", size_defaults="dtype_params"),
        Rung("softmax", 2, "fused", "softmax/02_fused.cu", "softmax_fused", ("DT", "BLOCK"),
             _frozen({"DT": 0, "BLOCK": 256}), "one launch per matrix, shuffle reductions; rereads of a row hit L2",
             "geometry_row", size_defaults="dtype_params", sass_expect=("SHFL",)),
        Rung("softmax", 3, "online", "softmax/03_online.cu", "softmax_online", ("DT", "BLOCK"),
             _frozen({"DT": 0, "BLOCK": 256}), "running max and rescaled running sum: the statistics in one read",
             "geometry_row", size_defaults="dtype_params", sass_expect=("SHFL",)),
        Rung("softmax", 4, "vectorized", "softmax/04_vectorized.cu", "softmax_vectorized",
             ("DT", "BLOCK", "VPT", "WARP_ROWS"), _frozen({"DT": 0, "BLOCK": 1024, "VPT": 1, "WARP_ROWS": 0}),
             "the row held in registers (LDG.128), __expf, a warp or a block per row by length: one read, one write",
             "geometry_vectorized", vec_variant=True, size_defaults="row_params",
             sass_expect=("LDG.128", "STG.128", "MUFU")),
    ),
    metric="gbs",
    check_size="333x517",
)


LAYERNORM = Family(
    name="layernorm",
    title="LayerNorm forward over the last dimension with weight and bias, fp32 or bf16 storage, fp32 math",
    op_module="simtlab.ops.layernorm",
    reference="device copy of the matrix (read + write), PyTorch layer_norm",
    default_sizes=("32768x4096",),
    rungs=(
        Rung("layernorm", 1, "two_pass", "layernorm/01_two_pass.cu", "layernorm_two_pass", ("DT", "BLOCK"),
             _frozen({"DT": 0, "BLOCK": 256}),
             "mean, then variance around it (no cancellation), then normalise: three reads of each row",
             "geometry_row", size_defaults="dtype_params", sass_expect=("SHFL", "MUFU")),
        Rung("layernorm", 2, "welford", "layernorm/02_welford.cu", "layernorm_welford",
             ("DT", "BLOCK", "VPT", "WARP_ROWS", "EARLY"),
             _frozen({"DT": 0, "BLOCK": 1024, "VPT": 1, "WARP_ROWS": 0, "EARLY": 1}),
             "the row in registers, per-thread moments merged by Chan/Welford in one shuffle reduction: one read",
             "geometry_vectorized", vec_variant=True, size_defaults="row_params",
             sass_expect=("LDG.128", "STG.128", "SHFL")),
        Rung("layernorm", 3, "two_sums", "layernorm/03_two_sums.cu", "layernorm_two_sums",
             ("DT", "BLOCK", "VPT", "WARP_ROWS", "EARLY"),
             _frozen({"DT": 0, "BLOCK": 1024, "VPT": 1, "WARP_ROWS": 0, "EARLY": 1}),
             "issue-bound, not memory-bound: two one-value sums (mean, then squared deviations) over the "
             "row in registers replace the three-value Chan merge; each value unpacked once",
             "geometry_vectorized", vec_variant=True, size_defaults="row_params",
             sass_expect=("LDG.128", "STG.128", "SHFL")),
    ),
    metric="gbs",
    check_size="333x517",
)

INTRINSICS = Family(
    name="intrinsics",
    title="fast-math intrinsics vs accurate spellings: exp, division by a run-time value, int / and % by 2^k",
    op_module="simtlab.ops.intrinsics",
    reference="float64 (accuracy); the rungs against each other (speed)",
    default_sizes=("exp:2^24", "div:2^24", "int:2^24"),
    rungs=(
        Rung("intrinsics", 1, "precise", "intrinsics/01_precise.cu", "intrinsics_precise", ("OP", "REPS"),
             _frozen({"OP": 0, "REPS": 64}),
             "expf, IEEE a / d, int / and % by a run-time divisor: accurate, several instructions each",
             "geometry", size_defaults="op_params", sass_expect=("MUFU",)),
        Rung("intrinsics", 2, "fast", "intrinsics/02_fast.cu", "intrinsics_fast", ("OP", "REPS"),
             _frozen({"OP": 0, "REPS": 64}),
             "__expf, a * (1/d), >> and &: one or two instructions each, for a measured loss of accuracy",
             "geometry", size_defaults="op_params", sass_expect=("MUFU",)),
    ),
    metric="tflops",
    check_size="exp:1000003:r4",
)


FAMILIES: dict[str, Family] = {f.name: f for f in (ELEMENTWISE, GEMM, REDUCTION, TRANSPOSE, BRANCH, BOUNDARY,
                                                   GEMM_TC, CONV2D, STENCIL, SOFTMAX, LAYERNORM,
                                                   INTRINSICS)}


def families() -> list[Family]:
    return list(FAMILIES.values())


def family(name: str) -> Family:
    try:
        return FAMILIES[name]
    except KeyError:
        raise KeyError(f"no kernel family {name!r}; known: {', '.join(FAMILIES)}") from None


def all_rungs() -> list[Rung]:
    return [r for f in families() for r in f.rungs]
