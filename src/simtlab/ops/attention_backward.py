"""Attention's backward: dQ, dK, dV of O = softmax(scale Q K^T [+ causal mask]) V given dO, for
bf16 or fp16 tensors with fp32 statistics, beside PyTorch's SDPA backward.

The problem is the forward's (`simtlab.ops.attention`: Q, O, dO, dQ (bh, sq, d); K, V, dK, dV
(bh, sk, d); the forward's log-sum-exp (bh, sq) fp32), written 'BHxSxD' or 'BHxSQxSKxD' with
':fp16' and ':causal' tags. Every rung recomputes the probabilities from the log-sum-exp (no sq x
sk matrix is kept from the forward): P = exp(scale S - LSE), dV = P^T dO, dP = dO V^T,
dS = P (dP - D) with D = rowsum(dO O), dQ = scale dS K, dK = scale dS^T Q. Verified against the
float64 gradients of the same rounded inputs, each gradient's error relative to its own norm.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass

import numpy as np

from ..family import IN, OUT, SCRATCH, Declared, Family, Operator, Rung, Step, frozen
from ..launch import Launch
from ..verify import UNIT_ROUNDOFF, dot_tolerance
from . import attention as forward
from .base import ITEMSIZE, Reference, torch_reference
from .rows import load, store, torch_view

DTYPE = forward.DTYPE
DT = forward.DT
HEAD_DIMS = forward.HEAD_DIMS
BQ = 64  # query rows a step of rung 1's walk (the kernels' BWD_BQ): the statistics are padded to it
LOG2E = forward.LOG2E


@dataclass(frozen=True)
class BackwardProblem(forward.AttentionProblem):
    @property
    def flops(self) -> int:
        """Five products of the visible pairs (S and dP recomputed, dV, dK, dQ): 2.5x the forward's,
        the convention of FlashAttention's and PyTorch's benchmarks."""
        return 10 * self.bh * self.pairs * self.d

    @property
    def bytes(self) -> int:
        """Q, O, dO read and dQ written (sq rows), K, V read and dK, dV written (sk rows), the LSE."""
        item = ITEMSIZE[self.dtype]
        return self.bh * (4 * item * self.d * (self.sq + self.sk) + 4 * self.sq)


def parse_size(text: str, **_) -> BackwardProblem:
    """As the forward's: 'BHxSxD' or 'BHxSQxSKxD', then ':bf16' / ':fp16' and ':causal'."""
    p = forward.parse_size(text)
    return BackwardProblem(p.bh, p.sq, p.sk, p.d, p.dtype, p.causal)


def padded(sq: int) -> int:
    """Query rows rounded up to rung 1's step: the length of its statistics and dQ sums per head."""
    return -(-sq // BQ) * BQ


def tolerance(p: BackwardProblem, ws=None) -> float:
    """Each gradient's norm-wise error (the three joined, each scaled by its reference's norm): P
    and dS rounded to the storage type before their products (a unit each), the output rounded
    once, O's rounding in D = rowsum(dO O); fp32 sums over d and over the longer length; 2x margin.
    (A NumPy emulation of this arithmetic lands at 0.2-0.3% a gradient for bf16.)"""
    u = UNIT_ROUNDOFF[p.dtype]
    return 2 * (3 * u + dot_tolerance("float32", p.d) + dot_tolerance("float32", max(p.sq, p.sk)))


def unsupported(rung, p: BackwardProblem) -> str | None:
    if p.d not in HEAD_DIMS:
        return f"rung {rung.stage} is built for head dims {', '.join(map(str, HEAD_DIMS))}, not {p.d}"
    return None


BKV = 64  # rung 1's keys a block


def mma_shared(d: int) -> int:
    """Rung 1's dynamic shared memory: K and V (BKV rows), Q and dO (BQ rows), rows padded by 8
    elements; P^T and dS^T (BKV x BQ + 8); the step's LSE and D."""
    return ((2 * BKV + 2 * BQ) * (d + 8) + 2 * BKV * (BQ + 8)) * 2 + 2 * BQ * 4


def geometry_mma(params, p: BackwardProblem, device=None) -> Launch:
    return Launch((-(-p.sk // BKV), p.bh, 1), (256, 1, 1), mma_shared(params["D"]))


WGMMA_BKV = 128  # rung 2's keys a block (two warpgroups)


def wgmma_shared(d: int, slots: int) -> int:
    """Rung 2's dynamic shared memory: K and V (128 rows), `slots` slots of Q and dO (64 rows), all in
    128-byte rows; dS^T (128 x 64); `slots` slots of the step's LSE and D; 1 KiB to align to the swizzle."""
    return (2 * WGMMA_BKV + 2 * slots * BQ) * d * 2 + WGMMA_BKV * BQ * 2 + slots * 2 * BQ * 4 + 1024


def geometry_wgmma(params, p: BackwardProblem, device=None) -> Launch:
    return Launch((-(-p.sk // WGMMA_BKV), p.bh, 1), (256, 1, 1), wgmma_shared(params["D"], params["SLOTS"]))


def head_params(p: BackwardProblem, device=None, vec=None) -> dict:
    return {"DT": DT[p.dtype], "D": p.d}


def requested_bytes(params, p: BackwardProblem, keys: int = BKV) -> int:
    """Rungs 1-2: K and V read once a key block (of `keys`); Q, dO and the statistics once for every
    key block that walks their query block (causal: about half); dQ's fp32 sums added to once a walk
    step (read and written in L2) and zeroed, read and converted; O and dO read for D; dK, dV, dQ
    written."""
    item = ITEMSIZE[p.dtype]
    blocks, steps = -(-p.sk // keys), -(-p.sq // BQ)
    walks = blocks * steps if not p.causal else max(1, blocks * steps // 2)
    per_step = 2 * item * BQ * p.d + 8 * BQ + 8 * BQ * p.d
    once = 4 * item * p.sk * p.d + 3 * item * p.sq * p.d + 8 * padded(p.sq) * p.d + 12 * padded(p.sq)
    return p.bh * (once + walks * per_step)


def _prep_launch(p: BackwardProblem) -> tuple:
    rows = p.bh * padded(p.sq)
    return (min(-(-rows // 8), 65535 * 4), 1, 1), (256, 1, 1)  # (a warp a row)


def _dq_launch(p: BackwardProblem) -> tuple:
    quads = p.bh * p.sq * p.d // 4
    return (max(1, min(-(-quads // 256), 65535 * 8)), 1, 1), (256, 1, 1)


class Workspace:
    """Q, K, V and dO uniform in [-2, 2) in the problem's type (the forward's draw); O and the LSE
    from an fp32 forward on the device (O rounded to the type, as a forward kernel leaves it); dQ,
    dK, dV, and rung 1's statistics and dQ sums."""

    def __init__(self, p: BackwardProblem, seed: int):
        import cupy

        self.p = p
        rng = cupy.random.default_rng(seed)

        def draw(rows):
            return store((rng.random((p.bh, rows, p.d), dtype=cupy.float32) * 2 - 1) * 2, p.dtype)

        self.q, self.k, self.v, self.do = draw(p.sq), draw(p.sk), draw(p.sk), draw(p.sq)
        self.scale = forward.scale_of(p)
        self.o = cupy.empty_like(self.q)
        self.lse = cupy.empty((p.bh, p.sq), dtype=cupy.float32)
        self.refresh_forward()
        self.dq, self.dk, self.dv = cupy.empty_like(self.q), cupy.empty_like(self.k), cupy.empty_like(self.v)
        sqp = padded(p.sq)
        self.stats = cupy.empty((p.bh, 2, sqp), dtype=cupy.float32)
        self.dq_sums = cupy.empty((p.bh, sqp, p.d), dtype=cupy.float32)

    def refresh_forward(self) -> None:
        """O and the LSE of the current Q, K, V (after an edit of the inputs): an fp32 forward a head
        at a time (sq x sk scores), O rounded to the storage type as a forward kernel leaves it."""
        import cupy

        p = self.p
        for h in range(p.bh):
            prob, lse = self._softmax(h, cupy.float32)
            self.o[h] = store(prob @ load(self.v[h], p.dtype), p.dtype)
            self.lse[h] = lse
        self._norms = None

    def _softmax(self, h: int, dtype):
        """Head h's probabilities softmax(scale q k^T [causal]) and each row's log-sum-exp, in `dtype`."""
        import cupy

        p = self.p
        qh, kh = (load(a[h], p.dtype).astype(dtype) for a in (self.q, self.k))
        s = (qh @ kh.T) * self.scale
        if p.causal:
            s[cupy.arange(p.sk)[None, :] > cupy.arange(p.sq)[:, None]] = -cupy.inf
        m = s.max(axis=1, keepdims=True)
        e = cupy.exp(s - m)
        total = e.sum(axis=1, keepdims=True)
        return e / total, (m + cupy.log(total))[:, 0]

    def poison(self) -> None:
        value = 0x7FC0 if self.p.dtype == "bfloat16" else np.float16(np.nan)
        for a in (self.dq, self.dk, self.dv):
            a.fill(value)

    def _reference(self):
        """float64 dQ, dK, dV, a head at a time."""
        import cupy

        p = self.p
        grads = [cupy.empty((p.bh, n, p.d), dtype=cupy.float64) for n in (p.sq, p.sk, p.sk)]
        for h in range(p.bh):
            prob, _ = self._softmax(h, cupy.float64)
            qh, kh, vh, doh = (load(a[h], p.dtype).astype(cupy.float64) for a in (self.q, self.k, self.v, self.do))
            dp = doh @ vh.T
            ds = prob * (dp - (prob * dp).sum(axis=1, keepdims=True))
            grads[0][h], grads[1][h], grads[2][h] = self.scale * ds @ kh, self.scale * ds.T @ qh, prob.T @ doh
        return grads

    def _joined(self, parts):
        import cupy

        return cupy.concatenate([part.ravel() / n for part, n in zip(parts, self._norms)])

    def expected(self):
        """The three gradients joined, each divided by its own norm - or by a tenth of the three's
        joined norm where it is smaller: a row that sees one key has dQ and dK exactly zero (its
        dS = dP - D cancels), and the kernel's fp32 sums leave noise there that no relative error
        of a zero measures."""
        import cupy

        ref = self._reference()
        joined = float(cupy.sqrt(sum(cupy.linalg.norm(part) ** 2 for part in ref)))
        self._norms = [max(float(cupy.linalg.norm(part)), 0.1 * joined, 1e-30) for part in ref]
        return self._joined(ref)

    def output(self):
        if self._norms is None:
            self.expected()
        return self._joined([load(a, self.p.dtype).astype("float64") for a in (self.dq, self.dk, self.dv)])


def workspace(p: BackwardProblem, seed: int) -> Workspace:
    return Workspace(p, seed)


def _steps_args(p: BackwardProblem, scale: float, q, k, v, o, do, lse, stats, sums, dq, dk, dv) -> tuple:
    """Rung 1's three launches' arguments, in order: the statistics (and the sums zeroed), the walk,
    dQ from its sums (what the runner and the operator both pass)."""
    sqp, dt = padded(p.sq), np.int32(DT[p.dtype])
    prep = (o, do, lse, stats, sums, np.int32(p.bh), np.int32(p.sq), np.int32(sqp), np.int32(p.d), dt)
    walk = (q, k, v, do, stats, sums, dk, dv, np.int32(p.sq), np.int32(p.sk), np.int32(sqp),
            np.float32(scale * LOG2E), np.float32(scale), np.int32(p.causal))
    dq_args = (sums, dq, np.int32(p.bh), np.int32(p.sq), np.int32(sqp), np.int32(p.d), np.float32(scale), dt)
    return prep, walk, dq_args


def make_runner(inst, problem: BackwardProblem, ws: Workspace, device, vec, prepare):
    """Rung 1: three launches of its module - the statistics, the walk over the key blocks, dQ."""
    p = problem
    launch = inst.geometry(p, device)
    walk_fn = prepare(inst, launch, vec, device)
    module = inst.module()
    prep_fn, dq_fn = module.get_function("attention_bwd_prep"), module.get_function("attention_bwd_dq")
    prep, walk, dq_args = _steps_args(p, ws.scale, ws.q, ws.k, ws.v, ws.o, ws.do, ws.lse, ws.stats, ws.dq_sums,
                                      ws.dq, ws.dk, ws.dv)
    (prep_grid, prep_block), (dq_grid, dq_block) = _prep_launch(p), _dq_launch(p)

    def run():
        prep_fn(prep_grid, prep_block, prep)
        walk_fn(launch.grid, launch.block, walk, shared_mem=launch.shared)
        dq_fn(dq_grid, dq_block, dq_args)

    return run


def backward_of(attend):
    """A reference maker: the backward of `attend(q, k, v, causal)` on (1, bh, s, d) tensors over the
    workspace's arrays as a training step asks for it - the forward run here, outside the timed
    call, then torch.autograd.grad of dO through its output (retain_graph)."""
    def make(ws: Workspace):
        import torch

        q, k, v = (torch_view(a, ws.p.dtype).unsqueeze(0).clone().requires_grad_() for a in (ws.q, ws.k, ws.v))
        do = torch_view(ws.do, ws.p.dtype).unsqueeze(0)
        out = attend(q, k, v, ws.p.causal)
        return lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True)

    return make


def _sdpa(q, k, v, causal: bool):
    """torch.nn.functional.scaled_dot_product_attention (the backend PyTorch picks)."""
    import torch.nn.functional as F

    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def _cupy_fp32(ws: Workspace):
    """The gradients in CuPy, fp32 (cuBLAS's batched products, the probabilities in memory): what a
    user without PyTorch would write. Its fp32 copies of the inputs are made here."""
    import cupy

    p = ws.p
    q, k, v, do = (load(a, p.dtype) for a in (ws.q, ws.k, ws.v, ws.do))

    def run():
        prob = forward.cupy_probabilities(q, k, ws.scale, p.causal)
        dp = cupy.matmul(do, v.transpose(0, 2, 1))
        ds = prob * (dp - (prob * dp).sum(axis=2, keepdims=True))
        return (cupy.matmul(ds, k) * ws.scale, cupy.matmul(ds.transpose(0, 2, 1), q) * ws.scale,
                cupy.matmul(prob.transpose(0, 2, 1), do))

    return run


def references() -> list[Reference]:
    return torch_reference("PyTorch SDPA backward", backward_of(_sdpa)) + [
        Reference("CuPy fp32 (probabilities in memory)", _cupy_fp32, verifiable=False)]


# --- the public operator (simtlab.attention's gradient) ---------------------------------------------

def _declare(shapes, dtype, options, device, vec, build) -> Declared:
    """q, k, v, the forward's output, its gradient (all (batch, heads, sequence, head dim)) and the
    forward's log-sum-exp (batch, heads, sq) fp32 -> dq, dk, dv: three launches - the statistics, the
    walk over key blocks (rung 2's warpgroup MMAs on Hopper, 1.9x rung 1 there; rung 1 elsewhere), dQ."""
    qs, ks, vs, os_, gs, ls = shapes
    if len(qs) != 4 or ks != vs or len(ks) != 4 or qs[:2] != ks[:2] or qs[3] != ks[3]:
        raise ValueError(f"simtlab.attention backward: q {qs}, k {ks}, v {vs} are not (batch, heads, sequence, "
                         "head dim) of one batch, heads and head dim")
    if os_ != qs or gs != qs or ls != qs[:3]:
        raise ValueError(f"simtlab.attention backward: out {os_} and its gradient {gs} must have q's shape {qs}, "
                         f"the log-sum-exp {ls} must be {qs[:3]}")
    if not vec:
        raise ValueError("simtlab.attention backward: the kernels copy 16 bytes at a time; pass arrays whose "
                         "addresses are multiples of 16 bytes")
    b, h, sq, d = qs
    if d not in HEAD_DIMS:
        raise ValueError(f"simtlab.attention: head dim {d}; the kernels are built for {', '.join(map(str, HEAD_DIMS))}")
    p = BackwardProblem(max(b * h, 1), max(sq, 1), max(ks[2], 1), d, dtype, bool(options.get("causal", False)))
    scale = options.get("scale")
    scale = forward.scale_of(p) if scale is None else float(scale)
    hopper = tuple(device.compute_capability) == (9, 0)
    rung, geometry = (FAMILY.rung(2), geometry_wgmma) if hopper else (FAMILY.rung(1), geometry_mma)
    params = rung.params(device.arch, head_params(p))
    sqp = padded(p.sq)
    prep, walk, dq_args = _steps_args(p, scale, (IN, 0), (IN, 1), (IN, 2), (IN, 3), (IN, 4), (IN, 5),
                                      (SCRATCH, 0), (SCRATCH, 1), (OUT, 0), (OUT, 1), (OUT, 2))
    steps = (Step(rung, params, Launch(*_prep_launch(p)), prep, function="attention_bwd_prep"),
             Step(rung, params, geometry(params, p), walk),
             Step(rung, params, Launch(*_dq_launch(p)), dq_args, function="attention_bwd_dq"))
    outputs = ((qs, dtype), (ks, dtype), (ks, dtype))
    scratch = (((p.bh * 2 * sqp,), "float32"), ((p.bh * sqp * d,), "float32"))
    return Declared(outputs, steps, f"{p.label} backward: {rung.id} (statistics, the walk over key blocks, dQ)",
                    scratch=scratch, align=16)


OPERATORS = (Operator("attention_backward", ("q", "k", "v", "out", "grad", "lse"), tuple(DT), _declare,
                      typed=frozen({"lse": "float32"})),)


FAMILY = Family(
    name="attention_backward",
    title="attention's backward, dQ dK dV from the log-sum-exp, bf16/fp16 in, fp32 sums",
    ops=sys.modules[__name__],
    reference="PyTorch SDPA's backward (the backend it picks); CuPy's fp32 formula",
    default_sizes=("16x4096x128", "16x4096x128:causal"),
    rungs=(
        Rung("attention_backward", 1, "mma", "attention_backward/01_mma.cu", "attention_bwd_mma", ("DT", "D"),
             frozen({"DT": 1, "D": 128}),
             "FlashAttention-2's backward: a block's keys walk the queries, dK and dV in registers, dQ by fp32 atomics",
             geometry_mma, size_defaults=head_params, min_cc=(8, 0), sass_expect=("HMMA", "LDSM", "LDGSTS", "REDG|RED")),
        Rung("attention_backward", 2, "wgmma", "attention_backward/02_wgmma.cu", "attention_bwd_wgmma",
             ("DT", "D", "SLOTS"), frozen({"DT": 1, "D": 128, "SLOTS": 3}),
             "all five products on Hopper's warpgroup MMAs from swizzled shared memory; P^T and dS^T as register "
             "operands (no ldmatrix)",
             geometry_wgmma, size_defaults=head_params, min_cc=(9, 0), arch_specific=True,
             sass_expect=("HGMMA", "LDGSTS", "REDG|RED"),
             traffic=functools.partial(requested_bytes, keys=WGMMA_BKV)),
    ),
    check_size="3x77x130x64:causal",
    operators=OPERATORS,
)
