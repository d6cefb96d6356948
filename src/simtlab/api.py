"""Python entry points for using the kernels directly."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .catalog import family
from .launch import build, choose_params, prepare
from .ops.base import require_cupy_array
from .ops.gemm import GemmProblem

__all__ = ["gemm", "gemm_tc"]


@lru_cache(maxsize=64)
def _instance(rung_name: str, params: tuple | None, arch: str, fam: str = "gemm"):
    return build(family(fam).rung(rung_name), dict(params) if params else None, arch)


@lru_cache(maxsize=256)
def _params(rung_name: str, problem: GemmProblem, vec: bool | None, device) -> tuple | None:
    """Launch parameters for a problem: the results store's best, else size defaults (cached per shape)."""
    from .store import Store, default_path

    rung = family("gemm").rung(rung_name)
    store = None
    if rung.from_store and default_path().exists():
        try:
            store = Store(default_path())
        except Exception:  # an unreadable store must not stop a matrix product
            store = None
    params = choose_params(rung, problem, device, vec, store)
    if store is not None:
        store.close()
    return tuple(sorted(params.items())) if params else None


KAHAN_PARAMS = (("KAHAN", 1), ("MINB", 1))  # compensated sums need twice the accumulators: one block per SM


def gemm(A, B, C=None, alpha: float = 1.0, beta: float = 0.0, rung: str | int = "best", kahan: bool = False):
    """C = alpha * A @ B + beta * C in fp32 with one of simtlab's GEMM rungs.

    A (MxK), B (KxN) and C (MxN) are C-contiguous float32 GPU arrays: CuPy
    arrays or PyTorch CUDA tensors (used in place, zero-copy). With C=None a
    new C is allocated (beta must then be 0). Returns C, of the type of A.
    `rung="best"` picks the tuned rung where cp.async exists (sm_80+), else
    the warp-tiled one; any rung name or stage number works too. `kahan=True`
    accumulates with Kahan compensation (the warp-tiled rung's KAHAN option):
    an error that stays near one rounding however long K is, for ~3x the time.
    """
    import cupy

    from .device import device_info, require_gpu

    require_gpu()
    a = require_cupy_array(A, "A", cupy.float32, 2)
    b = require_cupy_array(B, "B", cupy.float32, 2)
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: A is {a.shape}, B is {b.shape} (need A.shape[1] == B.shape[0])")
    if a.device.id != b.device.id:
        raise ValueError(f"A is on GPU {a.device.id} and B on GPU {b.device.id}")
    M, K = a.shape
    N = b.shape[1]
    if min(M, N, K) < 1:
        raise ValueError(f"GEMM sizes must be >= 1, got M={M}, N={N}, K={K}")
    if C is None:
        if beta != 0:
            raise ValueError("beta != 0 needs an input C")
        try:
            c = cupy.empty((M, N), dtype=cupy.float32)
        except cupy.cuda.memory.OutOfMemoryError:
            free, total = cupy.cuda.runtime.memGetInfo()
            raise MemoryError(f"C ({M}x{N} float32, {4 * M * N / 2**30:.2f} GiB) does not fit on GPU "
                              f"{cupy.cuda.Device().id}: {free / 2**30:.2f} GiB free of {total / 2**30:.1f} GiB") from None
    else:
        c = require_cupy_array(C, "C", cupy.float32, 2)
        if c.shape != (M, N):
            raise ValueError(f"C has shape {c.shape}; A @ B is ({M}, {N})")
    dev = device_info()
    name = rung
    if kahan:
        if rung not in ("best", "warptiling", 8, "8", "warptile"):
            raise ValueError(f"kahan=True is an option of the warptiling rung (8), not of rung {rung!r}")
        name = "warptiling"
    elif rung == "best":
        name = "tuned" if dev.compute_capability >= (8, 0) else "warptiling"
    rung = family("gemm").rung(name)
    problem = GemmProblem(M, N, K, float(alpha), float(beta))
    vec = None
    if rung.vec_variant:
        vec = K % 4 == 0 and N % 4 == 0 and all(x.data.ptr % 16 == 0 for x in (a, b, c))
    params = _params(rung.name, problem, vec, dev)
    if kahan:
        params = tuple(sorted({**dict(params or ()), **dict(KAHAN_PARAMS)}.items()))
    inst = _instance(rung.name, params, dev.arch)
    launch = inst.geometry(problem, dev)
    func = prepare(inst, launch, vec, dev)
    func(launch.grid, launch.block,
         (np.int32(M), np.int32(N), np.int32(K), np.float32(alpha), a, b, np.float32(beta), c),
         shared_mem=launch.shared)
    if C is not None:
        return C
    if type(A).__module__.startswith("torch"):
        import torch

        return torch.from_dlpack(c)
    return c


# --- tensor cores ------------------------------------------------------------------------------

def _view(x, name: str):
    """(CuPy view, element type name) of a GPU array: PyTorch bfloat16 tensors as their int16 bits
    (CuPy has no bfloat16; the kernels only see a pointer)."""
    if type(x).__module__.startswith("torch"):
        import torch

        if x.dtype == torch.bfloat16:
            return require_cupy_array(x.view(torch.int16), name), "bfloat16"
    arr = require_cupy_array(x, name)
    return arr, arr.dtype.name


def gemm_tc(A, B, C=None, out_dtype: str = "float32", rung: str | int = "best"):
    """C = A @ B on the tensor cores: fp16 or bf16 inputs, fp32 sums, C in fp32 or the inputs' type.

    A (MxK) and B (KxN), or batches of them (BATCHxMxK, BATCHxKxN), C-contiguous on the GPU: CuPy
    float16 arrays or PyTorch float16 / bfloat16 tensors (zero-copy), both of one type. C is
    allocated when None (a PyTorch tensor if A is one), else written in place; `out_dtype` is
    "float32" or the inputs' own type ("float16", "bfloat16": the sums rounded to nearest).
    `rung="best"` takes rung 6 (Hopper clusters, sm_90) where it runs, else rung 3 (mma.sync,
    sm_80+); any rung name or stage works too. K or N not multiples of 8 run on padded copies.
    """
    import cupy

    from .device import device_info, require_gpu
    from .launch import runner
    from .ops.gemm_tc import TcProblem, Workspace

    require_gpu()
    (a, dtype), (b, dtype_b) = _view(A, "A"), _view(B, "B")
    for name, t in (("A", dtype), ("B", dtype_b)):
        if t not in ("float16", "bfloat16"):
            raise TypeError(f"{name} has dtype {t}; the tensor-core GEMM takes float16 or bfloat16 (CuPy has no "
                            "bfloat16: pass PyTorch bfloat16 tensors)")
    if dtype_b != dtype:
        raise TypeError(f"A is {dtype} and B is {dtype_b}: both operands take one type")
    if a.ndim not in (2, 3) or b.ndim != a.ndim:
        raise ValueError(f"A and B are both 2-D (MxK, KxN) or both 3-D batches; got shapes {a.shape} and {b.shape}")
    batch = a.shape[0] if a.ndim == 3 else 1
    if a.ndim == 3 and b.shape[0] != batch:
        raise ValueError(f"A has {batch} matrices and B {b.shape[0]}")
    (M, K), (K2, N) = a.shape[-2:], b.shape[-2:]
    if K != K2:
        raise ValueError(f"inner dimensions differ: A is {a.shape}, B is {b.shape}")
    if out_dtype not in ("float32", dtype):
        raise ValueError(f"out_dtype is 'float32' or the inputs' own type ({dtype!r}), not {out_dtype!r}")
    problem = TcProblem(M, N, K, dtype, batch, out_dtype)  # (names a size < 1)
    shape = a.shape[:-2] + (M, N)
    if C is None:
        if type(A).__module__.startswith("torch"):
            import torch

            C = torch.empty(shape, dtype=getattr(torch, out_dtype), device=A.device)
        else:
            C = cupy.empty(shape, dtype=cupy.float32 if out_dtype == "float32" else cupy.float16)
    c, c_type = _view(C, "C")
    if c_type != out_dtype or tuple(c.shape) != tuple(shape):
        raise ValueError(f"C is {c_type} {tuple(c.shape)}; this product is {out_dtype} {tuple(shape)}")
    if len({x.device.id for x in (a, b, c)}) != 1:
        raise ValueError("A, B and C must be on one GPU")
    dev = device_info()
    fam = family("gemm_tc")
    if rung == "best":
        rung = "wgmma_cluster" if fam.rung("wgmma_cluster").supports(dev.compute_capability) else "mma_multistage"
    r = fam.rung(rung)
    if not r.supports(dev.compute_capability):
        raise ValueError(f"rung {r.id} needs {r.requirement}; this GPU is {dev.arch}")
    params = choose_params(r, problem, dev, None)
    inst = _instance(r.name, tuple(sorted(params.items())) if params else None, dev.arch, "gemm_tc")
    ws = Workspace.of(problem, a, b, c)
    runner(inst, problem, ws, ws.vec_ok() if r.vec_variant else None, dev)()
    return C
