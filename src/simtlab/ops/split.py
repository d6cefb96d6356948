"""What the split rungs share - gemm_tc rung 7 (16-bit inputs, tensor cores) and gemm rung 14
(fp32, CUDA cores) - below the families that declare them and the dispatcher that picks them: the
template codes of the types, the swap and the operands' layouts and row alignments a problem runs
with, and the launch made once on one problem - the (possibly swapped) operands, the grid in
clusters of SPLITS blocks, the packed parameters - so that a call is one driver launch
(cuLaunchKernelEx with the cluster shape). What simtlab.gemm_tc / simtlab.gemm and the ladders run."""

from __future__ import annotations

from dataclasses import dataclass

from ..driver import F32, I32, PTR, PackedLaunch
from ..launch import function_handle

__all__ = ["DT", "OUT", "MAX_GRID_YZ", "SplitLayout", "row_alignment", "split_layout", "SplitKernel", "F32SplitKernel"]

DT = {"float16": 0, "bfloat16": 1, "float32": 2}  # the tensor-core kernels' DT template argument
OUT = {"float32": 0, "float16": 1, "bfloat16": 2}  # their OUT (C's type)
MAX_GRID_YZ = 65535


def row_alignment(extent: int, element: int = 2) -> int:
    """Bytes a row of `extent` elements of `element` bytes keeps every row start aligned to (16, 8,
    4 or 2, never less than an element): how wide the split rungs' copies of that operand can be
    (their AV, BV: gemm_tc rung 7's 16-bit, gemm rung 14's fp32, 16 or 4)."""
    row = extent * element
    return next(v for v in (16, 8, 4, 2) if row % v == 0 or v <= element)


@dataclass(frozen=True)
class SplitLayout:
    """What rung 7 runs for a problem, swapped (C^T = B^T A^T, the long side of C on the kernel's
    M) or not: the kernel's M and N, its operands' layouts (TA, TB: 1 a transposed view) and row
    alignments (AV, BV), and TC (C column-major: the swapped product's)."""
    M: int
    N: int
    TA: int
    TB: int
    AV: int
    BV: int
    TC: int

    @property
    def swapped(self) -> bool:
        return bool(self.TC)

    @property
    def params(self) -> dict:
        return {"TA": self.TA, "TB": self.TB, "AV": self.AV, "BV": self.BV, "TC": self.TC}


def split_layout(p, swap: bool, element: int = 2) -> SplitLayout:
    """A's contiguous extent is K (row-major) or M (a transposed view), B's N or K. Swapped, the
    kernel's A is B^T - row-major where B is a transposed view, and the other way round - and its
    B is A^T. `p`: a TcProblem, or any problem with M, N, K and (optionally) ta, tb; `element`: its
    inputs' bytes (fp32 operands: 4, where 16 and 4 are the only alignments)."""
    ta, tb = bool(getattr(p, "ta", False)), bool(getattr(p, "tb", False))
    a_row, b_row = (p.M if ta else p.K), (p.K if tb else p.N)
    av, bv = row_alignment(a_row, element), row_alignment(b_row, element)
    if element == 4:  # (fp32 copies are 16 bytes or one element)
        av, bv = (16 if av == 16 else 4), (16 if bv == 16 else 4)
    if not swap:
        return SplitLayout(p.M, p.N, int(ta), int(tb), av, bv, 0)
    return SplitLayout(p.N, p.M, 1 - int(tb), 1 - int(ta), bv, av, 1)



class SplitKernel:
    """`launch(pa, pb, pc, stream)` runs C = A @ B for A, B and C at those addresses, each laid out as
    the problem says. Swapped (TC 1), the kernel computes C^T = B^T A^T: it takes B's address as its
    A and A's as its B, and writes C column-major, which is C row-major. `masks` are the address
    bits that must be zero for the row alignments the kernel was built for (AV, BV) in the
    problem's order (A, B, C); `aligned(pa, pb, pc)` tells."""

    KINDS = (I32, I32, I32, PTR, PTR, PTR)  # M, N, K, A, B, C
    ELEMENT = 2  # the inputs' bytes

    def __init__(self, inst, p, device, prepare):
        params = inst.params
        layout = split_layout(p, bool(params["TC"]), self.ELEMENT)
        if {k: params[k] for k in layout.params} != layout.params:
            raise ValueError(f"rung 7 built with {params} cannot run {p.label} (it needs {layout.params})")
        self.params, self.swapped = params, layout.swapped
        geometry = inst.geometry(p, device)
        func = prepare(inst, geometry, None, device)
        index = device.index if device is not None else 0
        self.packed = packed = PackedLaunch(function_handle(func), geometry.grid, geometry.block, geometry.shared,
                                            self.KINDS, index, (1, 1, params["SPLITS"]))
        for i, v in enumerate((layout.M, layout.N, p.K)):
            packed.values[i].value = v
        av, bv = (layout.BV, layout.AV) if self.swapped else (layout.AV, layout.BV)
        self.masks = (av - 1, bv - 1, self.ELEMENT - 1 if self.ELEMENT == 2 else 3)  # (C: element stores)
        self.launch = self._launcher()

    def aligned(self, pa: int, pb: int, pc: int) -> bool:
        ma, mb, mc = self.masks
        return not ((pa & ma) | (pb & mb) | (pc & mc))

    def _arguments(self, values, pa: int, pb: int, pc: int) -> None:
        first, second = (pb, pa) if self.swapped else (pa, pb)
        values[3].value, values[4].value, values[5].value = first, second, pc

    def _launcher(self):
        packed, arguments = self.packed, self._arguments
        values = packed.values

        def launch(pa: int, pb: int, pc: int, stream: int) -> None:
            arguments(values, pa, pb, pc)
            packed.launch(stream)

        return launch

    def bind(self, pa: int, pb: int, pc: int) -> PackedLaunch:
        """A launch of these three addresses with its own parameter block: each call only sets the stream."""
        packed = self.packed.clone()
        self._arguments(packed.values, pa, pb, pc)
        return packed


class F32SplitKernel(SplitKernel):
    """gemm rung 14: C = alpha * A @ B + beta * C in fp32; `launch(pa, pb, pc, stream, alpha, beta)`."""

    KINDS = (I32, I32, I32, F32, PTR, PTR, F32, PTR)  # M, N, K, alpha, A, B, beta, C
    ELEMENT = 4

    def _arguments(self, values, pa: int, pb: int, pc: int, alpha: float = 1.0, beta: float = 0.0) -> None:
        first, second = (pb, pa) if self.swapped else (pa, pb)
        values[3].value, values[4].value, values[5].value = alpha, first, second
        values[6].value, values[7].value = beta, pc

    def _launcher(self):
        packed, arguments = self.packed, self._arguments
        values = packed.values

        def launch(pa: int, pb: int, pc: int, stream: int, alpha: float = 1.0, beta: float = 0.0) -> None:
            arguments(values, pa, pb, pc, alpha, beta)
            packed.launch(stream)

        return launch

    def bind(self, pa: int, pb: int, pc: int, alpha: float = 1.0, beta: float = 0.0) -> PackedLaunch:
        packed = self.packed.clone()
        self._arguments(packed.values, pa, pb, pc, alpha, beta)
        return packed
