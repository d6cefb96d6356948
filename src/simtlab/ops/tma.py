"""Tensor maps for the Hopper tensor memory accelerator (TMA): the 128-byte descriptor a kernel's
cp.async.bulk.tensor copies read, made on the host by cuTensorMapEncodeTiled. Shared by the rungs
that fill shared memory with TMA boxes (tensor-core GEMM, conv2d, attention)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..driver import TMA_INTERLEAVE_NONE, TMA_L2_256B, TMA_OOB_ZERO  # noqa: F401 (the enum values, in one place)
from ..family import TensorMapArg

# cuTensorMapEncodeTiled's enum values (cuda.h; checked against cuda.bindings in the tests; the
# interleave, L2 promotion and out-of-bounds fill the maps use are the driver module's)
TMA_FLOAT16, TMA_FLOAT32, TMA_BFLOAT16, TMA_SWIZZLE_128B = 6, 7, 9, 3
TMA_SWIZZLE_NONE, TMA_SWIZZLE_64B = 0, 2
_TMA_TYPE = {"float16": TMA_FLOAT16, "bfloat16": TMA_BFLOAT16, "float32": TMA_FLOAT32}


@dataclass(frozen=True)
class TmaBox:
    """What cuTensorMapEncodeTiled needs, innermost dimension first: the tensor's extents (2 or 3
    dimensions), the byte strides of all but the innermost, and the box a copy moves, in elements.
    Zeros are written for the parts of a box outside the tensor."""

    dims: tuple[int, ...]
    strides: tuple[int, ...]  # bytes between rows (and between matrices of a batch)
    box: tuple[int, ...]

    def __post_init__(self):
        if not (len(self.dims) == len(self.box) == len(self.strides) + 1):
            raise ValueError(f"tensor map of {len(self.dims)} dimensions needs as many box extents and one stride fewer")
        if any(s % 16 for s in self.strides):
            raise ValueError(f"tensor-map strides must be multiples of 16 bytes, got {self.strides}")
        if any(not 1 <= b <= 256 for b in self.box):
            raise ValueError(f"a TMA box has 1-256 elements a dimension, got {self.box}")


def tensor_map_encoder(box: TmaBox, dtype: str, swizzle: int = TMA_SWIZZLE_128B):
    """An encoder of `box`'s tensor map over any buffer (driver.TensorMapEncoder): the plan of a
    library call keeps one per operand and encodes a new address in one driver call."""
    from ..driver import TensorMapEncoder

    return TensorMapEncoder(_TMA_TYPE[dtype], box.dims, box.strides, box.box, swizzle)


def map_arg(slot: tuple, box: TmaBox, dtype: str, swizzle: int = TMA_SWIZZLE_128B):
    """A declared operator's tensor map over the array in `slot` (family.TensorMapArg): the generic
    plan encodes it per address and passes it by value."""
    return TensorMapArg(slot, _TMA_TYPE[dtype], box.dims, box.strides, box.box, swizzle)


def encode_tensor_map(box: TmaBox, ptr: int, dtype: str, swizzle: int = TMA_SWIZZLE_128B) -> np.ndarray:
    """The 128-byte CUtensorMap for `box` over the device buffer at `ptr`, as 16 words (one
    driver call through ctypes: cuda.bindings would first probe the driver for every entry point
    it knows, and compute-sanitizer reports each one this driver lacks as an API error)."""
    return np.frombuffer(tensor_map_encoder(box, dtype, swizzle).encode(ptr), dtype=np.uint64).copy()


class PaddedOperands:
    """Zero-padded copies of A (... x K), B (... x K x N) and C (... x N) with K and N rounded up
    to `multiple` elements: tensor maps need row strides of whole 16-byte units. The zeros in the
    extra k contribute nothing to the product; the extra columns of C are dropped on the way out.
    The copies are made once; copy_in/copy_out run inside the timed call."""

    def __init__(self, A, B, C, multiple: int):
        import cupy

        self.K, self.N = A.shape[-1], B.shape[-1]
        self.kp, self.np = -(-self.K // multiple) * multiple, -(-self.N // multiple) * multiple
        self.A = cupy.zeros(A.shape[:-1] + (self.kp,), dtype=A.dtype)
        self.B = cupy.zeros(B.shape[:-2] + (self.kp, self.np), dtype=B.dtype)
        self.C = cupy.zeros(C.shape[:-1] + (self.np,), dtype=C.dtype)

    def copy_in(self, A, B) -> None:
        self.A[..., :self.K] = A
        self.B[..., :self.K, :self.N] = B

    def copy_out(self, C) -> None:
        C[...] = self.C[..., :self.N]
