"""Triton matmuls, the second reference a Python user would reach for: one kernel, autotuned twice
over tile shapes per size - fp32 in IEEE precision (no TF32) for the fp32 GEMM ladder, and fp16 or
bf16 (or fp32 as TF32) on the tensor cores with fp32 sums and an fp32, fp16 or bf16 C (batched)
for the tensor-core ladder. Needs Triton and PyTorch (both on the H200 image), imported only when
used."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

_SHAPES = ((128, 128, 32, 8, 3), (128, 256, 16, 8, 3), (256, 128, 16, 8, 3),
           (128, 128, 16, 4, 4), (64, 128, 32, 4, 4), (128, 64, 32, 4, 4))
_TC_SHAPES = ((128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 128, 64, 4, 4), (128, 128, 64, 8, 4),
              (64, 256, 64, 4, 4), (128, 64, 64, 4, 4))
_TF32_SHAPES = tuple((m, n, 32, w, s) for m, n, _, w, s in _TC_SHAPES)  # 4-byte inputs: half the k per stage


@triton.jit
def _matmul(a_ptr, b_ptr, c_ptr, M, N, K, alpha, beta,
            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
            HAS_BETA: tl.constexpr, PRECISION: tl.constexpr):
    """C = alpha * A @ B (+ beta * C), row-major; the batch in the grid's second dimension."""
    pid, z = tl.program_id(0), tl.program_id(1)
    a_ptr += z.to(tl.int64) * M * K
    b_ptr += z.to(tl.int64) * K * N
    c_ptr += z.to(tl.int64) * M * N
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    rows = tl.minimum(tiles_m - first_m, GROUP_M)
    pm = first_m + (pid % per_group) % rows
    pn = (pid % per_group) // rows
    offs_m = pm * BM + tl.arange(0, BM)
    offs_n = pn * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * K + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * N + offs_n[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, tl.cdiv(K, BK)):
        kk = k0 * BK + offs_k
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptrs, mask=(kk[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        if PRECISION == "default":  # (fp16 / bf16 inputs, or fp32 as TF32)
            acc = tl.dot(a, b, acc)
        else:  # fp32 inputs: "ieee" (fp32 FMAs) or "tf32x3" (three TF32 products on the tensor cores)
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BK
        b_ptrs += BK * N
    acc = acc * alpha
    c_ptrs = c_ptr + offs_m[:, None] * N + offs_n[None, :]
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    if HAS_BETA:
        acc += beta * tl.load(c_ptrs, mask=mask, other=0.0)
    tl.store(c_ptrs, acc, mask=mask)


def _tuned(shapes, key, **kw):
    configs = [triton.Config({"BM": m, "BN": n, "BK": k, "GROUP_M": 8}, num_warps=w, num_stages=s)
               for m, n, k, w, s in shapes]
    return triton.autotune(configs=configs, key=key, **kw)(_matmul)


# benchmarking configs must not accumulate into C when beta != 0
_sgemm = _tuned(_SHAPES, ["M", "N", "K", "HAS_BETA"], restore_value=["c_ptr"])
_tc_gemm = _tuned(_TC_SHAPES, ["M", "N", "K"])
_tf32_gemm = _tuned(_TF32_SHAPES, ["M", "N", "K"])  # tl.dot's default precision for fp32 inputs: TF32
_tf32x3_gemm = _tuned(_TF32_SHAPES, ["M", "N", "K", "HAS_BETA"], restore_value=["c_ptr"])


def _launch(kernel, a, b, c, alpha: float, beta: float, precision: str):
    M, K = a.shape[-2:]
    N = b.shape[-1]
    batch = a.shape[0] if a.dim() == 3 else 1

    def grid(meta):
        return (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]), batch)

    def run():
        kernel[grid](a, b, c, M, N, K, float(alpha), float(beta), HAS_BETA=beta != 0, PRECISION=precision)

    return run


def triton_sgemm_runner(A, B, C, alpha: float, beta: float):
    """A callable computing C = alpha*A@B + beta*C on CuPy fp32 arrays (zero-copy through DLPack)."""
    return _launch(_sgemm, torch.from_dlpack(A), torch.from_dlpack(B), torch.from_dlpack(C), alpha, beta, "ieee")


def triton_tf32x3_runner(A, B, C, alpha: float = 1.0, beta: float = 0.0):
    """C = alpha*A@B + beta*C with tl.dot's "tf32x3" (3xTF32 on the tensor cores), on PyTorch fp32
    tensors or CuPy arrays (zero-copy): the Triton call a user would make for fp32 accuracy there."""
    a, b, c = (x if isinstance(x, torch.Tensor) else torch.from_dlpack(x) for x in (A, B, C))
    return _launch(_tf32x3_gemm, a, b, c, alpha, beta, "tf32x3")


def triton_tc_gemm_runner(A, B, C, dtype: str, out: str = "float32"):
    """C = A @ B for fp16 inputs, bf16 held as uint16 bits (viewed as torch.bfloat16, no copy), or
    fp32 inputs multiplied as TF32; C in fp32, or fp16 / bf16 (`out`, bf16 again as uint16 bits;
    the fp32 accumulators rounded as they are stored); A, B, C may carry a leading batch dimension."""
    a, b, c = torch.from_dlpack(A), torch.from_dlpack(B), torch.from_dlpack(C)
    if dtype == "bfloat16":
        a, b = a.view(torch.bfloat16), b.view(torch.bfloat16)
    if out == "bfloat16":
        c = c.view(torch.bfloat16)
    return _launch(_tf32_gemm if dtype == "float32" else _tc_gemm, a, b, c, 1.0, 0.0, "default")
