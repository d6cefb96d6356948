"""The fp32 ladder's rung 11 (3xTF32): fp32 products on the tensor cores from two TF32 parts of
each operand. A call is a split pre-pass (A's big and small parts row-major, B's transposed to
K-major, K padded to whole 16-byte rows with zeros) and the tensor-core ladder's rung 6 built with
SPLIT 1, which walks K three times over the four parts. What the gemm family (ladder, tests) and
simtlab.gemm(precision="tf32x3") both run."""

from __future__ import annotations

from dataclasses import dataclass

from ..launch import Launch, LaunchError, function_handle
from . import gemm_tc
from .base import sm_count

SPLIT_1_BELOW_K = 256  # promote every big x big slice below this depth, every two from it (size_defaults)
SPLIT_BLOCK = 256  # threads of a split block (on B: 16 x 16 over a 64x64 tile)
SPLIT_TILE = 64  # B's split tile: 64 k by 64 n
AREG_K = 32  # AREG 1 takes K in whole slices (B's parts laid out slice by slice in A's fragment order)


def padded_k(K: int) -> int:
    """K rounded up to 4: the parts' rows are whole 16-byte units, as tensor maps need."""
    return -(-K // 4) * 4


def tc_problem(p) -> gemm_tc.TcProblem:
    """The tensor-core problem rung 6 sees: fp32 (TF32) operands, K padded."""
    if isinstance(p, gemm_tc.TcProblem):
        return p
    return gemm_tc.TcProblem(p.M, p.N, padded_k(p.K), "float32")


def geometry(params, p, device=None) -> Launch:
    """Rung 6's persistent grid of clusters over the problem's tiles."""
    return gemm_tc.geometry_wgmma_cluster(params, tc_problem(p), device)


def size_defaults(p, device=None, vec=None) -> dict:
    """Rung 6's TF32 defaults at 128x128 (unpaired blocks for one round of tiles), promoting the
    tensor cores' sums every two slices of big x big (every one below K = 256); the register epilogue (EPI 0) where C's rows are not whole 16-byte units for TMA stores."""
    params = gemm_tc.cluster_params(tc_problem(p), device)
    # 128x128 tiles: the second set of sums (promoted out of the tensor cores every SPLIT slices)
    # needs the registers that 128x256 gives its accumulators. SPLIT 2 (run 2026-12-04_h200_96c44a_
    # tf32x3, one process): 97.8 / 102.4 TFLOP/s at 4096^3 / 8192^3 against SPLIT 1's 85.2 / 87.3
    # with the same rows of the accuracy table at or under SGEMM's; SPLIT 4 (99.8 / 104.8) lost
    # the K = 256 row to SGEMM. (Those windows spanned all three passes; since, the two small
    # passes promote every 16 slices and SPLIT counts big x big slices only.) Short products
    # promote every slice: SGEMM's own error is small there - at K = 64 / 128 SPLIT 1 gives 1.32 /
    # 1.35e-7 against SGEMM's 1.45 / 2.03e-7, SPLIT 2 1.97 / 1.98e-7 (run 2026-12-04_h200_ee62a6_
    # tf32x3_windows); below K = 64 simtlab.gemm sums in float64 instead (plans.TF32X3_MIN_K).
    split = 1 if p.K < SPLIT_1_BELOW_K else 2
    params.update(DT=2, SPLIT=split)
    split_tiles(params, p, device)
    # The last round's tiles cut into chunks of K (SK 1; spill-free with 3 kept pieces) where that
    # round is at most a quarter full: 4097x4095x4093, 16 of 66, 1.485 against 1.581 ms; fuller
    # last rounds lost to the chunks' hand-overs (4096^3, 50 of 66: -1.4%; 8192x1024x8192, 58:
    # -2.6%) and 8192^3 (2 of 66) tied (run 2026-12-04_h200_2b3885_tf32x3_split_k, one process).
    sk = {"BM": 128, "CN": 1, **params, "SK": 1}  # (rung 6's 128-row tiles, clusters along M at most)
    clusters = sm_count(device) // sk["CM"]
    rest, parts = gemm_tc.tail_split(sk, tc_problem(p), clusters)
    if parts > 1 and gemm_tc.cluster_work(sk, tc_problem(p)) >= clusters and 4 * rest <= clusters:
        params.update(SK=1, KEEP=3)
    return params


def split_tiles(params: dict, p, device=None) -> dict:
    """The tiles of the split rungs (11, 13), set in `params`: 128x128 (the second set of sums, promoted
    out of the tensor cores, needs the registers 128x256 gives its accumulators), 4 kept pieces,
    unpaired blocks where the tiles make one round; the register epilogue (EPI 0) where C's rows are
    not whole 16-byte units for TMA stores."""
    params.update(BN=128, KEEP=4, CM=1 if -(-p.M // 128) * -(-p.N // 128) <= sm_count(device) else 2)
    if p.N % 4:
        params["EPI"] = 0
    return params


def exponents_grid(M: int, N: int, sms: int) -> tuple[int, int, int]:
    """The grid of the passes that make the exponents (rung 11's rescaling, rung 12's exponents):
    blocks of y 0 walk A's rows, of y 1 B's 32-column strips."""
    return min(max(M, -(-N // 32)), 4 * sms), 2, 1


def scale_bytes(M: int, N: int) -> int:
    """The split's exponent words: a flag, one a row of A, one a column of B (whole 16 bytes)."""
    return -(-4 * (1 + M + N) // 16) * 16


@dataclass
class SplitBuffers:
    """Where the four parts live: A's big and small (M x kp), B^T's big and small (N x kp); the
    main loop's scratch for the last round's chunks (SK 1); and the split's exponent words (a flag, then one exponent
    a row of A and a column of B)."""
    a_big: int
    a_small: int
    b_big: int
    b_small: int
    partials: int  # SK 1: the shared tiles' partial sums, then their flags (zeroed with the split's)
    flags: int
    scale: int


class Tf32x3Gemm:
    """Rung 11 on one problem's shape: the split kernels' and the main kernel's launches packed once;
    `run(...)` is a memset and three driver launches on the given stream (the flag cleared, the
    split, the rescaling pass that returns at once unless the split saw values near the smallest
    normal, the main loop).
    `parts_bytes` of scratch a call hold the parts and the exponents (the caller allocates them on
    its stream: the array libraries' pools)."""

    def __init__(self, inst, M: int, N: int, K: int, device, prepare):
        from ..driver import I32, PTR, PackedLaunch

        if inst.params.get("SPLIT", 0) < 1 or inst.params.get("DT") != 2:
            raise LaunchError(f"rung 11 needs SPLIT >= 1 and DT 2, got {inst.params}")
        self.M, self.N, self.K, self.kp = M, N, K, padded_k(K)
        # AREG 1: the main loop reads A itself and splits it in registers (K whole slices of 32, so
        # B's parts can be laid out in the k order A's fragments take); the pre-pass only notes A
        self.areg = bool(inst.params.get("AREG", 0))
        if self.areg and K % AREG_K:
            raise LaunchError(f"rung 11 with AREG 1 needs K a multiple of {AREG_K}, got {K}")
        self.main = gemm_tc.ClusterKernel(inst, gemm_tc.TcProblem(M, N, self.kp, "float32"), device, prepare)
        # the last round's partial sums and flags (SK 1; else none), the flags in whole 16-byte units
        self.sk_bytes, flags = self.main.sk_scratch
        self.flag_bytes = -(-4 * flags // 16) * 16
        module = inst.module()
        index = device.index if device is not None else 0
        sms = sm_count(device)
        # one launch: A's 4-wide groups over the first blocks (one round of 8 an SM at most), then
        # one block a 64x64 tile of B
        a_blocks = min(-(-M * (self.kp // 4) // SPLIT_BLOCK), 8 * sms)
        tiles_n, tiles_k = -(-N // SPLIT_TILE), -(-self.kp // SPLIT_TILE)
        if a_blocks + tiles_n * tiles_k >= 2**31:
            raise LaunchError(f"{K}x{N}: B's split would take {tiles_n * tiles_k} blocks")
        split = PackedLaunch(function_handle(module.get_function("gemm_split_tf32")),
                             (a_blocks + tiles_n * tiles_k, 1, 1), (SPLIT_BLOCK, 1, 1), 0,
                             (PTR, I32, I32, I32, PTR, I32, I32, I32, PTR, PTR, PTR, PTR, PTR, I32, I32, I32), index)
        rescale = PackedLaunch(function_handle(module.get_function("gemm_split_tf32_rescale")),
                               exponents_grid(M, N, sms), (SPLIT_BLOCK, 1, 1), 0,
                               (PTR, I32, I32, I32, PTR, I32, I32, I32, PTR, PTR, PTR, PTR, PTR, I32), index)
        for packed in (split, rescale):
            for i, v in ((1, M), (2, K), (5, N), (7, self.kp)):
                packed.values[i].value = v
        split.values[13].value, split.values[14].value = a_blocks, tiles_n
        split.values[15].value = rescale.values[13].value = int(self.areg)  # (B's rows in A's fragment order)
        self.split_launch, self.rescale = split, rescale

    @property
    def parts_bytes(self) -> int:
        a_parts = 1 if self.areg else 2
        return (4 * (a_parts * self.M + 2 * self.N) * self.kp + self.sk_bytes + self.flag_bytes
                + scale_bytes(self.M, self.N))

    def parts(self, base: int) -> SplitBuffers:
        """The four parts laid out in one scratch buffer at `base` (each 16-byte aligned), then the
        last round's partial sums and flags (SK 1), then the exponent words: the flags just before the
        exponents' flag, so one memset clears them all. AREG 1: one region for A (a copy of it,
        where the call's A cannot be read by TMA), a_small the same address."""
        a, b = 4 * self.M * self.kp, 4 * self.N * self.kp
        a_end = base + (1 if self.areg else 2) * a
        partials = a_end + 2 * b
        flags = partials + self.sk_bytes
        return SplitBuffers(base, a_end - a, a_end, a_end + b, partials, flags, flags + self.flag_bytes)

    def run(self, pa: int, lda: int, pb: int, ldb: int, pc: int, alpha: float, beta: float, scratch: int,
            stream: int) -> None:
        """C = alpha * A @ B + beta * C: A row-major (M x K, row stride lda elements), B row-major
        (K x N, ldb), C row-major (M x N); the parts in `scratch` (parts_bytes)."""
        s = self.split(pa, lda, pb, ldb, scratch, stream)
        self.main.launch_split(s.a_big, s.b_big, pc, s.a_small, s.b_small, alpha, beta, stream, s.scale, s.partials,
                               s.flags)

    def reads_a_in_place(self, pa: int, lda: int) -> bool:
        """AREG 1: whether the main loop's TMA reads the call's A where it lies (16-byte aligned,
        rows packed), else the split copies it into the scratch first."""
        return pa % 16 == 0 and lda == self.K

    def split(self, pa: int, lda: int, pb: int, ldb: int, scratch: int, stream: int) -> SplitBuffers:
        """The pre-pass alone: A's and B's parts into `scratch` (and, where values near the smallest
        normal were seen, their rows and columns rescaled); returns where they are (AREG 1: where
        the main loop reads A, a_big and a_small both - A itself, or the split's copy of it)."""
        from ..driver import memset32

        s = self.parts(scratch)
        # (the flag the split sets, and SK 1's flags before it: scratch holds whatever it held)
        memset32(s.flags, 0, self.flag_bytes // 4 + 1, stream)
        # (AREG 1: no parts of A - the split notes A, and copies it where TMA cannot read it; the
        # rescaling pass makes A's exponents only)
        a_big, a_small = s.a_big, s.a_small
        if self.areg:
            in_place = self.reads_a_in_place(pa, lda)
            a_big, a_small = (0 if in_place else s.a_big), 0
            s.a_big = s.a_small = pa if in_place else s.a_big
        for packed in (self.split_launch, self.rescale):
            v = packed.values
            v[0].value, v[3].value, v[4].value, v[6].value = pa, lda, pb, ldb
            v[8].value, v[9].value, v[10].value, v[11].value = a_big, a_small, s.b_big, s.b_small
            v[12].value = s.scale
            packed.launch(stream)
        return s


class Tf32x3MmaGemm:
    """Rung 12 (3xTF32 with mma.sync) on one problem's shape: `run(...)` is a one-word memset and
    three launches on the given stream - the note pass over A and B (values near the smallest
    normal), the exponents pass (returns at once unless the note pass saw one) and the main kernel,
    which applies the exponents where they were made. `scratch_bytes` a call: the flag and the
    exponents (the caller allocates them on its stream)."""

    def __init__(self, inst, problem, device, prepare, vec: bool):
        from ..driver import F32, I32, I64, PTR, PackedLaunch

        self.M, self.N, self.K = M, N, K = problem.M, problem.N, problem.K
        index = device.index if device is not None else 0
        sms = sm_count(device)
        module = inst.module()
        geometry = inst.geometry(problem, device)
        func = prepare(inst, geometry, vec, device)
        self.main = PackedLaunch(function_handle(func), geometry.grid, geometry.block, geometry.shared,
                                 (I32, I32, I32, F32, PTR, PTR, F32, PTR, PTR), index)
        self.note = PackedLaunch(function_handle(module.get_function("gemm_tf32x3_note_tiny")),
                                 (4 * sms, 1, 1), (256, 1, 1), 0, (PTR, I64, PTR, I64, PTR), index)
        self.exponents = PackedLaunch(function_handle(module.get_function("gemm_tf32x3_exponents")),
                                      exponents_grid(M, N, sms), (256, 1, 1), 0,
                                      (PTR, I32, I32, PTR, I32, PTR), index)
        for i, v in enumerate((M, N, K)):
            self.main.values[i].value = v
        self.note.values[1].value, self.note.values[3].value = M * K, K * N
        for i, v in ((1, M), (2, K), (4, N)):
            self.exponents.values[i].value = v

    @property
    def scratch_bytes(self) -> int:
        return scale_bytes(self.M, self.N)

    def run(self, pa: int, pb: int, pc: int, alpha: float, beta: float, scratch: int, stream: int) -> None:
        """C = alpha * A @ B + beta * C, all three row-major and contiguous; the flag and exponents
        in `scratch` (scratch_bytes)."""
        from ..driver import memset32

        memset32(scratch, 0, 1, stream)
        v = self.note.values
        v[0].value, v[2].value, v[4].value = pa, pb, scratch
        self.note.launch(stream)
        v = self.exponents.values
        v[0].value, v[3].value, v[5].value = pa, pb, scratch
        self.exponents.launch(stream)
        v = self.main.values
        v[3].value, v[4].value, v[5].value, v[6].value, v[7].value, v[8].value = alpha, pa, pb, beta, pc, scratch
        self.main.launch(stream)
