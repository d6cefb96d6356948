"""Tensor-core GEMM with fp16 or bf16 inputs (or fp32 inputs multiplied as TF32) and fp32
accumulation: C (MxN) = A (MxK) @ B (KxN), C row-major and contiguous. C is fp32, or (rung 6,
mixed precision) fp16 or bf16, rounded to nearest from the fp32 sums: '4096:bf16:bf16'. A and B
are row-major, or (rung 6, 16-bit inputs) transposed views of row-major matrices: '4096:bf16:tn'
multiplies A^T B with A stored K x M, as autograd's backward asks for."""

from __future__ import annotations

import ctypes
import functools
import sys
from dataclasses import dataclass

import numpy as np

from ..family import Family, Rung, frozen
from ..launch import Launch, LaunchError, function_handle, grid2
from ..space import Space
from ..verify import dot_tolerance
from .base import MAX_DIM, Reference, bf16_bits_to_float32, parse_int, sm_count, to_bf16_bits
from .split import DT, MAX_GRID_YZ, OUT, SplitLayout, row_alignment, split_layout  # noqa: F401 (re-exported)
from .tma import TMA_SWIZZLE_64B, TMA_SWIZZLE_128B, TmaBox, encode_tensor_map

DTYPE = "float16"  # the default input type; a size suffix picks another ("4096:bf16", "4096:tf32")
DTYPES = {"fp16": "float16", "bf16": "bfloat16", "tf32": "float32"}
SHORT = {v: k for k, v in DTYPES.items()}
ELEMENT_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}
# What a rung can do beyond fp16/bf16 in, fp32 out, row-major operands (Rung.capabilities):
TF32 = "tf32"  # fp32 inputs through wgmma's tf32 form (B transposed to K-major first)
OUT16 = "out16"  # C written in fp16 / bf16 (rounded in the epilogue)
TRANSPOSED = "transposed"  # A^T / B^T views read in place (TMA boxes, wgmma's transpose modes)
TMA = "tma"  # A and B (and C) through tensor maps rather than pointers: the Hopper rungs
CLUSTER = "cluster"  # maps as kernel parameters, launched through the driver (ClusterKernel): rung 6
SPLIT = "split"  # any row alignment, K split over a cluster chosen per launch (SplitKernel): rung 7
_CUDA_DATA_TYPE = {"float16": 2, "bfloat16": 14, "float32": 0}  # CUDA_R_16F, CUDA_R_16BF, CUDA_R_32F
OUTS = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}  # C's type, a second size suffix
OUT_SHORT = {v: k for k, v in OUTS.items()}
LAYOUTS = ("nn", "nt", "tn", "tt")  # A and B each row-major (n) or a transposed view (t), BLAS-style
_CUBLAS_COMPUTE_32F, _CUBLAS_COMPUTE_32F_FAST_TF32, _CUBLAS_GEMM_DEFAULT = 68, 77, -1


@dataclass(frozen=True)
class TcProblem:
    M: int
    N: int
    K: int
    dtype: str = "float16"
    batch: int = 1  # batched strided GEMM: `batch` independent products, matrices back to back
    out: str = "float32"  # C's type: fp32, or fp16 / bf16 rounded from the fp32 sums
    layout: str = "nn"  # A's and B's layouts: 'n' row-major, 't' the transposed view of a row-major matrix

    def __post_init__(self):
        for name in ("M", "N", "K", "batch"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"GEMM size {name} must be >= 1, got {getattr(self, name)}")
            if int(getattr(self, name)) > MAX_DIM:
                raise ValueError(f"GEMM size {name} = {getattr(self, name)} exceeds 2^31 - 1 (the kernels' 32-bit "
                                 "sizes)")
        if self.dtype not in DT:
            raise ValueError(f"tensor-core GEMM inputs are float16, bfloat16 or float32 (as TF32), not {self.dtype}")
        if self.out not in OUT:
            raise ValueError(f"tensor-core GEMM output is float32, float16 or bfloat16, not {self.out}")
        if self.out not in ("float32", self.dtype):
            raise ValueError(f"C is float32 or the inputs' own type ({self.dtype} here), not {self.out}: the mixed "
                             "precision cuBLAS offers too (and TF32 products are written in fp32)")
        if self.layout not in LAYOUTS:
            raise ValueError(f"tensor-core GEMM layout is one of {', '.join(LAYOUTS)} (A then B: n row-major, t a "
                             f"transposed view), not {self.layout!r}")
        if self.layout != "nn" and self.dtype == "float32":
            raise ValueError("TF32 products take row-major A and B (wgmma's tf32 form has no transposes)")
        if self.batch > 65535:
            raise ValueError(f"batch {self.batch} exceeds the grid's z limit (65535); split it into several calls")

    @property
    def short(self) -> str:
        return SHORT[self.dtype]

    @property
    def ta(self) -> bool:
        return self.layout[0] == "t"

    @property
    def tb(self) -> bool:
        return self.layout[1] == "t"

    @property
    def label(self) -> str:
        batch = f"{self.batch}x" if self.batch > 1 else ""
        out = f":{OUT_SHORT[self.out]}" if self.out != "float32" else ""
        layout = f":{self.layout}" if self.layout != "nn" else ""
        return f"{batch}{self.M}x{self.N}x{self.K}:{self.short}{out}{layout}"

    @property
    def flops(self) -> int:
        return 2 * self.M * self.N * self.K * self.batch

    @property
    def bytes(self) -> int:
        return (ELEMENT_BYTES[self.dtype] * (self.M * self.K + self.K * self.N)
                + ELEMENT_BYTES[self.out] * self.M * self.N) * self.batch


def parse_size(text: str, **_) -> TcProblem:
    """'4096' (a cube, fp16), 'MxNxK', or 'BATCHxMxNxK' (batched strided), with ':fp16', ':bf16' or
    ':tf32' (fp32 inputs on the tensor cores), then optionally C's type, ':fp32' (the default),
    ':fp16' or ':bf16' ('4096:bf16:bf16': bf16 in, fp32 sums, bf16 out)."""
    size, *suffixes = str(text).lower().split(":")
    layout = suffixes.pop() if suffixes and suffixes[-1] in LAYOUTS else "nn"  # (a last ':tn' names the layout)
    if len(suffixes) > 2:
        raise ValueError(f"tensor-core GEMM {text!r}: at most an input type, an output type and a layout follow "
                         "the size")
    kind, out = (suffixes + ["", ""])[:2]
    if kind and kind not in DTYPES:
        raise ValueError(f"tensor-core GEMM {text!r}: the input type is fp16, bf16 or tf32, not {kind!r}")
    if out and out not in OUTS:
        raise ValueError(f"tensor-core GEMM {text!r}: the output type is fp32, fp16 or bf16 (or a layout: "
                         f"{', '.join(LAYOUTS)}), not {out!r}")
    dtype = DTYPES[kind or "fp16"]
    kw = {"out": OUTS[out]} if out else {}
    kw["layout"] = layout
    parts = size.replace("*", "x").split("x")
    if len(parts) == 1:
        n = parse_int(parts[0], "GEMM size")
        return TcProblem(n, n, n, dtype, **kw)
    if len(parts) == 4:
        b, m, n, k = (parse_int(q, f"GEMM size {text!r}") for q in parts)
        return TcProblem(m, n, k, dtype, b, **kw)
    if len(parts) != 3:
        raise ValueError(f"GEMM size {text!r}: use N (a cube), MxNxK or BATCHxMxNxK, optionally with :fp16, :bf16 "
                         "or :tf32")
    m, n, k = (parse_int(q, f"GEMM size {text!r}") for q in parts)
    return TcProblem(m, n, k, dtype, **kw)


TF32_INPUT_ERROR = 2.0 ** -9  # TF32 keeps 10 of fp32's 23 mantissa bits; the tensor cores truncate
OUTPUT_ROUNDING = {"float32": 0.0, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}  # half an ulp: 10 / 7 mantissa bits


def tolerance(p: TcProblem, ws=None) -> float:
    """fp16/bf16: the inputs' products are exact in fp32, so only the accumulation rounds. Tensor-core
    adders align and truncate rather than round each step, so the bound is 4x the fp32 FFMA-chain
    bound (the reference is the float64 product of the same half-precision inputs).
    TF32: the reference is the float64 product of the fp32 inputs, and each input loses its last 13
    mantissa bits (up to 2^-10 relative each, 2^-9 for a product): 2^-9 normwise on top of the
    accumulation bound. cuBLAS's TF32 mode lands in the same band (tests/test_gpu.py).
    A 16-bit C adds its own rounding of each sum, at most half an ulp: 2^-11 (fp16), 2^-8 (bf16)."""
    acc = 4 * dot_tolerance("float32", p.K) + OUTPUT_ROUNDING[p.out]
    return acc + TF32_INPUT_ERROR if p.dtype == "float32" else acc


def unsupported(rung, p: TcProblem) -> str | None:
    """Why `rung` cannot run `p`, or None: TF32, a 16-bit C and transposed views each need a rung
    with that capability."""
    if p.dtype == "float32" and not rung.can(TF32):
        return (f"TF32 inputs run on rungs {_named(TF32)} only (wgmma's tf32 form; B transposed to "
                "K-major first)")
    if p.out != "float32" and not rung.can(OUT16):
        return f"a {p.out} C is written by rung {_named(OUT16)} only (rounded in its epilogue); the other rungs write fp32"
    if p.layout != "nn" and not rung.can(TRANSPOSED):
        return (f"transposed operands ({p.layout}) are read by rung {_named(TRANSPOSED)} only (TMA boxes and "
                "wgmma's transpose modes); simtlab.gemm_tc copies them for the other rungs")
    return None


def _named(capability: str) -> str:
    return " and ".join(r.name for r in FAMILY.rungs if r.can(capability))


def dtype_params(p: TcProblem, device=None, vec=None) -> dict:
    """The problem picks the element-type template argument."""
    return {"DT": DT[p.dtype]}


# Rung 6 keeps 5 of a tile's 8 epilogue pieces in registers (KEEP 5, setmaxnreg 24/240) when the
# main loop is long enough to hand them all over behind the multiplies - 64 slices or more -
# and 4 otherwise. Same process (runs f49d9a, 0cbb61_compare): KEEP 5 +0.1 to +1.6 points at
# K = 4096-8192, but -1.0 to -1.8 at 2048^3 (32 slices) and batched 64x512^3 (8 slices).
# A 16-bit C leaves in 64x64 pieces (WIDE 1) from the same depth: in one process (run
# 2026-12-04_h200_05ff6e_tf32x3) +0.2 / +0.5 / +1.6 points at 4096^3 bf16 / fp16 and 8192^3 bf16,
# a tie at 8192x1024x8192 and batched 64x512^3, but -2.3 at 2048^3, where 64x32 pieces stay.
KEEP_DEEP_SLICES = 64


def cluster_params(p: TcProblem, device=None, vec=None) -> dict:
    """Rung 6: the element type, how many epilogue pieces wait in registers for the next tile (5
    where K is deep, and for batches of small products: batched 64x512^3 bf16 98.7% of cuBLAS with
    5 against 97.0% with 4, one process, run 2fac95_api/shapes_batched), the
    operands' layouts (row-major for shapes that run on padded row-major copies), and whether
    blocks pair up in clusters: not when every 128x256 tile has an SM of its own (one round), where
    sharing B saves L2 traffic the round does not wait for and pairing costs each block its
    partner's pace - 2048^3 bf16: 99.2% of cuBLAS unpaired, 94.4% in pairs (benchmarks/results/
    2026-12-03_h200_e95975_api/sweep_2048.json)."""
    slices = -(-p.K // slice_k(p.dtype))
    direct = tma_ready(p)
    deep = slices >= KEEP_DEEP_SLICES
    params = {"DT": DT[p.dtype], "KEEP": 5 if deep or p.batch > 1 else 4, "OUT": OUT[p.out], "WIDE": int(deep),
              "TA": int(p.ta and direct), "TB": int(p.tb and direct)}
    tiles = -(-p.M // 128) * -(-p.N // 256) * p.batch  # (the default tile)
    if tiles <= sm_count(device):
        params["CM"] = 1
    return params


# --- rung 7: split-K and small tiles -------------------------------------------------------------

def split_threads(params) -> int:
    return (params["BM"] // params["WM"]) * (params["BN"] // params["WN"]) * params["WK"] * 32


def split_smem(params) -> int:
    """The ring of STAGES (A, B) slices of 16-bit elements, or the WK parked fp32 partial tiles
    (rows of BN + 4 floats) that take its place after the main loop, whichever is larger."""
    ring = params["STAGES"] * (params["BM"] + params["BN"]) * params["BK"] * 2
    return max(ring, params["WK"] * params["BM"] * (params["BN"] + 4) * 4)


def geometry_split_k(params, p: TcProblem, device=None) -> Launch:
    """Tiles of the kernel's (possibly swapped) C in x and y, the batch times the cluster's SPLITS
    blocks in z (clusters of (1, 1, SPLITS): a cluster's blocks share one tile's K)."""
    m, n = (p.N, p.M) if params["TC"] else (p.M, p.N)
    gx, gy = -(-n // params["BN"]), -(-m // params["BM"])
    gz = p.batch * params["SPLITS"]
    if params["SPLITS"] > 1 and device is not None and tuple(device.compute_capability) < (9, 0):
        raise ValueError(f"rung 7 with SPLITS {params['SPLITS']} splits K over a cluster: clusters need "
                         f"compute capability 9.0, this GPU is {device.arch} (SPLITS 1)")
    if gy > MAX_GRID_YZ or gz > MAX_GRID_YZ:
        raise ValueError(f"rung 7 with {params}: {gy} tile rows and {gz} blocks along z exceed the grid's 65535 "
                         "(larger BM, fewer SPLITS, or rung 6)")
    return Launch((gx, gy, gz), (split_threads(params), 1, 1), split_smem(params))


def split_params(p: TcProblem, device=None, vec=None) -> dict:
    """Rung 7 as the dispatcher runs it for this problem (ops.gemm_dispatch: the tile, the split,
    the swap), with the layouts and row alignments the problem fixes."""
    from .gemm_dispatch import split_config

    return split_config(p, device)


def split_space(max_smem: int) -> Space:
    """Rung 7's tile, warp split and ring (the problem fixes types, layouts and alignments)."""
    defaults = dict(FAMILY.rung("split_k").defaults)
    rules = [("warps tile the block", lambda c: c["BM"] % c["WM"] == 0 and c["BN"] % c["WN"] == 0),
             ("at most 1024 threads", lambda c: split_threads({**defaults, **c}) <= 1024),
             ("WK divides a slice's k16 steps", lambda c: (c["BK"] // 16) % c["WK"] == 0),
             ("shared memory within the limit", lambda c: split_smem({**defaults, **c}) <= max_smem)]
    return Space({"BM": (32, 64, 128), "BN": (8, 16, 32, 64, 128), "WM": (16, 32, 64), "WN": (8, 16, 32, 64),
                  "WK": (1, 2, 4), "BK": (32, 64), "STAGES": (3, 4, 6, 8), "SPLITS": (1, 2, 4, 8)}, rules)


# --- launch geometry -------------------------------------------------------------------------

def _grid(p: TcProblem, bn: int, bm: int) -> tuple[int, int, int]:
    """Output tiles in x and y, the batch in z."""
    gx, gy, _ = grid2(p.N, p.M, bn, bm)
    return gx, gy, p.batch


def geometry_wmma(params, p: TcProblem, device=None) -> Launch:
    wm, wn = params["WARPS_M"], params["WARPS_N"]
    return Launch(_grid(p, 16 * wn, 16 * wm), (32 * wm * wn, 1, 1))


def geometry_wmma_smem(params, p: TcProblem, device=None) -> Launch:
    return Launch(_grid(p, params["BN"], params["BM"]), (32 * params["WARPS_M"] * params["WARPS_N"], 1, 1))


MMA_BK = 32  # fixed in 03_mma_multistage.cu: four 16-byte chunks per A row


def mma_smem(params) -> int:
    return params["STAGES"] * (params["BM"] + params["BN"]) * MMA_BK * 2


def geometry_mma(params, p: TcProblem, device=None) -> Launch:
    threads = (params["BM"] // params["WM"]) * (params["BN"] // params["WN"]) * 32
    return Launch(_grid(p, params["BN"], params["BM"]), (threads, 1, 1), mma_smem(params))


SWIZZLE_ROW = 128  # bytes of k in a K slice of rungs 4-5: one 128-byte swizzle row (64 16-bit or 32 fp32 values)


def slice_k(dtype: str) -> int:
    """k values in one K slice of the TMA rungs (BK): a 128-byte swizzle row of the input type."""
    return SWIZZLE_ROW // ELEMENT_BYTES[dtype]


def wgmma_smem(params, barriers_per_stage: int = 1) -> int:
    """The ring of STAGES (A, B) slices, its 8-byte mbarriers, and 1 KiB of slack for aligning the
    ring to the swizzle atom."""
    stage = (params["BM"] + params["BN"]) * SWIZZLE_ROW  # A's BM rows and B's BN columns, whatever the type
    return params["STAGES"] * (stage + 8 * barriers_per_stage) + 1024


def geometry_wgmma(params, p: TcProblem, device=None) -> Launch:
    return Launch(_grid(p, params["BN"], params["BM"]), (params["BM"] // 64 * 128, 1, 1), wgmma_smem(params))


def wgmma_tiles(params, p: TcProblem) -> int:
    """Output tiles over the whole batch: the blocks rung 4 launches, the work rung 5 walks."""
    gx, gy, gz = _grid(p, params["BN"], params["BM"])
    return gx * gy * gz


def geometry_wgmma_ws(params, p: TcProblem, device=None) -> Launch:
    """Persistent: one block per SM (fewer when there are fewer tiles); a producer warpgroup plus
    BM/64 consumers; a full and an empty barrier per stage."""
    blocks = min(sm_count(device), wgmma_tiles(params, p))
    return Launch((blocks, 1, 1), (params["BM"] // 64 * 128 + 128, 1, 1), wgmma_smem(params, 2))


CLUSTER_BUFS = 2  # rung 6's staging buffers per consumer warpgroup
EPI_PIECE_BYTES = 64 * 128  # rung 6's staging buffer: 64 rows of one 128-byte swizzle row (32 fp32 / 64 16-bit columns)


def cluster_consumers(params) -> int:
    """Rung 6's consumer warpgroups: one for 64-row tiles, else two (of 64 or 128 rows each)."""
    return 1 if params["BM"] == 64 else 2


def cluster_smem(params) -> int:
    """Rung 6: rung 5's ring and barriers, plus two staging buffers per consumer warpgroup (EPI 1-3)
    and, where a store warp hands them back (EPI 2, 3), an mbarrier for each."""
    buffers = (params["EPI"] > 0) * cluster_consumers(params) * CLUSTER_BUFS
    return wgmma_smem(params, 2) + buffers * (EPI_PIECE_BYTES + 8 * (params["EPI"] >= 2))


def cluster_space(max_smem: int) -> Space:
    """Rung 6's knobs that measured a difference (docs/design/gemm_tc.md): tile height and width,
    pipeline depth, cluster shape (along M, N or both), tile order, the epilogue pieces kept in
    registers and the slice bookkeeping (LEAN). The epilogue stays EPI 3; the element type, C's type
    and the layouts come from the problem (A^T with BM 64 takes no cluster along N: that point
    fails to compile, said by the kernel's static_assert)."""
    defaults = dict(FAMILY.rung("wgmma_cluster").defaults)
    rules = [
        ("shared memory within the opt-in limit (16-bit operands)", lambda c: cluster_smem({**defaults, **c}) <= max_smem),
        ("kept pieces fit beside the accumulators", lambda c: c["BN"] // 2 + 16 * c["KEEP"] <= 208),
    ]
    return Space({"BM": (64, 128), "BN": (128, 256), "STAGES": (3, 4, 5, 6), "CM": (1, 2), "CN": (1, 2),
                  "GROUP_M": (8, 16), "KEEP": (4, 5), "LEAN": (0, 1)}, rules)


def cluster_features(config) -> list[float]:
    """What the tuner's cost model sees of a rung 6 point: its parameters and what they make - the
    tile's area, the blocks a cluster, the ring's shared bytes and the slices in flight per tile row."""
    c = {**FAMILY.rung("wgmma_cluster").defaults, **config}
    return [float(config[k]) for k in sorted(config)] + [c["BM"] * c["BN"], c["CM"] * c["CN"], cluster_smem(c),
                                                         c["STAGES"] * c["BN"]]


def cluster_work(params, p: TcProblem) -> int:
    """Rung 6's units of work: cluster tiles (CM x CN tiles) over the batch."""
    tiles_m, tiles_n = -(-p.M // params["BM"]), -(-p.N // params["BN"])
    return -(-tiles_m // params["CM"]) * -(-tiles_n // params["CN"]) * p.batch


TAIL_MAX_PARTS = 64  # SK 1: at most this many chunks a tile of the last round
TAIL_MIN_SLICES = 4  # ... of at least this many slices each
TAIL_HANDOVER_SLICES = 2  # what a chunk's sums cost to write, and the last chunk to read each, in slices' time
TAIL_GAIN = 0.95  # chunks only where the last round then takes at most this share of a tile's time


def kernel_slices(params, p: TcProblem) -> int:
    """Rung 6's slices a tile (KT): BK-deep slices of K, three passes of them for 3xTF32 (SPLIT)."""
    kp = -(-p.K // slice_k(p.dtype))
    return 3 * kp if params.get("SPLIT", 0) else kp


def tail_split(params, p: TcProblem, clusters: int) -> tuple[int, int]:
    """SK 1: (tiles of the last, partial round, chunks each), or (0, 1) where they stay whole. The
    count of chunks is the one whose rounds of chunks end soonest, each chunk costing its slices
    and a hand-over of its sums (and the last one reading the others'), against a whole tile's
    time; taken where that is at most TAIL_GAIN of it."""
    if not params.get("SK", 0):
        return 0, 1
    rest, kt = cluster_work(params, p) % clusters, kernel_slices(params, p)
    if rest == 0:
        return 0, 1
    best, best_time = 1, float(kt)
    for parts in range(2, min(TAIL_MAX_PARTS, kt // TAIL_MIN_SLICES) + 1):
        rounds = -(-rest * parts // clusters)
        time = rounds * (kt / parts + TAIL_HANDOVER_SLICES) + (parts - 1) * TAIL_HANDOVER_SLICES / 2
        if time < best_time:
            best, best_time = parts, time
    return (rest, best) if best_time <= TAIL_GAIN * kt else (0, 1)


def tail_scratch(params, tail: tuple[int, int]) -> tuple[int, int]:
    """SK 1's scratch for a tail_split (rest, parts): bytes of partial sums (a 64-row warpgroup's
    fp32 sums for each block of each chunk but a tile's last, of each tile of the last round) and
    flag words (one each), the flags to be zero at each launch."""
    rest, parts = tail
    pieces = rest * (parts - 1) * params["CM"] * params["CN"] * cluster_consumers(params)
    return pieces * 64 * params["BN"] * 4, pieces


def geometry_wgmma_cluster(params, p: TcProblem, device=None) -> Launch:
    """Persistent, in clusters of CM x CN blocks: as many whole clusters as SMs hold (fewer when
    there is less work), each block a producer warpgroup plus one or two consumers."""
    from ..hw.occupancy import arch_limits

    smem = cluster_smem(params)
    limit = device.smem_per_block_optin if device is not None else arch_limits("sm_90").smem_per_block_optin
    if smem > limit:  # (said here, before any compile, with what to change)
        raise ValueError(f"rung 6 with {params}: {smem} bytes of shared memory exceed the {limit}-byte "
                         "limit of a block (fewer STAGES, or EPI 0)")
    if params.get("OUT", 0) and params["EPI"] == 0:
        raise ValueError(f"rung 6 with {params}: a 16-bit C (OUT {params['OUT']}) leaves through the staging "
                         "buffers, so it needs EPI 1-3")
    if params["BM"] not in (64, 128):
        raise ValueError(f"rung 6 with {params}: BM is 64 or 128 (one or two 64-row consumer warpgroups)")
    if params["CM"] not in (1, 2) or params["CN"] not in (1, 2):
        raise ValueError(f"rung 6 with {params}: CM and CN are 1 or 2 (clusters of 1, 2 or 2x2 blocks)")
    cs = params["CM"] * params["CN"]
    # (clusters of 4 may not all fit at once where a GPC's SM count is not a multiple of 4: the
    # runner lowers this to what the driver says can be resident, see resident_clusters)
    clusters = min(sm_count(device) // cs, cluster_work(params, p))
    return Launch((clusters * cs, 1, 1), (cluster_consumers(params) * 128 + 128, 1, 1), smem)


def ws_work(params, p: TcProblem, sms: int) -> tuple[int, int]:
    """Rung 5's persistent grid for wave quantization (analyze/waves): tiles over a block an SM."""
    return wgmma_tiles(params, p), sms


def cluster_work_units(params, p: TcProblem, sms: int) -> tuple[int, int]:
    """Rung 6's: cluster tiles over the clusters that fit."""
    return cluster_work(params, p), sms // (params["CM"] * params["CN"])


def requested_bytes(params, p: TcProblem, tile: tuple[int, int] | None = None) -> int:
    """Global bytes the threads ask for: a block tile (BM x BN, or a warp's `tile` in rung 1) reads
    its A row panel and B column panel once."""
    bm, bn = tile or (params["BM"], params["BN"])
    tiles_m, tiles_n = -(-p.M // bm), -(-p.N // bn)
    return (2 * p.K * tiles_m * tiles_n * (bm + bn) + 4 * p.M * p.N) * p.batch


# --- the tensor maps of the TMA rungs ------------------------------------------------------------

def tma_ready(p: TcProblem) -> bool:
    """Whether the TMA rungs read the operands where they lie: each operand's contiguous extent
    (A: K, or M for A^T; B: N, or K for B^T) and C's row (N) a whole number of 16-byte units (8
    elements: tensor-map strides are multiples of 16 bytes, and the kernels write column pairs).
    Other shapes run on zero-padded row-major copies."""
    return (p.M if p.ta else p.K) % 8 == 0 and (p.K if p.tb else p.N) % 8 == 0 and p.N % 8 == 0


def tma_boxes(params, p: TcProblem) -> tuple[TmaBox, TmaBox]:
    """A (M x K, K contiguous) in BK x BM boxes, BK = one 128-byte row of k (BK x BM/CN rows when
    CN blocks of a cluster share them); A^T (K x M stored, M contiguous) in 64 x BK boxes, BM/64
    a slice. 16-bit B (K x N, N contiguous) in 64 x BK boxes (BN/64 of them per slice); B^T (N x K
    stored, K contiguous: a transposed view, or the copy TF32 makes) in BK x BN boxes (BK x BN/CM
    when a cluster of CM blocks shares them). See tma_ready for the shapes they take."""
    es, bk = ELEMENT_BYTES[p.dtype], slice_k(p.dtype)
    a_row, b_row = (p.M if p.ta else p.K), (p.K if p.tb or p.dtype == "float32" else p.N)  # contiguous extents
    if (es * a_row) % 16 or (es * b_row) % 16:
        raise ValueError(f"tensor maps need each operand's contiguous extent in whole 16-byte units (multiples of 8 "
                         f"16-bit or 4 fp32 elements), got M={p.M}, N={p.N}, K={p.K} ({p.dtype}, {p.layout})")
    if p.ta:
        a = TmaBox((p.M, p.K, p.batch), (es * p.M, es * p.M * p.K), (64, bk, 1))
    else:
        a = TmaBox((p.K, p.M, p.batch), (es * p.K, es * p.K * p.M), (bk, params["BM"] // params.get("CN", 1), 1))
    if p.dtype == "float32" or p.tb:
        b = TmaBox((p.K, p.N, p.batch), (es * p.K, es * p.K * p.N), (bk, params["BN"] // params.get("CM", 1), 1))
    else:
        b = TmaBox((p.N, p.K, p.batch), (es * p.N, es * p.N * p.K), (64, bk, 1))
    return a, b


def store_box(p: TcProblem, wide: int = 1) -> TmaBox:
    """Rung 6's TMA stores (EPI 1-3): C (M x N, N contiguous) in boxes of one 128-byte swizzle row
    (32 fp32 or 64 fp16 / bf16 columns; WIDE 0: 32 16-bit columns, 64 bytes) by a warpgroup's 64
    rows: the kernel's staging pieces."""
    es = ELEMENT_BYTES[p.out]
    return TmaBox((p.N, p.M, p.batch), (es * p.N, es * p.N * p.M), (128 // es if wide else 32, 64, 1))


def make_runner(inst, problem: TcProblem, ws: Workspace, device, vec, prepare):
    """The TMA rungs take tensor maps instead of A and B. Shapes the maps cannot take as they lie
    (tma_ready) run on zero-padded row-major copies of A and B (the copies are part of the timed
    call): correct for any shape, fast for the aligned ones. TF32 also transposes B to B^T (N x K)
    with simtlab's own transpose, inside the timed call. Rung 6 launches as simtlab.gemm_tc does
    (ClusterKernel: maps as kernel parameters, one driver call on CuPy's current stream); rungs
    4-5 read their maps from device memory. Other rungs: one launch."""
    if inst.rung.can(SPLIT):  # rung 7: launched as simtlab.gemm_tc launches it, on CuPy's current stream
        import cupy

        from .split import SplitKernel

        kernel, pa, pb, pc = SplitKernel(inst, problem, device, prepare), ws.A.data.ptr, ws.B.data.ptr, ws.C.data.ptr
        current_stream = cupy.cuda.get_current_stream
        return lambda: kernel.launch(pa, pb, pc, current_stream().ptr)
    if not inst.rung.can(TMA):
        return None
    import cupy

    from .tma import PaddedOperands

    p = problem
    pad = None if tma_ready(p) else PaddedOperands(ws.A, ws.B, ws.C, 8)
    A, B, C = (ws.A, ws.B, ws.C) if pad is None else (pad.A, pad.B, pad.C)
    kp, np_ = (p.K, p.N) if pad is None else (pad.kp, pad.np)
    padded = TcProblem(p.M, np_, kp, p.dtype, p.batch, p.out, p.layout if pad is None else "nn")
    transpose_b = None
    if p.dtype == "float32":  # wgmma's tf32 form reads B K-major: B^T, N x K
        from .transpose import batched_transposer

        Bt = cupy.empty(B.shape[:-2] + (np_, kp), dtype=cupy.float32)
        transpose_b = batched_transposer(B, Bt)
        B = Bt
    if inst.rung.can(CLUSTER):
        kernel = ClusterKernel(inst, padded, device, prepare).launch
        pa, pb, pc = A.data.ptr, B.data.ptr, C.data.ptr
        current_stream = cupy.cuda.get_current_stream

        def launch():
            kernel(pa, pb, pc, current_stream().ptr)
    else:
        geometry = inst.geometry(padded, device)
        func = prepare(inst, geometry, vec, device)
        box_a, box_b = tma_boxes(inst.params, padded)
        maps = cupy.asarray(np.concatenate([encode_tensor_map(box_a, A.data.ptr, p.dtype),
                                            encode_tensor_map(box_b, B.data.ptr, p.dtype)]))
        sizes = (np.int32(p.M), np.int32(np_), np.int32(kp))
        if inst.rung.name != "wgmma_tma":  # the persistent kernel walks the batch's tiles itself
            sizes += (np.int32(p.batch),)
        args = sizes + (maps[:16], maps[16:], C)

        def launch():
            func(geometry.grid, geometry.block, args, shared_mem=geometry.shared)

    def run():
        if pad is not None:
            pad.copy_in(ws.A, ws.B)
        if transpose_b:
            transpose_b()
        launch()
        if pad is not None:
            pad.copy_out(ws.C)

    return run


class ClusterKernel:
    """Rung 6 on one problem's shapes, launched through the driver: the geometry, the compiled
    function and its packed parameters are made once; `launch(pa, pb, pc, stream)` encodes (or
    finds) the tensor maps of the three addresses and is one cuLaunchKernel on the given stream.
    What simtlab.gemm_tc and the ladder both run. The kernel's last five parameters (the second
    pair of operand maps, alpha, beta and the split's exponents) are read only by its 3xTF32 build
    (SPLIT 1: the fp32 ladder's rung 11, launched through `launch_split`); the others get a zero
    map, 1, 0 and a null pointer once. A build that cuts the last round's tiles into chunks of K
    (SK 1, rung 11's) also takes the scratch of `sk_scratch` (partial sums, flags zeroed before
    each launch), which `launch_split` is given, and the chunk count (tail_split)."""

    masks = (15, 15, 15)  # address bits of A, B and C that must be zero: tensor maps start on 16-byte boundaries

    def __init__(self, inst, p: TcProblem, device, prepare):
        from ..driver import F32, I32, MAP, PTR, PackedLaunch
        from .tma import tensor_map_encoder

        self.params = params = inst.params  # (what it was built with: the store's row, or the shipped ones)
        if params.get("OUT", 0) != OUT[p.out]:
            raise LaunchError(f"rung 6 built with OUT {params.get('OUT', 0)} cannot write a {p.out} C (OUT {OUT[p.out]})")
        if (params.get("TA", 0), params.get("TB", 0)) != (int(p.ta), int(p.tb)):
            raise LaunchError(f"rung 6 built for layout TA {params.get('TA', 0)} TB {params.get('TB', 0)} cannot read "
                              f"{p.layout} operands")
        launch = inst.geometry(p, device)
        func = prepare(inst, launch, None, device)
        self.geometry = launch = resident_clusters(func, launch, params["CM"] * params["CN"])
        if params.get("SK", 0) and not params.get("SPLIT", 0):
            raise LaunchError("rung 6's split of the last round (SK 1) is built for rung 11 (SPLIT), whose call "
                              "provides its scratch")
        clusters = launch.grid[0] // (params["CM"] * params["CN"])
        self.tail = tail_split(params, p, clusters)
        self.sk_scratch = tail_scratch(params, self.tail)
        box_a, box_b = tma_boxes(params, p)
        wide = params.get("WIDE", 1) or p.out == "float32"
        self._unused_map = (ctypes.c_uint8 * 128)()
        unused = _UnusedMap(ctypes.addressof(self._unused_map))
        self.maps = (tensor_map_encoder(box_a, p.dtype), tensor_map_encoder(box_b, p.dtype),
                     tensor_map_encoder(store_box(p, wide), p.out, TMA_SWIZZLE_128B if wide else TMA_SWIZZLE_64B)
                     if params["EPI"] else unused)  # (EPI 0 stores from registers: C may have any row length)
        index = device.index if device is not None else 0
        self.packed = packed = PackedLaunch(function_handle(func), launch.grid, launch.block, launch.shared,
                                            (I32, I32, I32, I32, MAP, MAP, MAP, PTR, MAP, MAP, F32, F32, PTR, PTR, PTR, I32),
                                            index)
        for i, v in enumerate((p.M, p.N, p.K, p.batch)):
            packed.values[i].value = v
        packed.params[8] = packed.params[9] = unused.address(0)
        packed.values[10].value, packed.values[11].value = 1.0, 0.0
        packed.values[15].value = self.tail[1]  # (SK 1: the last round's tiles in this many chunks)
        self.slots = None  # the maps launch() re-points (driver.MapSlot), once learned
        self.launch = self._launcher()

    def aligned(self, pa: int, pb: int, pc: int) -> bool:
        return not (pa | pb | pc) & 15

    def bind(self, pa: int, pb: int, pc: int):
        """A launch of these three addresses with its own parameter block and maps, all set now:
        each call then only sets the stream (`packed.launch(stream)`)."""
        packed = self.packed.clone()
        packed.kept = []  # the maps' storage, alive as long as the launch points at it
        for i, (encoder, ptr) in enumerate(zip(self.maps, (pa, pb, pc)), start=4):
            packed.params[i], storage = encoder.keep(ptr)
            packed.kept.append(storage)
        packed.values[7].value = pc
        return packed

    def _launcher(self):
        """launch(pa, pb, pc, stream): every call's path, with everything it touches bound to locals.
        The parameters point at three map slots (driver.MapSlot) that one 64-bit write each re-
        points at a call's buffers, so new addresses cost no encoding; until the first call has
        learned the slots from the driver, and for any address a slot cannot place, the maps are
        encoded (or found) per address instead."""
        (ma, mb, mc), packed = self.maps, self.packed
        params, c_value, stream_value, bound, failed = (packed.params, packed.values[7], packed.stream_value,
                                                        packed.bound, packed.failed)
        kept_a, kept_b, kept_c = ma.addresses, mb.addresses, mc.addresses
        outside = -1  # address bits that send a call to the encoding path (all of them until learned)
        wa = wb = wc = ba = bb = bc = sa = sb = sc = slots = None

        def by_encoding(pa: int, pb: int, pc: int, stream: int) -> None:
            nonlocal outside, wa, wb, wc, ba, bb, bc, sa, sb, sc, slots
            if slots is None and not (pa | pb | pc) & 15:  # (learned once, from the first aligned call)
                made = [m.slot(ptr) for m, ptr in ((ma, pa), (mb, pb), (mc, pc))]
                slots = None not in made and made
                if slots:
                    (wa, ba, sa), (wb, bb, sb), (wc, bc, sc) = ((s.word, s.base, s.shift) for s in slots)
                    outside = slots[0].outside | slots[1].outside | slots[2].outside
                    self.slots = slots
            params[4] = kept_a.get(pa) or ma.address(pa)
            params[5] = kept_b.get(pb) or mb.address(pb)
            params[6] = kept_c.get(pc) or mc.address(pc)
            c_value.value = pc
            stream_value.value = stream
            err = bound()
            if slots:  # (the fast path's parameters point at the slots again)
                params[4], params[5], params[6] = (s.address for s in slots)
            if err:
                failed(err)

        def launch(pa: int, pb: int, pc: int, stream: int) -> None:
            if (pa | pb | pc) & outside:
                return by_encoding(pa, pb, pc, stream)
            wa.value = ba | (pa >> 4) << sa
            wb.value = bb | (pb >> 4) << sb
            wc.value = bc | (pc >> 4) << sc
            c_value.value = pc
            stream_value.value = stream
            err = bound()
            if err:
                failed(err)

        return launch

    def launch_split(self, pa: int, pb: int, pc: int, pa2: int, pb2: int, alpha: float, beta: float,
                     stream: int, scale: int = 0, partials: int = 0, flags: int = 0) -> None:
        """3xTF32 (SPLIT 1): A's big and small parts at pa, pa2 (row-major, K padded to the map's),
        B^T's at pb, pb2; alpha and beta; `scale` the split's exponent words (0: none); SK 1: the
        partial sums and their flags (sk_scratch; the flags zero)."""
        ma, mb, mc = self.maps
        packed = self.packed
        packed.params[4], packed.params[5], packed.params[6] = ma.address(pa), mb.address(pb), mc.address(pc)
        packed.params[8], packed.params[9] = ma.address(pa2), mb.address(pb2)
        v = packed.values
        v[7].value, v[10].value, v[11].value, v[12].value = pc, alpha, beta, scale
        v[13].value, v[14].value = partials, flags
        try:
            packed.launch(stream)
        finally:
            if self.slots:  # (launch()'s fast path reads the slots)
                packed.params[4], packed.params[5], packed.params[6] = (s.address for s in self.slots)


class _UnusedMap:
    """A tensor-map parameter the kernel never reads (C's under EPI 0, the second operand pair outside
    3xTF32): every address maps to one block of zeros."""

    def __init__(self, address: int):
        self._address = address
        self.addresses: dict = {}

    def address(self, ptr: int) -> int:
        return self._address

    def keep(self, ptr: int):
        return self._address, None

    def slot(self, ptr: int):
        from ..driver import MapSlot

        return MapSlot.fixed(self._address)


def resident_clusters(func, launch: Launch, cs: int) -> Launch:
    """A persistent grid of clusters of 4 cut to the clusters the device can hold at once (the
    driver's cuOccupancyMaxActiveClusters): a cluster launched beyond them would only start when
    another has finished all its tiles, doubling the time of its share. Clusters of 2 are not
    asked about: a GPC's even SM count holds them all (66 on the H200, measured), and the query
    through the driver bindings made compute-sanitizer's memcheck report API errors (run 604003)
    that would hide real ones."""
    if cs <= 2:
        return launch
    resident = max_active_clusters(function_handle(func), launch.block[0], launch.shared)
    clusters = launch.grid[0] // cs
    if resident < 1:
        raise LaunchError(f"rung 6: no cluster of {cs} blocks of {launch.threads} threads and {launch.shared} "
                          "bytes of shared memory fits on this device")
    return launch if clusters <= resident else Launch((resident * cs, 1, 1), launch.block, launch.shared)


@functools.cache
def max_active_clusters(func_ptr: int, threads: int, shared: int) -> int:
    """The driver's count of clusters of a compiled cluster kernel (its handle) that fit at once."""
    from cuda.bindings import driver

    config = driver.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = 1024, 1, 1  # (a multiple of any cluster size; not a limit)
    config.blockDimX, config.blockDimY, config.blockDimZ = threads, 1, 1
    config.sharedMemBytes = shared
    config.numAttrs = 0  # the cluster shape is the kernel's own (__cluster_dims__)
    err, n = driver.cuOccupancyMaxActiveClusters(driver.CUfunction(func_ptr), config)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise LaunchError(f"rung 6: the driver could not say how many clusters fit ({err.name})")
    return int(n)


# --- inputs, outputs, references ---------------------------------------------------------------

class Workspace:
    def __init__(self, p: TcProblem, seed: int):
        import cupy

        self.p = p
        rng = cupy.random.default_rng(seed)
        lead = (p.batch,) if p.batch > 1 else ()  # batched: matrices back to back (strides M*K, K*N, M*N)

        def operand(rows, cols, transposed):  # (a transposed operand: the .T view of a cols x rows matrix)
            if transposed:
                return operand(cols, rows, False).swapaxes(-1, -2)
            return _narrow(rng.random(lead + (rows, cols), dtype=cupy.float32) * 2 - 1, p.dtype)

        self.A = operand(p.M, p.K, p.ta)
        self.B = operand(p.K, p.N, p.tb)
        # (a bf16 C, like bf16 inputs, is held as its uint16 bit pattern)
        self.C = cupy.empty(lead + (p.M, p.N), dtype={"float32": cupy.float32, "float16": cupy.float16,
                                                       "bfloat16": cupy.uint16}[p.out])

    @classmethod
    def of(cls, p: TcProblem, A, B, C) -> "Workspace":
        """A workspace over the caller's arrays (simtlab.gemm_tc): A, B and C as the kernels take
        them (bf16 as 16-bit integer bits), nothing allocated."""
        ws = cls.__new__(cls)
        ws.p, ws.A, ws.B, ws.C = p, A, B, C
        return ws

    def poison(self) -> None:
        self.C.fill(BF16_NAN if self.p.out == "bfloat16" else np.nan)

    def args(self) -> tuple:
        p = self.p
        return (np.int32(p.M), np.int32(p.N), np.int32(p.K), self.A, self.B, self.C)

    def vec_ok(self) -> bool:
        """16-byte rows: K and N multiples of 8 elements, 16-byte aligned buffers (row-major operands)."""
        aligned = all(x.data.ptr % 16 == 0 for x in (self.A, self.B, self.C))
        return aligned and self.p.K % 8 == 0 and self.p.N % 8 == 0 and self.p.layout == "nn"

    def expected(self):
        return _widen(self.A) @ _widen(self.B)

    def output(self):
        """C as numbers (a bf16 C widened from its bit pattern)."""
        return bf16_bits_to_float32(self.C) if self.p.out == "bfloat16" else self.C


BF16_NAN = 0x7FC0  # a bf16 quiet NaN's bit pattern: the poison of a bf16 C


def _narrow(x, dtype: str):
    """float32 -> float16, or -> bfloat16 held as its uint16 bit pattern (CuPy has no bfloat16
    type; the kernels only see a pointer), rounded to nearest even like __float2bfloat16. TF32
    problems keep their fp32 inputs (the tensor cores drop the low mantissa bits)."""
    import cupy

    if dtype == "float16":
        return x.astype(cupy.float16)
    if dtype == "float32":
        return x
    return to_bf16_bits(x)


def _widen(x):
    """The exact float64 value of each input."""
    import cupy

    if x.dtype in (cupy.float16, cupy.float32):
        return x.astype(cupy.float64)
    return bf16_bits_to_float32(x).astype(cupy.float64)


def workspace(p: TcProblem, seed: int) -> Workspace:
    return Workspace(p, seed)


def _cublas(ws: Workspace):
    """cublasGemmEx: half-precision inputs, fp32 compute, C in the problem's output type (what the
    rungs do); fp32 inputs with CUBLAS_COMPUTE_32F_FAST_TF32 (cuBLAS's TF32 mode)."""
    import cupy
    from cupy_backends.cuda.libs import cublas

    handle = cupy.cuda.device.get_cublas_handle()
    cublas.setPointerMode(handle, getattr(cublas, "CUBLAS_POINTER_MODE_HOST", 0))
    p = ws.p
    one, zero = np.array(1.0, np.float32), np.array(0.0, np.float32)
    dt, ct = _CUDA_DATA_TYPE[p.dtype], _CUDA_DATA_TYPE[p.out]
    op_n, op_t = getattr(cublas, "CUBLAS_OP_N", 0), getattr(cublas, "CUBLAS_OP_T", 1)
    compute = _CUBLAS_COMPUTE_32F_FAST_TF32 if p.dtype == "float32" else _CUBLAS_COMPUTE_32F
    # Row-major C = A B is column-major C^T = B^T A^T. A row-major X (r x c) is a column-major X^T
    # (leading dimension c); a transposed view of a row-major X^T (stored c x r) is a column-major
    # X (leading dimension r), so cuBLAS transposes it back.
    op_b, ldb = (op_t, p.K) if p.tb else (op_n, p.N)
    op_a, lda = (op_t, p.M) if p.ta else (op_n, p.K)

    def run():
        cublas.gemmEx(handle, op_b, op_a, p.N, p.M, p.K, one.ctypes.data, ws.B.data.ptr, dt, ldb,
                      ws.A.data.ptr, dt, lda, zero.ctypes.data, ws.C.data.ptr, ct, p.N,
                      compute, _CUBLAS_GEMM_DEFAULT)

    def run_batched():  # the same per matrix, strides between them (cublasGemmStridedBatchedEx)
        cublas.gemmStridedBatchedEx(handle, op_b, op_a, p.N, p.M, p.K, one.ctypes.data, ws.B.data.ptr, dt, ldb,
                                    p.K * p.N, ws.A.data.ptr, dt, lda, p.M * p.K, zero.ctypes.data, ws.C.data.ptr,
                                    ct, p.N, p.M * p.N, p.batch, compute, _CUBLAS_GEMM_DEFAULT)

    return run_batched if p.batch > 1 else run


def _triton(ws: Workspace):
    from ..references.triton_gemm import triton_tc_gemm_runner

    return triton_tc_gemm_runner(ws.A, ws.B, ws.C, ws.p.dtype, ws.p.out)


def references() -> list[Reference]:
    # (GemmStridedBatchedEx for a batched problem; one name, so stored rows stay comparable. C's type
    # follows the problem, whose label names a 16-bit one, '...:bf16:bf16'; runs before 16-bit C
    # existed named these "..., fp32 out")
    # (and simtlab.gemm_tc itself: see simtlab.api_calls)
    refs = [Reference("cuBLAS (GemmEx, fp32 sums)", _cublas)]
    try:
        import torch  # noqa: F401
        import triton  # noqa: F401

        refs.append(Reference("Triton (tl.dot, fp32 sums)", _triton, applies=lambda p: p.layout == "nn"))
    except Exception:
        pass  # optional, as for the fp32 GEMM: the matmul a Python user would write
    return refs


# --- the family: its rungs, one per kernel file -------------------------------------------------

FAMILY = Family(
    name="gemm_tc",
    title="tensor-core GEMM: fp16/bf16 in, fp32 accumulate and out, C = A@B, row-major",
    ops=sys.modules[__name__],
    reference="cuBLAS GemmEx (same types)",
    default_sizes=("4096", "4096:bf16"),
    rungs=(
        Rung("gemm_tc", 1, "wmma", "gemm_tc/01_wmma.cu", "gemm_tc_wmma", ("DT", "WARPS_M", "WARPS_N"),
             frozen({"DT": 0, "WARPS_M": 2, "WARPS_N": 2}),
             "one warp, one 16x16 tile: WMMA fragments loaded straight from global, 4096 MACs per HMMA",
             geometry_wmma, min_cc=(8, 0), size_defaults=dtype_params, sass_expect=("HMMA",),
             traffic=functools.partial(requested_bytes, tile=(16, 16))),
        Rung("gemm_tc", 2, "wmma_smem", "gemm_tc/02_wmma_smem.cu", "gemm_tc_wmma_smem",
             ("DT", "BM", "BN", "BK", "WARPS_M", "WARPS_N"),
             frozen({"DT": 0, "BM": 128, "BN": 128, "BK": 32, "WARPS_M": 2, "WARPS_N": 4}),
             "block tiles in shared memory: each fragment loaded there feeds several HMMAs",
             geometry_wmma_smem, vec_variant=True, min_cc=(8, 0), size_defaults=dtype_params,
             sass_expect=("HMMA", "LDS", "BAR")),
        Rung("gemm_tc", 3, "mma_multistage", "gemm_tc/03_mma_multistage.cu", "gemm_tc_mma",
             ("DT", "BM", "BN", "WM", "WN", "STAGES"),
             frozen({"DT": 0, "BM": 128, "BN": 128, "WM": 64, "WN": 32, "STAGES": 4}),
             "mma.sync + ldmatrix on XOR-swizzled tiles, a cp.async ring of STAGES slices (the Ampere way)",
             geometry_mma, vec_variant=True, min_cc=(8, 0), size_defaults=dtype_params,
             sass_expect=("HMMA", "LDSM", "LDGSTS.128")),
        Rung("gemm_tc", 4, "wgmma_tma", "gemm_tc/04_wgmma_tma.cu", "gemm_tc_wgmma", ("DT", "BM", "BN", "STAGES"),
             frozen({"DT": 0, "BM": 128, "BN": 256, "STAGES": 4}),
             "Hopper: TMA copies whole swizzled slices onto mbarriers; wgmma multiplies straight from shared memory",
             geometry_wgmma, min_cc=(9, 0), arch_specific=True, size_defaults=dtype_params,
             tunable=("BM", "BN", "STAGES"), sass_expect=("HGMMA", "UTMALDG", "SYNCS"), capabilities=frozenset({TMA})),
        Rung("gemm_tc", 5, "wgmma_ws", "gemm_tc/05_wgmma_ws.cu", "gemm_tc_wgmma_ws",
             ("DT", "BM", "BN", "STAGES", "GROUP_M"), frozen({"DT": 0, "BM": 128, "BN": 256, "STAGES": 4, "GROUP_M": 8}),
             "warp-specialised: a TMA producer warpgroup and wgmma consumers on full/empty mbarriers, "
             "setmaxnreg, a persistent grid whose next loads overlap the last tile's stores",
             geometry_wgmma_ws, min_cc=(9, 0), arch_specific=True, size_defaults=dtype_params,
             tunable=("BM", "BN", "STAGES", "GROUP_M"), sass_expect=("HGMMA", "UTMALDG", "SYNCS", "USETMAXREG"),
             capabilities=frozenset({TF32, TMA}), work=ws_work),
        Rung("gemm_tc", 6, "wgmma_cluster", "gemm_tc/06_wgmma_cluster.cu", "gemm_tc_wgmma_cluster",
             ("DT", "BM", "BN", "STAGES", "GROUP_M", "CM", "CN", "EPI", "KEEP", "OUT", "WIDE", "LEAN", "TA",
              "TB"),
             frozen({"DT": 0, "BM": 128, "BN": 256, "STAGES": 4, "GROUP_M": 16, "CM": 2, "CN": 1, "EPI": 3,
                      "KEEP": 4, "OUT": 0, "WIDE": 1, "LEAN": 1, "TA": 0, "TB": 0}),
             "clusters of 2 blocks share each B slice by TMA multicast (a third less L2 traffic); results leave "
             "through swizzled shared memory and TMA stores",
             geometry_wgmma_cluster, min_cc=(9, 0), arch_specific=True, size_defaults=cluster_params,
             from_store=True, tunable=("BM", "BN", "STAGES", "GROUP_M", "CM", "CN", "EPI", "KEEP", "WIDE", "LEAN"),
             sass_expect=("HGMMA", "UTMALDG", "UTMASTG", "SYNCS", "USETMAXREG"),
             capabilities=frozenset({TF32, OUT16, TRANSPOSED, TMA, CLUSTER}), space=cluster_space,
             work=cluster_work_units, features=cluster_features),
        Rung("gemm_tc", 7, "split_k", "gemm_tc/07_split_k.cu", "gemm_tc_split_k",
             ("DT", "BM", "BN", "BK", "WM", "WN", "WK", "STAGES", "TA", "TB", "AV", "BV", "OUT", "TC"),
             # (SPLITS: blocks a cluster, chosen at launch - not a template argument)
             frozen({"DT": 0, "BM": 64, "BN": 64, "BK": 64, "WM": 32, "WN": 32, "WK": 1, "STAGES": 4, "TA": 0, "TB": 0,
                     "AV": 16, "BV": 16, "OUT": 0, "TC": 0, "SPLITS": 2}),
             "K split over a cluster's blocks and a block's warps, summed through distributed shared memory; "
             "tiles down to 32x8, either operand transposed, rows of any alignment: every SM busy on skinny, "
             "decode and long-K shapes",
             geometry_split_k, min_cc=(8, 0), size_defaults=split_params, builds_on=3,
             tunable=("BM", "BN", "BK", "WM", "WN", "WK", "STAGES", "SPLITS"), sass_expect=("HMMA", "LDSM", "LDGSTS"),
             capabilities=frozenset({OUT16, TRANSPOSED, SPLIT}), space=split_space),
    ),
    check_size="127x129x65",
)
