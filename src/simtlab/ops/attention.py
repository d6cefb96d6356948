"""Attention, O = softmax(scale Q K^T [+ causal mask]) V, for bf16 or fp16 Q, K, V with fp32
softmax statistics, beside PyTorch's scaled_dot_product_attention.

Q and O are (bh, sq, d), K and V (bh, sk, d): batch x heads flattened, rows contiguous, as SDPA's
(batch, heads, sequence, head dim) tensors are once their first two dimensions are merged. The
causal mask is SDPA's `is_causal` (query i sees keys j <= i, aligned to the top left). Every rung
also writes each row's log-sum-exp (bh, sq) fp32, which a backward recomputes the softmax from.

Rung 1 runs the formula as three launches with the scores in memory; rung 2 fuses them on the
CUDA cores with an online softmax; rung 3 puts the two products on the tensor cores (mma.sync),
FlashAttention-2's partition of the rows over warps; rung 4 makes them Hopper's warpgroup MMAs
(wgmma), reading the tiles from swizzled shared memory; rung 5 gives the copies to a producer
warpgroup (TMA) and lets two consumer warpgroups take turns at the tensor cores. Verified against
a float64 softmax of the same (rounded) inputs, head by head.
"""

from __future__ import annotations

import functools
import math
import sys
from dataclasses import dataclass

import numpy as np

from ..family import IN, MAP, OUT, Declared, Family, Operator, Rung, Step, frozen
from ..launch import Launch
from ..verify import UNIT_ROUNDOFF, dot_tolerance
from .base import ITEMSIZE, Reference, parse_int, torch_reference
from .rows import load, store, torch_view
from .tma import TmaBox, map_arg, tensor_map_encoder

DTYPE = "bfloat16"
DT = {"bfloat16": 1, "float16": 2}  # the kernels' DT (simtlab_io.cuh)
SHORT = {"bf16": "bfloat16", "fp16": "float16"}
HEAD_DIMS = (64, 128)  # what the fused rungs are built for (rung 1 takes any)
MMA_BQ = 64  # rung 3's query rows a block
FUSED_BQ = 16  # rung 2's


@dataclass(frozen=True)
class AttentionProblem:
    bh: int  # batch x heads
    sq: int  # query length
    sk: int  # key (and value) length
    d: int  # head dimension
    dtype: str = DTYPE
    causal: bool = False

    def __post_init__(self):
        for name in ("bh", "sq", "sk", "d"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"attention {name} must be >= 1, got {getattr(self, name)}")
        if self.dtype not in DT:
            raise ValueError(f"attention takes bfloat16 or float16 Q, K, V, not {self.dtype}")
        if self.bh > 65535:
            raise ValueError(f"attention: {self.bh} batch x heads; the grid holds at most 65535")

    @property
    def label(self) -> str:
        lengths = f"{self.sq}" if self.sq == self.sk else f"{self.sq}x{self.sk}"
        return (f"{self.bh}x{lengths}x{self.d}" + ("" if self.dtype == DTYPE else ":fp16")
                + (":causal" if self.causal else ""))

    @property
    def pairs(self) -> int:
        """(query, key) pairs the mask leaves visible."""
        if not self.causal:
            return self.sq * self.sk
        full = min(self.sq, self.sk)  # rows 0 .. full-1 see i + 1 keys; later rows see all sk
        return full * (full + 1) // 2 + (self.sq - full) * self.sk

    @property
    def flops(self) -> int:
        return 4 * self.bh * self.pairs * self.d  # two products of the visible pairs

    @property
    def bytes(self) -> int:
        item = ITEMSIZE[self.dtype]
        return self.bh * (item * self.d * (2 * self.sq + 2 * self.sk) + 4 * self.sq)  # Q, K, V, O once; LSE


def parse_size(text: str, **_) -> AttentionProblem:
    """'BHxSxD' (sq = sk) or 'BHxSQxSKxD', then ':bf16' / ':fp16' and ':causal' in any order
    ('16x4096x128:causal')."""
    head, *tags = str(text).lower().split(":")
    dtype, causal = DTYPE, False
    for tag in tags:
        if tag in SHORT:
            dtype = SHORT[tag]
        elif tag == "causal":
            causal = True
        else:
            raise ValueError(f"attention size {text!r}: unknown tag {tag!r} (bf16, fp16, causal)")
    parts = [parse_int(x, f"attention size {text!r}") for x in head.split("x")]
    if len(parts) == 3:
        bh, s, d = parts
        return AttentionProblem(bh, s, s, d, dtype, causal)
    if len(parts) == 4:
        return AttentionProblem(*parts, dtype, causal)
    raise ValueError(f"attention size {text!r}: use BHxSxD or BHxSQxSKxD (e.g. 16x4096x128:causal)")


def tolerance(p: AttentionProblem, ws=None) -> float:
    """Norm-wise, against a float64 softmax of the same rounded inputs: the fp32 sums of the scores
    (d terms) and of P V (sk terms), the probabilities rounded to the storage type before P V
    (rung 3: one unit of it), the output rounded once (another); 2x margin."""
    u = UNIT_ROUNDOFF[p.dtype]
    return 2 * (2 * u + dot_tolerance("float32", p.d) + dot_tolerance("float32", p.sk))


def unsupported(rung, p: AttentionProblem) -> str | None:
    if rung.stage >= 2 and p.d not in HEAD_DIMS:
        return f"rung {rung.stage} is built for head dims {', '.join(map(str, HEAD_DIMS))}, not {p.d}"
    return None


def requested_bytes(params, p: AttentionProblem, rows: int = MMA_BQ) -> int:
    """Rungs 2-3: Q and O once, K and V once for every block of `rows` query rows that reads them
    (causal: about half the blocks' keys)."""
    blocks = -(-p.sq // rows)
    item = ITEMSIZE[p.dtype]
    kv = 2 * item * p.sk * p.d * (blocks if not p.causal else max(1, (blocks + 1) // 2))
    return p.bh * (2 * item * p.sq * p.d + kv + 4 * p.sq)


def naive_bytes(params, p: AttentionProblem) -> int:
    """Rung 1: the scores written, read and written by the softmax, read by P V (16 bytes a pair),
    beside Q, K, V, O."""
    return p.bytes + 16 * p.bh * p.sq * p.sk


def dtype_params(p: AttentionProblem, device=None, vec=None) -> dict:
    return {"DT": DT[p.dtype]}


def head_params(p: AttentionProblem, device=None, vec=None) -> dict:
    return {"DT": DT[p.dtype], "D": p.d}


def geometry_naive(params, p: AttentionProblem, device=None) -> Launch:
    """Phase 0's: a 16x16 block a tile of scores (phases 1 and 2 are the runner's)."""
    return Launch((-(-p.sk // 16), -(-p.sq // 16), p.bh), (256, 1, 1))


def geometry_fused(params, p: AttentionProblem, device=None) -> Launch:
    return Launch((-(-p.sq // FUSED_BQ), p.bh, 1), (128, 1, 1))


def mma_shared(d: int) -> int:
    """Rung 3's dynamic shared memory: the Q tile and two slots of K and V, rows padded by 8 elements."""
    return (MMA_BQ + 4 * 64) * (d + 8) * 2


def geometry_mma(params, p: AttentionProblem, device=None) -> Launch:
    return Launch((-(-p.sq // MMA_BQ), p.bh, 1), (128, 1, 1), mma_shared(params["D"]))


WGMMA_BQ = 128  # rung 4's query rows a block (two warpgroups)


def wgmma_shared(d: int) -> int:
    """Rung 4's dynamic shared memory: the Q tile (128 rows) and two slots of K and V tiles (128 keys
    each), 128-byte rows in 64-column blocks, and 1 KiB to align them to the swizzle's 1024 bytes."""
    return (WGMMA_BQ + 4 * 128) * d * 2 + 1024


def geometry_wgmma(params, p: AttentionProblem, device=None) -> Launch:
    return Launch((-(-p.sq // WGMMA_BQ), p.bh, 1), (256, 1, 1), wgmma_shared(params["D"]))


WS_THREADS = 384  # rung 5: a producer warpgroup and two consumers


def geometry_ws(params, p: AttentionProblem, device=None) -> Launch:
    """Rung 5: rung 4's tiles and shared memory (the ring's barriers are static), three warpgroups."""
    return Launch((-(-p.sq // WGMMA_BQ), p.bh, 1), (WS_THREADS, 1, 1), wgmma_shared(params["D"]))


def items(p: AttentionProblem) -> int:
    """Rung 6's work items: each head's 128-row query blocks."""
    return -(-p.sq // WGMMA_BQ) * p.bh


def geometry_persistent(params, p: AttentionProblem, device=None) -> Launch:
    """Rung 6: rung 5's block, one an SM (at most one an item), each walking items in a stride."""
    sms = device.sms if device is not None else 132
    return Launch((min(items(p), sms), 1, 1), (WS_THREADS, 1, 1), wgmma_shared(params["D"]))


def tile_box(p: AttentionProblem, rows: int) -> TmaBox:
    """Rung 5's tensor map of Q (rows = query length) or K, V (key length): (bh, rows, d) as a 3-D
    tensor, boxes of 64 columns (128 bytes: the swizzle's span) x 128 rows of one head - rows past a
    head's end come in as zeros, never as the next head's."""
    item = ITEMSIZE[p.dtype]
    return TmaBox((p.d, rows, p.bh), (p.d * item, rows * p.d * item), (64, WGMMA_BQ, 1))


def scale_of(p: AttentionProblem) -> float:
    return 1.0 / math.sqrt(p.d)  # SDPA's default


class Workspace:
    """Q, K, V uniform in [-2, 2) (scores of a few units: softmax rows neither flat nor one-hot),
    stored in the problem's type; O and LSE."""

    def __init__(self, p: AttentionProblem, seed: int):
        import cupy

        self.p = p
        rng = cupy.random.default_rng(seed)

        def draw(rows):
            return store((rng.random((p.bh, rows, p.d), dtype=cupy.float32) * 2 - 1) * 2, p.dtype)

        self.q, self.k, self.v = draw(p.sq), draw(p.sk), draw(p.sk)
        self.o = cupy.empty_like(self.q)
        self.lse = cupy.empty((p.bh, p.sq), dtype=cupy.float32)
        self.scale = scale_of(p)

    def poison(self) -> None:
        self.o.fill(0x7FC0 if self.p.dtype == "bfloat16" else np.float16(np.nan))

    def args(self) -> tuple:
        p = self.p
        log2e = 1.4426950408889634
        return (self.q, self.k, self.v, self.o, self.lse, np.int32(p.sq), np.int32(p.sk),
                np.float32(self.scale * log2e), np.int32(p.causal))

    def expected(self):
        """float64 softmax(scale Q K^T + mask) V, a head at a time (sq x sk doubles at once)."""
        import cupy

        p = self.p
        out = cupy.empty((p.bh, p.sq, p.d), dtype=cupy.float64)
        mask = None
        if p.causal:
            mask = cupy.arange(p.sk)[None, :] > cupy.arange(p.sq)[:, None]
        for h in range(p.bh):
            qh, kh, vh = (load(a[h], p.dtype).astype(cupy.float64) for a in (self.q, self.k, self.v))
            s = (qh @ kh.T) * self.scale
            if mask is not None:
                s[mask] = -cupy.inf
            s -= s.max(axis=1, keepdims=True)
            e = cupy.exp(s)
            out[h] = (e / e.sum(axis=1, keepdims=True)) @ vh
        return out

    def output(self):
        return load(self.o, self.p.dtype)


def workspace(p: AttentionProblem, seed: int) -> Workspace:
    return Workspace(p, seed)


def make_runner(inst, problem: AttentionProblem, ws: Workspace, device, vec, prepare):
    """Rung 1: the scores' buffer made here (outside the timed call), then three launches of one
    kernel: scores, probabilities in place, P V. Rung 2 takes the plain scale (its exponentials are
    natural); rung 3 one with log2(e) folded in (the workspace's arguments)."""
    import cupy

    p = problem
    launch = inst.geometry(p, device)
    func = prepare(inst, launch, vec, device)
    if inst.rung.stage in (5, 6):
        return _ws_runner(func, launch, p, ws, device, persistent=inst.rung.stage == 6)
    if inst.rung.stage == 1:
        scores = cupy.empty((p.bh, p.sq, p.sk), dtype=cupy.float32)
        common = (ws.q, ws.k, ws.v, ws.o, scores, ws.lse, np.int32(p.sq), np.int32(p.sk), np.int32(p.d),
                  np.float32(ws.scale), np.int32(p.causal))
        steps = [(launch.grid, common + (np.int32(0),)), ((p.sq, 1, p.bh), common + (np.int32(1),)),
                 ((-(-p.d // 16), -(-p.sq // 16), p.bh), common + (np.int32(2),))]

        def run_naive():
            for grid, args in steps:
                func(grid, (256, 1, 1), args)

        run_naive.keep = scores
        return run_naive
    if inst.rung.stage == 2:
        args = (ws.q, ws.k, ws.v, ws.o, ws.lse, np.int32(p.sq), np.int32(p.sk), np.float32(ws.scale),
                np.int32(p.causal))
        return lambda: func(launch.grid, launch.block, args)
    return lambda: func(launch.grid, launch.block, ws.args(), shared_mem=launch.shared)


def _ws_runner(func, launch, p: AttentionProblem, ws: Workspace, device, persistent: bool = False):
    """Rungs 5 and 6 take their tensor maps by value: one packed driver launch (as simtlab.attention
    makes it) on CuPy's current stream, the maps encoded here, outside the timed call. Rung 6 also
    takes the heads (batch x heads), to number its items."""
    from cupy.cuda import get_current_stream

    from ..driver import F32, I32, MAP as MAP_PARAM, PTR, PackedLaunch
    from ..launch import function_handle

    kinds = (MAP_PARAM, MAP_PARAM, MAP_PARAM, PTR, PTR, I32, I32, F32, I32) + ((I32,) if persistent else ())
    packed = PackedLaunch(function_handle(func), launch.grid, launch.block, launch.shared, kinds,
                          device.index if device is not None else 0)
    encoders = [tensor_map_encoder(tile_box(p, rows), p.dtype) for rows in (p.sq, p.sk, p.sk)]
    packed.kept = [enc.keep(a.data.ptr) for enc, a in zip(encoders, (ws.q, ws.k, ws.v))]
    for i, (address, _) in enumerate(packed.kept):
        packed.params[i] = address
    for i, value in enumerate(ws.args()[3:] + ((np.int32(p.bh),) if persistent else ()), start=3):
        packed.values[i].value = value.item() if isinstance(value, np.generic) else value.data.ptr
    return lambda: packed.launch(get_current_stream().ptr)


def _sdpa(ws: Workspace):
    """torch.nn.functional.scaled_dot_product_attention on tensors over the workspace's arrays
    (batch x heads as one dimension; the backend PyTorch picks)."""
    import torch.nn.functional as F

    q, k, v = (torch_view(a, ws.p.dtype).unsqueeze(0) for a in (ws.q, ws.k, ws.v))  # (1, bh, s, d): 4-D, as the
    causal = ws.p.causal                                                               # flash and cuDNN backends take
    return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def cupy_probabilities(q, k, scale: float, causal: bool):
    """softmax(scale q k^T [causal]) of (bh, s, d) fp32 CuPy arrays, batched, the probabilities in
    memory (the CuPy references' first half)."""
    import cupy

    s = cupy.matmul(q, k.transpose(0, 2, 1)) * scale
    if causal:
        s[:, cupy.arange(k.shape[1])[None, :] > cupy.arange(q.shape[1])[:, None]] = -cupy.inf
    e = cupy.exp(s - s.max(axis=2, keepdims=True))
    return e / e.sum(axis=2, keepdims=True)


def _cupy_fp32(ws: Workspace):
    """The formula in CuPy, fp32 (cuBLAS's batched products, the scores in memory): what a user without
    PyTorch would write. Its fp32 copies of Q, K, V are made here, outside the timed call."""
    import cupy

    p = ws.p
    q, k, v = (load(a, p.dtype) for a in (ws.q, ws.k, ws.v))
    return lambda: cupy.matmul(cupy_probabilities(q, k, ws.scale, p.causal), v)


def references() -> list[Reference]:
    # (SDPA first where PyTorch is installed: the first reference is the "% of" column's)
    return torch_reference("PyTorch SDPA", _sdpa) + [Reference("CuPy fp32 (scores in memory)", _cupy_fp32,
                                                               verifiable=False)]


# --- the public operator (simtlab.attention) --------------------------------------------------------

LOG2E = 1.4426950408889634


def _declare(shapes, dtype, options, device, vec, build) -> Declared:
    """(batch, heads, sequence, head dim) Q, K, V as SDPA takes them: rung 6 (rung 5's warp-specialised
    TMA and wgmma in persistent blocks) on Hopper and rung 3 (mma.sync) on other GPUs from sm_80 where their 16-byte copies
    can read the operands, else rung 2; head dims 64 and 128."""
    qs, ks, vs = shapes
    if len(qs) != 4 or len(ks) != 4 or ks != vs:
        raise ValueError(f"simtlab.attention takes q (batch, heads, sq, d) and k, v (batch, heads, sk, d) of one shape;"
                         f" got {qs}, {ks}, {vs}")
    if qs[:2] != ks[:2] or qs[3] != ks[3]:
        raise ValueError(f"simtlab.attention: q {qs} and k {ks} differ in batch, heads or head dim")
    b, h, sq, d = qs
    sk = ks[2]
    if d not in HEAD_DIMS:
        raise ValueError(f"simtlab.attention: head dim {d}; the kernels are built for {', '.join(map(str, HEAD_DIMS))}")
    p = AttentionProblem(max(b * h, 1), max(sq, 1), max(sk, 1), d, dtype, bool(options.get("causal", False)))
    scale = options.get("scale")
    scale = scale_of(p) if scale is None else float(scale)
    outputs = ((qs, dtype), ((b, h, sq), "float32"))
    common = ((IN, 0), (IN, 1), (IN, 2), (OUT, 0), (OUT, 1), np.int32(p.sq), np.int32(p.sk))
    maps = ()
    if vec and tuple(device.compute_capability) == (9, 0):  # (Hopper: TMA, warpgroup MMAs)
        # full: rung 6's persistent blocks (run 26985ff: 1.02x rung 5 at 16x4096, its table's rows 0.99-1.09x
        # rung 5's of run c4799c8); causal: rung 5, whose blocks the hardware hands out as SMs free up
        # (rung 6's fixed stride left causal items unbalanced: 0.81x rung 5 at 4x16384, the same run)
        rung = FAMILY.rung(5 if p.causal else 6)
        params = rung.params(device.arch, head_params(p))
        maps = tuple(map_arg((IN, i), tile_box(p, rows), dtype) for i, rows in enumerate((p.sq, p.sk, p.sk)))
        args = ((MAP, 0), (MAP, 1), (MAP, 2), *common[3:], np.float32(scale * LOG2E), np.int32(p.causal))
        step = Step(rung, params, geometry_ws(params, p), args) if p.causal else \
            Step(rung, params, geometry_persistent(params, p, device), (*args, np.int32(p.bh)))
    elif vec and tuple(device.compute_capability) >= (8, 0):
        rung = FAMILY.rung(3)
        params = rung.params(device.arch, head_params(p))
        step = Step(rung, params, geometry_mma(params, p), (*common, np.float32(scale * LOG2E), np.int32(p.causal)))
    else:  # (an operand off 16 bytes: rung 2's element loads)
        rung = FAMILY.rung(2)
        params = rung.params(device.arch, head_params(p))
        step = Step(rung, params, geometry_fused(params, p), (*common, np.float32(scale), np.int32(p.causal)))
    return Declared(outputs, (step,), f"{p.label}: {rung.id}", vec=vec, align=16, maps=maps)


OPERATORS = (Operator("attention", ("q", "k", "v"), tuple(DT), _declare),)


FAMILY = Family(
    name="attention",
    title="fused attention, softmax(scale Q K^T) V, bf16/fp16 in, fp32 statistics",
    ops=sys.modules[__name__],
    reference="PyTorch scaled_dot_product_attention (the backend it picks); CuPy's fp32 formula",
    default_sizes=("16x4096x128", "16x4096x128:causal"),
    rungs=(
        Rung("attention", 1, "naive", "attention/01_naive.cu", "attention_naive", ("DT",), frozen({"DT": 1}),
             "three launches, the sq x sk scores in memory: written once, read three times",
             geometry_naive, size_defaults=dtype_params, traffic=naive_bytes, sass_expect=("LDS", "BAR")),
        Rung("attention", 2, "fused", "attention/02_fused.cu", "attention_fused", ("DT", "D"),
             frozen({"DT": 1, "D": 128}), "one launch, an online softmax: the scores never leave the SM",
             geometry_fused, size_defaults=head_params, sass_expect=("SHFL",),
             traffic=functools.partial(requested_bytes, rows=FUSED_BQ)),
        Rung("attention", 3, "mma", "attention/03_mma.cu", "attention_mma", ("DT", "D"), frozen({"DT": 1, "D": 128}),
             "both products on the tensor cores, Q in registers, a warp's rows whole (FlashAttention-2's split)",
             geometry_mma, size_defaults=head_params, min_cc=(8, 0), sass_expect=("HMMA", "LDSM", "LDGSTS")),
        Rung("attention", 4, "wgmma", "attention/04_wgmma.cu", "attention_wgmma", ("DT", "D"),
             frozen({"DT": 1, "D": 128}),
             "Hopper's warpgroup MMAs read Q, K and V from swizzled shared memory; P stays in registers",
             geometry_wgmma, size_defaults=head_params, min_cc=(9, 0), arch_specific=True,
             sass_expect=("HGMMA", "LDGSTS"), traffic=functools.partial(requested_bytes, rows=WGMMA_BQ)),
        Rung("attention", 5, "warp_specialized", "attention/05_warp_specialized.cu", "attention_ws", ("DT", "D"),
             frozen({"DT": 1, "D": 128}),
             "a TMA producer warpgroup and two consumers taking turns at the tensor cores: one's softmax runs "
             "while the other's products do (FlashAttention-3's schedule)",
             geometry_ws, size_defaults=head_params, min_cc=(9, 0), arch_specific=True,
             sass_expect=("HGMMA", "UTMALDG", "SYNCS", "USETMAXREG"),
             traffic=functools.partial(requested_bytes, rows=WGMMA_BQ)),
        Rung("attention", 6, "persistent", "attention/06_persistent.cu", "attention_persistent", ("DT", "D"),
             frozen({"DT": 1, "D": 128}),
             "one block an SM walking query blocks: the next one's Q and K, V load while this one's last "
             "products and stores run",
             geometry_persistent, size_defaults=head_params, min_cc=(9, 0), arch_specific=True,
             sass_expect=("HGMMA", "UTMALDG", "SYNCS", "USETMAXREG"),
             traffic=functools.partial(requested_bytes, rows=WGMMA_BQ)),
    ),
    check_size="3x77x130x64:causal",
    operators=OPERATORS,
)
