"""fp32 GEMM, C = alpha*A@B + beta*C with row-major contiguous A (MxK), B (KxN), C (MxN)."""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass

import numpy as np

from ..family import Family, Rung, frozen
from ..hw.occupancy import SMEM_WITHOUT_OPT_IN, arch_limits
from ..launch import Launch, grid2
from ..space import Space
from ..verify import dot_tolerance
from .base import MAX_DIM, Reference, parse_int, sm_count
from .base import unsupported  # noqa: F401 (FamilyOps' default hook)

DTYPE = "float32"
OPTIN_SMEM = arch_limits("sm_90").smem_per_block_optin  # the space's default limit: the H200's


@dataclass(frozen=True)
class GemmProblem:
    M: int
    N: int
    K: int
    alpha: float = 1.0
    beta: float = 0.0
    dtype: str = DTYPE

    def __post_init__(self):
        for name in ("M", "N", "K"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"GEMM size {name} must be >= 1, got {getattr(self, name)}")
            if int(getattr(self, name)) > MAX_DIM:
                raise ValueError(f"GEMM size {name} = {getattr(self, name)} exceeds 2^31 - 1 (the kernels' 32-bit "
                                 "sizes)")

    @property
    def label(self) -> str:
        s = f"{self.M}x{self.N}x{self.K}"
        if (self.alpha, self.beta) != (1.0, 0.0):
            s += f" a={self.alpha:g} b={self.beta:g}"
        return s

    @property
    def flops(self) -> int:
        return 2 * self.M * self.N * self.K

    @property
    def bytes(self) -> int:
        """Fewest bytes through DRAM: A and B read once, C written (and read when beta != 0)."""
        c_passes = 2 if self.beta != 0 else 1
        return 4 * (self.M * self.K + self.K * self.N + c_passes * self.M * self.N)


def parse_size(text: str, alpha: float = 1.0, beta: float = 0.0) -> GemmProblem:
    """'2048' (a cube) or 'MxNxK'."""
    parts = str(text).lower().replace("*", "x").split("x")
    if len(parts) == 1:
        n = parse_int(parts[0], "GEMM size")
        return GemmProblem(n, n, n, alpha, beta)
    if len(parts) != 3:
        raise ValueError(f"GEMM size {text!r}: use N (a cube) or MxNxK")
    m, n, k = (parse_int(p, f"GEMM size {text!r}") for p in parts)
    return GemmProblem(m, n, k, alpha, beta)


def tolerance(p: GemmProblem, ws=None) -> float:
    return dot_tolerance(p.dtype, p.K)


# --- launch geometry, one function per rung shape ---------------------------------------------

def geometry_naive(params, p: GemmProblem, device=None) -> Launch:
    b = params["BLOCK"]
    return Launch(grid2(p.M, p.N, b, b), (b, b, 1))  # x walks rows of C


def geometry_coalesced(params, p: GemmProblem, device=None) -> Launch:
    return Launch(grid2(p.N, p.M, params["BX"], params["BY"]), (params["BX"], params["BY"], 1))


def geometry_square_tile(params, p: GemmProblem, device=None) -> Launch:
    t = params["TILE"]
    return Launch(grid2(p.N, p.M, t, t), (t, t, 1))


def geometry_1d(params, p: GemmProblem, device=None) -> Launch:
    threads = params["BM"] // params["TM"] * params["BN"]
    return Launch(grid2(p.N, p.M, params["BN"], params["BM"]), (threads, 1, 1))


def geometry_2d(params, p: GemmProblem, device=None) -> Launch:
    threads = (params["BM"] // params["TM"]) * (params["BN"] // params["TN"])
    return Launch(grid2(p.N, p.M, params["BN"], params["BM"]), (threads, 1, 1))


def warptile_threads(params) -> int:
    return (params["BM"] // params["WM"]) * (params["BN"] // params["WN"]) * 32


def multistage_smem(params) -> int:
    """Dynamic shared memory: STAGES x (padded transposed A tile + B tile), fp32."""
    return params["STAGES"] * (params["BK"] * (params["BM"] + 4) + params["BK"] * params["BN"]) * 4


def geometry_warptile(params, p: GemmProblem, device=None) -> Launch:
    return Launch(grid2(p.N, p.M, params["BN"], params["BM"]), (warptile_threads(params), 1, 1))


def geometry_multistage(params, p: GemmProblem, device=None) -> Launch:
    return Launch(grid2(p.N, p.M, params["BN"], params["BM"]), (warptile_threads(params), 1, 1),
                  multistage_smem(params))


def geometry_tuned(params, p: GemmProblem, device=None) -> Launch:
    tiles = -(-p.M // params["BM"]) * -(-p.N // params["BN"])
    return Launch((tiles, 1, 1), (warptile_threads(params), 1, 1), multistage_smem(params))


# --- rung 14: split-K and small tiles on the CUDA cores ---------------------------------------

def split_threads(params) -> int:
    return (params["BM"] // params["TM"]) * (params["BN"] // params["TN"])


def split_smem(params) -> int:
    """The two staged slices ([k][m] and [k][n] rows padded by 4 floats), or the parked tile (rows of
    BN + 1) that takes their place after the main loop, whichever is larger."""
    ring = 2 * params["BK"] * (params["BM"] + 4 + params["BN"] + 4)
    return 4 * max(ring, params["BM"] * (params["BN"] + 1))


def geometry_split_k(params, p: GemmProblem, device=None) -> Launch:
    """Tiles of the kernel's (possibly swapped) C in x and y, the cluster's SPLITS blocks in z."""
    from .split import MAX_GRID_YZ

    m, n = (p.N, p.M) if params["TC"] else (p.M, p.N)
    gx, gy = -(-n // params["BN"]), -(-m // params["BM"])
    if gy > MAX_GRID_YZ or params["SPLITS"] > MAX_GRID_YZ:
        raise ValueError(f"rung 14 with {params}: {gy} tile rows exceed the grid's 65535 (larger BM, or rung 10)")
    if params["SPLITS"] > 1 and device is not None and tuple(device.compute_capability) < (9, 0):
        raise ValueError(f"rung 14 with SPLITS {params['SPLITS']} splits K over a cluster: clusters need compute "
                         f"capability 9.0, this GPU is {device.arch} (SPLITS 1)")
    return Launch((gx, gy, params["SPLITS"]), (split_threads(params), 1, 1), split_smem(params))


def split_defaults(p: GemmProblem, device=None, vec=None) -> dict:
    """Rung 14 as the dispatcher runs it for this problem (the tile, the split, the swap, the row
    alignments: ops.gemm_dispatch)."""
    from .gemm_dispatch import FP32, split_config

    return split_config(p, device, FP32)


def split_space(max_smem: int) -> Space:
    defaults = dict(FAMILY.rung("split_k").defaults)
    rules = [("thread tiles divide the block", lambda c: c["BM"] % c["TM"] == 0 and c["BN"] % c["TN"] == 0),
             ("whole warps, at most 1024 threads", lambda c: split_threads({**defaults, **c}) % 32 == 0
              and 32 <= split_threads({**defaults, **c}) <= 1024),
             ("shared memory within the limit", lambda c: split_smem({**defaults, **c}) <= max_smem)]
    return Space({"BM": (64, 128), "BN": (8, 16, 32, 64), "BK": (16, 32), "TM": (4, 8), "TN": (4, 8),
                  "WINDOW": (1, 2, 4), "SPLITS": (1, 2, 4, 8)}, rules)


# --- the search space of the warp-tiled rungs (8-10), the kernels' static_asserts and the
# device's limits as restrictions so invalid points never reach NVRTC --------------------------

def _warptile_restrictions(max_smem: int, with_stages: bool):
    def sub(c):
        return c["WM"] // c["WMITER"], c["WN"] // c["WNITER"]

    threads = warptile_threads
    rules = [
        ("warp tiles divide the block", lambda c: c["BM"] % c["WM"] == 0 and c["BN"] % c["WN"] == 0),
        ("sub-tiles are whole 4x4 lane tiles",
         lambda c: c["WM"] % c["WMITER"] == 0 and c["WN"] % c["WNITER"] == 0 and sub(c)[0] % 4 == 0 and sub(c)[1] % 4 == 0),
        ("a warp sub-tile holds 32 lanes of 4x4", lambda c: (sub(c)[0] // 4) * (sub(c)[1] // 4) == 32),
        ("32..1024 threads per block", lambda c: 32 <= threads(c) <= 1024),
        ("float4 tile loads divide among the threads",
         lambda c: c["BK"] % 4 == 0 and (c["BM"] * c["BK"]) % (4 * threads(c)) == 0
         and (c["BK"] * c["BN"]) % (4 * threads(c)) == 0),
        ("at most 128 accumulators per thread (255 registers)", lambda c: 16 * c["WMITER"] * c["WNITER"] <= 128),
        ("registers fit MINB blocks per SM",
         lambda c: (16 * c["WMITER"] * c["WNITER"] + 8 * (c["WMITER"] + c["WNITER"]) + 40) * threads(c) * c["MINB"]
         <= 65536),
    ]
    if with_stages:
        rules += [
            ("cp.async copy layout tiles the slice",
             lambda c: threads(c) % c["BK"] == 0 and threads(c) % (c["BN"] // 4) == 0
             and c["BM"] * c["BK"] // threads(c) <= 32),
            ("shared memory within the opt-in limit", lambda c: multistage_smem(c) <= max_smem),
        ]
    else:  # rung 8's tiles are static __shared__ arrays: 48 KB, the padded A tile included (the first
        # H200 table of rung 8 found six points ptxas refused: 0xc200 bytes of 0xc000)
        rules.append(("static shared memory within 48 KB",
                      lambda c: multistage_smem({"STAGES": 1, **c}) <= SMEM_WITHOUT_OPT_IN))
    return rules


def gemm_warptile(max_smem: int = OPTIN_SMEM, stages: bool = True, group_m: bool = True) -> Space:
    """The warp-tiled rungs' space: rung 10 (tuned), rung 9 without GROUP_M, rung 8 without STAGES."""
    params = {"BM": (64, 128, 256), "BN": (64, 128, 256), "BK": (8, 16, 32), "WM": (32, 64, 128),
              "WN": (32, 64, 128), "WMITER": (1, 2, 4), "WNITER": (1, 2, 4), "MINB": (1, 2)}
    if stages:
        params["STAGES"] = (2, 3, 4)
    fixed = {}
    if group_m:
        fixed["GROUP_M"] = 8
    return Space(params, _warptile_restrictions(max_smem, stages), fixed)


def gemm_features(config: dict) -> list[float]:
    """What the cost model sees of a configuration: the parameters and what they imply."""
    accumulators = 16 * config["WMITER"] * config["WNITER"]
    smem = multistage_smem({"STAGES": 1, **config})
    intensity = config["BM"] * config["BN"] / (config["BM"] + config["BN"])
    threads = warptile_threads(config)
    return [float(config[k]) for k in sorted(config)] + [threads, accumulators, smem, intensity,
                                                         threads * config["MINB"]]


def _c_bytes(p: GemmProblem) -> int:
    return 4 * p.M * p.N * (2 if p.beta != 0 else 1)


def _panels(p: GemmProblem, bm: int, bn: int, k: int) -> int:
    """A BMxBN block tile loads a BMxk panel of A and a kxBN panel of B once for BM*BN outputs."""
    tiles_m, tiles_n = -(-p.M // bm), -(-p.N // bn)
    return 4 * k * (tiles_n * bm * tiles_m + tiles_m * bn * tiles_n)


def requested_bytes(params, p: GemmProblem) -> int:
    """Bytes a block-tiled rung's threads request from global memory (before any cache helps): what
    tiling changes - its A and B panels and C."""
    return _panels(p, params["BM"], params["BN"], p.K) + _c_bytes(p)


def per_output_bytes(params, p: GemmProblem) -> int:
    """Rungs 1-2: one thread an output loads two floats an FMA."""
    return 8 * p.M * p.N * p.K + _c_bytes(p)


def square_tile_bytes(params, p: GemmProblem) -> int:
    """Rung 3: TILE x TILE block tiles."""
    return _panels(p, params["TILE"], params["TILE"], p.K) + _c_bytes(p)


def tf32x3_bytes(params, p: GemmProblem) -> int:
    """Rung 11: the split (reads A and B, writes two parts of each, K padded; AREG 1: B's only, A
    read for its note), then three passes of block-tile panels over the parts."""
    from .tf32x3 import padded_k

    kp = padded_k(p.K)
    split = 4 * p.K * (p.M + p.N) + 8 * kp * (p.N + (0 if params.get("AREG", 0) else p.M))
    return split + 3 * _panels(p, params["BM"], params["BN"], kp) + _c_bytes(p)


# --- size-dependent defaults of the tuned rung -----------------------------------------------

# Tile classes of the tuned rung, measured on the H200 at every reported size
# (benchmarks/results/2026-12-02_h200_560aff/sweep_sizes.json):
#  * LARGE, 128x256 blocks with 8x16 outputs per thread in 32x128 warp tiles, four stages, one
#    block per SM: the optimum of all 1038 valid configurations at both 2048^3 (47.8 TFLOP/s) and
#    4096^3 (48.8) in the brute-force tables (tests/fixtures/gemm_tuned_h200_*.json), but a slow
#    predicated path;
#  * MEDIUM, 128x128 with 8x8 per thread, two blocks per SM: ~45 TFLOP/s, twice the tiles;
#  * SMALL, 64x64 with 8x4 per thread, four blocks per SM: 30.8 TFLOP/s at 1024^3 where the
#    others leave most SMs idle (MEDIUM 19.6, LARGE 11.4);
#  * PREDICATED, MEDIUM with BK=8: rows that are not 16-byte aligned (37.3 at 4097x4095x4093;
#    the BK=16 MEDIUM measured 38.1 there but spills on NVRTC 13.5, so it is left to the store).
TUNED_LARGE = dict(BM=128, BN=256, BK=16, WM=32, WN=128, WMITER=2, WNITER=4, STAGES=4, MINB=1, GROUP_M=8)
TUNED_MEDIUM = dict(BM=128, BN=128, BK=16, WM=32, WN=64, WMITER=2, WNITER=2, STAGES=2, MINB=2, GROUP_M=8)
TUNED_SMALL = dict(BM=64, BN=64, BK=16, WM=32, WN=32, WMITER=2, WNITER=1, STAGES=3, MINB=4, GROUP_M=8)
TUNED_PREDICATED = dict(BM=128, BN=128, BK=8, WM=32, WN=64, WMITER=2, WNITER=2, STAGES=3, MINB=2, GROUP_M=8)


def _tiles(p: GemmProblem, params: dict) -> int:
    return -(-p.M // params["BM"]) * -(-p.N // params["BN"])


def tuned_defaults(p: GemmProblem, device=None, vec: bool | None = True) -> dict:
    """The tuned rung's parameters when the store has no measurement for this problem:
    the largest tile class that still gives (about) one block per SM."""
    sms = sm_count(device)
    if not vec:
        return dict(TUNED_PREDICATED)
    if _tiles(p, TUNED_LARGE) >= 0.9 * sms:
        return dict(TUNED_LARGE)
    if _tiles(p, TUNED_MEDIUM) >= sms:
        return dict(TUNED_MEDIUM)
    return dict(TUNED_SMALL)


# --- rung 11 (3xTF32): the split pre-pass and the tensor-core main loop ---------------------------

TF32X3 = "tf32x3"  # rung capability: fp32 products from TF32 parts on the tensor cores (ops/tf32x3.py)


def make_runner(instance, problem, ws, device, vec, prepare):
    """Rungs 11 and 13: the split kernels and rung 6's SPLIT build (their scratch allocated once,
    outside the timed call); rung 12: its note and exponents passes before the main kernel (the
    flag and exponents allocated once); on CuPy's current stream. The others: one launch (None)."""
    if instance.rung.name == "tf32x3_mma":
        return _tf32x3_mma_runner(instance, problem, ws, device, vec, prepare)
    if instance.rung.name == "split_k":  # rung 14: launched as simtlab.gemm launches it, on CuPy's current stream
        import cupy

        from .split import F32SplitKernel

        kernel = F32SplitKernel(instance, problem, device, prepare)
        pa, pb, pc, p = ws.A.data.ptr, ws.B.data.ptr, ws.C.data.ptr, problem
        current_stream = cupy.cuda.get_current_stream
        return lambda: kernel.launch(pa, pb, pc, current_stream().ptr, p.alpha, p.beta)
    if instance.rung.name == "f16x3":
        from .f16x3 import F16x3Gemm

        return _split_runner(F16x3Gemm, instance, problem, ws, device, prepare)
    if not instance.rung.can(TF32X3):
        return None
    from .tf32x3 import Tf32x3Gemm

    return _split_runner(Tf32x3Gemm, instance, problem, ws, device, prepare)


def _split_runner(kind, instance, p, ws, device, prepare):
    """Rungs 11 and 13 (`kind`: ops.tf32x3.Tf32x3Gemm, ops.f16x3.F16x3Gemm): the split kernels and
    rung 6's SPLIT build, their scratch (parts, exponents) allocated once, outside the timed call."""
    import cupy

    kernel = kind(instance, p.M, p.N, p.K, device, prepare)
    scratch = cupy.empty(kernel.parts_bytes, dtype=cupy.uint8)
    A, B, C, base = ws.A, ws.B, ws.C, scratch.data.ptr
    if C.data.ptr % 16 and instance.params["EPI"]:
        raise ValueError(f"rung {instance.rung.stage}'s TMA stores need C on a 16-byte boundary (or EPI 0)")
    stream = cupy.cuda.get_current_stream

    def run():
        kernel.run(A.data.ptr, p.K, B.data.ptr, p.N, C.data.ptr, p.alpha, p.beta, base, stream().ptr)

    run.scratch = scratch  # (alive as long as the runner)
    return run


def _tf32x3_mma_runner(instance, p, ws, device, vec, prepare):
    import cupy

    from .tf32x3 import Tf32x3MmaGemm

    kernel = Tf32x3MmaGemm(instance, p, device, prepare, bool(vec))
    scratch = cupy.empty(kernel.scratch_bytes, dtype=cupy.uint8)
    A, B, C, base = ws.A, ws.B, ws.C, scratch.data.ptr
    stream = cupy.cuda.get_current_stream

    def run():
        kernel.run(A.data.ptr, B.data.ptr, C.data.ptr, p.alpha, p.beta, base, stream().ptr)

    run.scratch = scratch  # (alive as long as the runner)
    return run


def f16x3_bytes(params, p: GemmProblem) -> int:
    """Rung 13: the maxima pass (reads A and B), the split (reads them again, writes two 2-byte parts
    of each, K padded), then three passes of block-tile panels over the 2-byte parts."""
    from .f16x3 import padded_k

    kp = padded_k(p.K)
    split = 8 * p.K * (p.M + p.N) + 4 * kp * (p.M + p.N)
    return split + 3 * _panels(p, params["BM"], params["BN"], kp) // 2 + _c_bytes(p)


def _f16x3_rung() -> Rung:
    from . import f16x3, gemm_tc

    cluster = gemm_tc.FAMILY.rung("wgmma_cluster")
    return Rung("gemm", 13, "f16x3", "gemm/13_f16x3.cu", cluster.kernel, cluster.template_params + ("SPLIT", "SK", "AREG"),
                frozen({**cluster.defaults, "DT": 0, "TA": 0, "TB": 1, "SPLIT": 1, "BN": 128, "SK": 0, "AREG": 0}),
                "rung 11 with fp16 parts: rows and columns scaled by powers of two into fp16's range, small parts "
                "stored times 2^11; the tensor cores' fp16 rate is twice TF32's",
                f16x3.geometry, min_cc=(9, 0), arch_specific=True, size_defaults=f16x3.size_defaults,
                tunable=("STAGES", "GROUP_M", "CM", "SPLIT"), traffic=f16x3_bytes, work=f16x3.work,
                sass_expect=("HGMMA", "UTMALDG", "SYNCS", "USETMAXREG"), builds_on=11)


def tf32x3_work(params, problem, sms: int) -> tuple[int, int]:
    """Rung 11's persistent grid: rung 6's cluster tiles over the clusters that fit."""
    from . import gemm_tc, tf32x3

    return gemm_tc.cluster_work(params, tf32x3.tc_problem(problem)), sms // (params["CM"] * params["CN"])


def tf32x3_space(max_smem: int) -> Space:
    """Rung 11's knobs: the tile width (64 or 128 columns: the promoted sums take the registers 256
    would need), pipeline depth, cluster pairing, tile order and the promotion period (SPLIT 4
    measured faster and less accurate than 2: docs/design/gemm.md)."""
    from . import gemm_tc

    defaults = dict(FAMILY.rung("tf32x3").defaults)
    rules = [("shared memory within the opt-in limit",
              lambda c: gemm_tc.cluster_smem({**defaults, **c}) <= max_smem)]
    return Space({"BN": (64, 128), "STAGES": (3, 4, 5, 6, 7, 8), "GROUP_M": (8, 16), "CM": (1, 2), "SPLIT": (1, 2, 4),
                  "SK": (0, 1)}, rules)


def _tf32x3_rung() -> Rung:
    from . import gemm_tc, tf32x3

    cluster = gemm_tc.FAMILY.rung("wgmma_cluster")
    return Rung("gemm", 11, "tf32x3", "gemm/11_tf32x3.cu", cluster.kernel, cluster.template_params + ("SPLIT", "SK", "AREG"),
                frozen({**cluster.defaults, "DT": 2, "SPLIT": 2, "BN": 128, "SK": 0, "AREG": 0}),
                "3xTF32: each fp32 operand split into two TF32 parts, three tensor-core passes (the small "
                "products first) on the tensor-core ladder's rung 6: fp32 accuracy at tensor-core speed",
                tf32x3.geometry, min_cc=(9, 0), arch_specific=True, size_defaults=tf32x3.size_defaults,
                tunable=("BN", "STAGES", "GROUP_M", "CM", "SPLIT", "SK"), capabilities=frozenset({TF32X3}), space=tf32x3_space,
                traffic=tf32x3_bytes, work=tf32x3_work,
                sass_expect=("HGMMA", "UTMALDG", "SYNCS", "USETMAXREG"))


# --- inputs, outputs, references ---------------------------------------------------------------

class Workspace:
    """Fresh random inputs in [-1, 1) for one problem; C is the output every runner writes."""

    def __init__(self, p: GemmProblem, seed: int):
        import cupy

        self.p = p
        rng = cupy.random.default_rng(seed)
        self.A = rng.random((p.M, p.K), dtype=cupy.float32) * 2 - 1
        self.B = rng.random((p.K, p.N), dtype=cupy.float32) * 2 - 1
        self.C0 = rng.random((p.M, p.N), dtype=cupy.float32) * 2 - 1 if p.beta != 0 else None
        self.C = cupy.empty((p.M, p.N), dtype=cupy.float32)

    def poison(self) -> None:
        """NaN where beta == 0 (C must not be read); C0 otherwise (an unwritten C keeps a wrong value)."""
        if self.C0 is None:
            self.C.fill(np.nan)
        else:
            self.C[...] = self.C0

    def args(self) -> tuple:
        p = self.p
        return (np.int32(p.M), np.int32(p.N), np.int32(p.K), np.float32(p.alpha), self.A, self.B,
                np.float32(p.beta), self.C)

    def vec_ok(self) -> bool:
        """The 128-bit paths need rows that start on 16-byte boundaries."""
        aligned = all(x.data.ptr % 16 == 0 for x in (self.A, self.B, self.C))
        return aligned and self.p.K % 4 == 0 and self.p.N % 4 == 0

    def expected(self):
        """float64 reference on the GPU (cuBLAS DGEMM on the fp32 inputs, exactly widened)."""
        import cupy

        ref = self.A.astype(cupy.float64) @ self.B.astype(cupy.float64)
        ref *= self.p.alpha
        if self.C0 is not None:
            ref += self.p.beta * self.C0.astype(cupy.float64)
        return ref

    def output(self):
        return self.C


def workspace(p: GemmProblem, seed: int) -> Workspace:
    return Workspace(p, seed)


def _cublas_sgemm(ws: Workspace):
    """cuBLAS SGEMM with the default (non-TF32) math mode, row-major via C^T = B^T A^T."""
    import cupy
    from cupy_backends.cuda.libs import cublas

    handle = cupy.cuda.device.get_cublas_handle()
    cublas.setMathMode(handle, getattr(cublas, "CUBLAS_DEFAULT_MATH", 0))
    cublas.setPointerMode(handle, getattr(cublas, "CUBLAS_POINTER_MODE_HOST", 0))
    p = ws.p
    alpha, beta = np.array(p.alpha, np.float32), np.array(p.beta, np.float32)
    op_n = getattr(cublas, "CUBLAS_OP_N", 0)

    def run():
        cublas.sgemm(handle, op_n, op_n, p.N, p.M, p.K, alpha.ctypes.data, ws.B.data.ptr, p.N,
                     ws.A.data.ptr, p.K, beta.ctypes.data, ws.C.data.ptr, p.N)

    return run


def _triton(ws: Workspace):
    from ..references.triton_gemm import triton_sgemm_runner

    return triton_sgemm_runner(ws.A, ws.B, ws.C, ws.p.alpha, ws.p.beta)


def _triton_tf32x3(ws: Workspace):
    from ..references.triton_gemm import triton_tf32x3_runner

    return triton_tf32x3_runner(ws.A, ws.B, ws.C, ws.p.alpha, ws.p.beta)


def references() -> list[Reference]:
    refs = [Reference("cuBLAS", _cublas_sgemm)]  # (and simtlab.gemm itself: see simtlab.api_calls)
    try:
        import torch  # noqa: F401
        import triton  # noqa: F401

        refs.append(Reference("Triton (ieee fp32)", _triton))
        refs.append(Reference("Triton (tf32x3)", _triton_tf32x3))  # rung 11's peer: 3xTF32 on the tensor cores
    except Exception:
        pass  # Triton is optional: a second reference where a Python user would have it
    return refs


# --- rung 12 (3xTF32 with mma.sync, sm_80+): split in registers from fp32 tiles ---------------

TF32X3_MMA_BK = 16  # the kernel's slice depth (a compile-time constant there)


def tf32x3_mma_smem(params) -> int:
    """Rung 12's dynamic shared memory: STAGES x (A slice, rows padded by 4 + B slice, rows padded by 8), fp32,
    and (ONCE) one more of each for the slice's small parts."""
    bk = TF32X3_MMA_BK
    return (params["STAGES"] + params["ONCE"]) * (params["BM"] * (bk + 4) + bk * (params["BN"] + 8)) * 4


def tf32x3_mma_threads(params) -> int:
    return (params["BM"] // params["WM"]) * (params["BN"] // params["WN"]) * 32


def geometry_tf32x3_mma(params, p: GemmProblem, device=None) -> Launch:
    return Launch(grid2(p.N, p.M, params["BN"], params["BM"]), (tf32x3_mma_threads(params), 1, 1),
                  tf32x3_mma_smem(params))


def tf32x3_mma_space(max_smem: int) -> Space:
    """Rung 12's knobs: block and warp tiles, ring depth. A warp holds two sets of sums (running and
    this slice's): 8 registers a 16x8 tile, plus the split fragments."""
    def regs(c):
        mi, ni = c["WM"] // 16, c["WN"] // 8
        return 8 * mi * ni + 8 * mi + 4 * ni + 40

    bk = TF32X3_MMA_BK
    rules = [("warp tiles divide the block", lambda c: c["BM"] % c["WM"] == 0 and c["BN"] % c["WN"] == 0),
             ("64..512 threads a block", lambda c: 64 <= tf32x3_mma_threads(c) <= 512),
             ("16-byte chunks divide among the threads",
              lambda c: (c["BM"] * bk // 4) % tf32x3_mma_threads(c) == 0 and (bk * c["BN"] // 4) % tf32x3_mma_threads(c) == 0),
             ("a thread's sums and fragments within 255 registers", lambda c: regs(c) <= 255),
             ("shared memory within the opt-in limit", lambda c: tf32x3_mma_smem(c) <= max_smem)]
    return Space({"BM": (64, 128, 256), "BN": (64, 128, 256), "WM": (32, 64), "WN": (32, 64), "STAGES": (2, 3, 4),
                  "ONCE": (0, 1)}, rules)


# --- the family: its rungs, one per kernel file -------------------------------------------------

# Tile shapes of the warp-tiled rungs, shared by the tunable entries.
_WARP = ("BM", "BN", "BK", "WM", "WN", "WMITER", "WNITER")
_WARP_TUNABLE = _WARP + ("STAGES", "MINB")
# sm_80's ptxas needs a few more than 128 registers for the cp.async rungs: capping at two
# blocks per SM (MINB=2) spills there, so one block per SM is the spill-free default.
_SM80_NO_SPILL = frozen({"sm_80": frozen({"MINB": 1}), "sm_86": frozen({"MINB": 1}), "sm_89": frozen({"MINB": 1})})


FAMILY = Family(
    name="gemm",
    title="fp32 GEMM on CUDA cores: C = alpha*A@B + beta*C, row-major",
    ops=sys.modules[__name__],
    reference="cuBLAS SGEMM (TF32 off)",
    default_sizes=("1024", "2048", "4096"),
    rungs=(
        Rung("gemm", 1, "naive", "gemm/01_naive.cu", "gemm_naive", ("BLOCK",), frozen({"BLOCK": 16}),
             "one thread per output; a warp's A loads are K*4 bytes apart: uncoalesced, no reuse",
             geometry_naive, traffic=per_output_bytes),
        Rung("gemm", 2, "coalesced", "gemm/02_coalesced.cu", "gemm_coalesced", ("BX", "BY"),
             frozen({"BX": 32, "BY": 8}),
             "threadIdx.x walks columns: B and C accesses coalesce, A is a broadcast",
             geometry_coalesced, traffic=per_output_bytes),
        Rung("gemm", 3, "smem_tiling", "gemm/03_smem_tiling.cu", "gemm_smem_tiling", ("TILE",),
             frozen({"TILE": 32}),
             "tiles of A and B staged in shared memory: global traffic / TILE, now bound by shared loads",
             geometry_square_tile, sass_expect=("LDS", "BAR"), traffic=square_tile_bytes),
        Rung("gemm", 4, "1d_blocktiling", "gemm/04_1d_blocktiling.cu", "gemm_1d_blocktiling",
             ("BM", "BN", "BK", "TM"), frozen({"BM": 64, "BN": 64, "BK": 8, "TM": 8}),
             "TM outputs per thread: one B value in a register feeds TM FMAs",
             geometry_1d),
        Rung("gemm", 5, "2d_blocktiling", "gemm/05_2d_blocktiling.cu", "gemm_2d_blocktiling",
             ("BM", "BN", "BK", "TM", "TN"), frozen({"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}),
             "TMxTN register tile per thread (outer product): 1/4 shared load per FMA at 8x8",
             geometry_2d),
        Rung("gemm", 6, "vectorized", "gemm/06_vectorized.cu", "gemm_vectorized",
             ("BM", "BN", "BK", "TM", "TN"), frozen({"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}),
             "float4 global/shared accesses, A transposed in shared memory: 4x fewer memory instructions",
             geometry_2d, vec_variant=True, sass_expect=("LDG.128", "LDS.128", "STG.128")),
        Rung("gemm", 7, "bank_conflict_free", "gemm/07_bank_conflict_free.cu", "gemm_bank_conflict_free",
             ("BM", "BN", "BK", "TM", "TN"), frozen({"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8}),
             "padded A tile and float4-strided thread fragments: no shared-memory bank conflicts",
             geometry_2d, vec_variant=True, sass_expect=("LDG.128", "LDS.128", "STG.128")),
        Rung("gemm", 8, "warptiling", "gemm/08_warptiling.cu", "gemm_warptiling", _WARP + ("MINB", "KAHAN"),
             frozen({"BM": 128, "BN": 128, "BK": 8, "WM": 32, "WN": 64, "WMITER": 2, "WNITER": 2, "MINB": 2,
                      "KAHAN": 0}),
             "block -> warp -> thread tiles: compact per-warp fragments, whole-line C stores",
             geometry_warptile, vec_variant=True, tunable=_WARP + ("MINB",), features=gemm_features,
             space=functools.partial(gemm_warptile, stages=False, group_m=False),
             sass_expect=("LDG.128", "LDS.128", "STG.128"), aliases=("warptile",)),
        Rung("gemm", 9, "multistage", "gemm/09_multistage.cu", "gemm_multistage", _WARP_TUNABLE,
             frozen({"BM": 128, "BN": 128, "BK": 8, "WM": 32, "WN": 64, "WMITER": 2, "WNITER": 2,
                      "STAGES": 3, "MINB": 2}),
             "cp.async ring of STAGES shared buffers: loads of the next slices overlap this slice's FMAs",
             geometry_multistage, vec_variant=True, tunable=_WARP_TUNABLE, min_cc=(8, 0), features=gemm_features,
             space=functools.partial(gemm_warptile, stages=True, group_m=False),
             arch_defaults=_SM80_NO_SPILL, sass_expect=("LDGSTS.32", "LDGSTS.128", "LDS.128")),
        Rung("gemm", 10, "tuned", "gemm/10_tuned.cu", "gemm_tuned", _WARP_TUNABLE + ("GROUP_M", "INTERIOR"),
             # 128x256 blocks, 8x16 outputs per thread, four stages, one block per SM: the optimum of
             # the H200 brute-force tables at 2048^3 and 4096^3; spill-free on sm_80 and sm_90.
             frozen({"BM": 128, "BN": 256, "BK": 16, "WM": 32, "WN": 128, "WMITER": 2, "WNITER": 4,
                      "STAGES": 4, "MINB": 1, "GROUP_M": 8, "INTERIOR": 1}),
             "rung 9 + grouped tile order for L2 reuse, interior slices copied without bounds checks, parameters "
             "from the tuner's store or per-arch defaults",
             geometry_tuned, vec_variant=True, tunable=_WARP_TUNABLE + ("GROUP_M",), min_cc=(8, 0),
             features=gemm_features, space=gemm_warptile,
             from_store=True, size_defaults=tuned_defaults, sass_expect=("LDGSTS.32", "LDGSTS.128", "LDS.128")),
        _tf32x3_rung(),
        Rung("gemm", 12, "tf32x3_mma", "gemm/12_tf32x3_mma.cu", "gemm_tf32x3_mma",
             ("BM", "BN", "WM", "WN", "STAGES", "ONCE"),
             # ONCE 1: 25.1 / 25.6 TFLOP/s at 4096^3 / 8192^3 against 18.2 / 18.6 (run d37bb3, one process)
             frozen({"BM": 128, "BN": 128, "WM": 64, "WN": 32, "STAGES": 3, "ONCE": 1}),
             "rung 11's 3xTF32 without Hopper: each fp32 slice split once in shared memory as it lands, "
             "mma.sync from registers, sm_80 and later, no pre-pass",
             geometry_tf32x3_mma, vec_variant=True, min_cc=(8, 0), space=tf32x3_mma_space,
             sass_expect=("HMMA", "LDGSTS.128"), aliases=("tf32x3_sm80",)),
        _f16x3_rung(),
        Rung("gemm", 14, "split_k", "gemm/14_split_k.cu", "gemm_split_k",
             ("BM", "BN", "BK", "TM", "TN", "TA", "TB", "AV", "BV", "TC", "WINDOW"),
             # (SPLITS: blocks a cluster, chosen at launch - not a template argument)
             frozen({"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4, "TA": 0, "TB": 0, "AV": 16, "BV": 16, "TC": 0,
                     "WINDOW": 2, "SPLITS": 2}),
             "K split over a cluster's blocks, summed through distributed shared memory; each thread's sums "
             "windowed and compensated: SGEMM's shapes models run, at less than SGEMM's error",
             geometry_split_k, min_cc=(8, 0), size_defaults=split_defaults, builds_on=8,
             tunable=("BM", "BN", "BK", "TM", "TN", "WINDOW", "SPLITS"), sass_expect=("FFMA", "LDS.128"),
             space=split_space),
    ),
    check_size="127x129x65",
)
