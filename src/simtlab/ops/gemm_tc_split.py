"""The split rungs on one problem - gemm_tc rung 7 (16-bit inputs, tensor cores) and gemm rung 14
(fp32, CUDA cores): the launch made once - the (possibly swapped) operands, the grid in clusters of
SPLITS blocks, the packed parameters - so that a call is one driver launch (cuLaunchKernelEx with
the cluster shape). What simtlab.gemm_tc / simtlab.gemm and the ladders run."""

from __future__ import annotations

from ..driver import F32, I32, PTR, PackedLaunch
from ..launch import function_handle
from .gemm_tc import split_layout

__all__ = ["SplitKernel", "F32SplitKernel"]


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
