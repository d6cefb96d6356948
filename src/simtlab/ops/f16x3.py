"""The fp32 ladder's rung 13: fp32 products from two fp16 parts of each operand, rows of A and
columns of B scaled by powers of two into fp16's range. A call is a memset, a pass that finds each
row's and column's largest finite magnitude, the split (A's parts row-major, B's transposed to
K-major, K padded to whole 16-byte rows with zeros) and the tensor-core ladder's rung 6 built with
SPLIT over fp16 parts (DT 0), which walks K three times and undoes the scales in its epilogue."""

from __future__ import annotations

from dataclasses import dataclass

from ..launch import Launch, LaunchError, function_handle
from . import gemm_tc, tf32x3
from .base import sm_count

BLOCK = 256  # threads of a max or split block
TILE = 64  # B's split tile: 64 k by 64 n
MAX_ROWS_K = 256  # rows of B a max block walks (a 32-column strip)


def padded_k(K: int) -> int:
    """K rounded up to 8: the fp16 parts' rows are whole 16-byte units, as tensor maps need."""
    return -(-K // 8) * 8


def tc_problem(p) -> gemm_tc.TcProblem:
    """The tensor-core problem rung 6 sees for an fp32 problem `p`: fp16 parts, A row-major and B^T
    K-major (layout nt), K padded, fp32 C."""
    return p if isinstance(p, gemm_tc.TcProblem) else _tc_shape(p.M, p.N, p.K)


def _tc_shape(M: int, N: int, K: int) -> gemm_tc.TcProblem:
    return gemm_tc.TcProblem(M, N, padded_k(K), "float16", out="float32", layout="nt")


def geometry(params, p, device=None) -> Launch:
    return gemm_tc.geometry_wgmma_cluster(params, tc_problem(p), device)


def size_defaults(p, device=None, vec=None) -> dict:
    """Rung 11's tile shape (tf32x3.split_tiles), fp16 parts promoted after every 64-deep slice of
    big x big (rung 11's SPLIT 2 covers the same k), whole tiles."""
    params = gemm_tc.cluster_params(tc_problem(p), device)
    params.update(DT=0, TA=0, TB=1, SPLIT=1, SK=0, AREG=0)
    return tf32x3.split_tiles(params, p, device)


def work(params, problem, sms: int) -> tuple[int, int]:
    return gemm_tc.cluster_work(params, tc_problem(problem)), sms // (params["CM"] * params["CN"])


@dataclass
class Scratch:
    a_big: int
    a_small: int
    b_big: int
    b_small: int
    amax: int  # a row of A's largest finite magnitude (bits), then B's columns' (zeroed each call)
    bmax: int
    scale: int


class F16x3Gemm:
    """Rung 13 on one problem's shape: `run(...)` is a memset (B's column maxima) and three driver
    launches on the given stream (the maxima, the split, the main loop); `parts_bytes` a call hold
    the parts, the maxima and the exponents (the caller allocates them on its stream)."""

    def __init__(self, inst, M: int, N: int, K: int, device, prepare):
        from ..driver import I32, PTR, PackedLaunch

        if inst.params.get("SPLIT", 0) < 1 or inst.params.get("DT") != 0 or inst.params.get("TB") != 1:
            raise LaunchError(f"rung 13 needs SPLIT >= 1, DT 0 and TB 1, got {inst.params}")
        self.M, self.N, self.K, self.kp = M, N, K, padded_k(K)
        self.main = gemm_tc.ClusterKernel(inst, _tc_shape(M, N, K), device, prepare)
        module = inst.module()
        index = device.index if device is not None else 0
        sms = sm_count(device)
        a_max_blocks = min(-(-M // 8), 8 * sms)
        strips = -(-N // 32)
        max_blocks = a_max_blocks + strips * -(-K // MAX_ROWS_K)
        a_blocks = min(-(-M * (self.kp // 4) // BLOCK), 8 * sms)
        tiles_n, tiles_k = -(-N // TILE), -(-self.kp // TILE)
        split_blocks = a_blocks + tiles_n * tiles_k
        if max(max_blocks, split_blocks) >= 2**31:
            raise LaunchError(f"{M}x{N}x{K}: the split would take more than 2^31 blocks")
        self.max = PackedLaunch(function_handle(module.get_function("gemm_f16x3_max")),
                                (max_blocks, 1, 1), (BLOCK, 1, 1), 0,
                                (PTR, I32, I32, I32, PTR, I32, I32, PTR, PTR, I32, I32), index)
        self.split_launch = PackedLaunch(function_handle(module.get_function("gemm_f16x3_split")),
                                         (split_blocks, 1, 1), (BLOCK, 1, 1), 0,
                                         (PTR, I32, I32, I32, PTR, I32, I32, I32, PTR, PTR, PTR, PTR, PTR, PTR, PTR,
                                          I32, I32), index)
        v = self.max.values
        v[1].value, v[2].value, v[5].value, v[9].value, v[10].value = M, K, N, a_max_blocks, strips
        v = self.split_launch.values
        v[1].value, v[2].value, v[5].value, v[7].value, v[15].value, v[16].value = M, K, N, self.kp, a_blocks, tiles_n

    @property
    def parts_bytes(self) -> int:
        return 2 * 2 * (self.M + self.N) * self.kp + 4 * (self.M + self.N) + 16 + tf32x3.scale_bytes(self.M, self.N)

    def scratch(self, base: int) -> Scratch:
        """The parts (each 16-byte aligned: kp is a multiple of 8 halves), then B's and A's maxima
        (B's first, so its memset starts aligned), then the exponent words."""
        a, b = 2 * self.M * self.kp, 2 * self.N * self.kp
        bmax = base + 2 * a + 2 * b
        amax = bmax + 4 * self.N
        scale = -(-(amax + 4 * self.M) // 16) * 16
        return Scratch(base, base + a, base + 2 * a, base + 2 * a + b, amax, bmax, scale)

    def run(self, pa: int, lda: int, pb: int, ldb: int, pc: int, alpha: float, beta: float, scratch: int,
            stream: int) -> None:
        """C = alpha * A @ B + beta * C: A row-major (M x K, row stride lda elements), B row-major
        (K x N, ldb), C row-major (M x N); the parts in `scratch` (parts_bytes)."""
        from ..driver import memset32

        s = self.scratch(scratch)
        memset32(s.bmax, 0, self.N, stream)  # (atomicMax from zero; A's maxima are written whole)
        v = self.max.values
        v[0].value, v[3].value, v[4].value, v[6].value, v[7].value, v[8].value = pa, lda, pb, ldb, s.amax, s.bmax
        self.max.launch(stream)
        v = self.split_launch.values
        v[0].value, v[3].value, v[4].value, v[6].value = pa, lda, pb, ldb
        v[8].value, v[9].value, v[10].value, v[11].value = s.a_big, s.a_small, s.b_big, s.b_small
        v[12].value, v[13].value, v[14].value = s.amax, s.bmax, s.scale
        self.split_launch.launch(stream)
        self.main.launch_split(s.a_big, s.b_big, pc, s.a_small, s.b_small, alpha, beta, stream, s.scale)
