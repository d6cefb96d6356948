"""The kernel ladders: every family, each declared by its own ops module (`simtlab.ops.<family>`,
its `FAMILY`: rungs, one per kernel file, and the operations they share). This module only
gathers them, in the order the CLI and the reports list them."""

from __future__ import annotations

from .family import Family, Rung
from .ops import (attention, attention_backward, boundary, branch, conv2d, elementwise, gemm, gemm_tc, intrinsics,
                  layernorm, reduction, scan, softmax, sort, spmv, stencil, transpose)

__all__ = ["Rung", "Family", "FAMILIES", "family", "families", "all_rungs"]

FAMILIES: dict[str, Family] = {m.FAMILY.name: m.FAMILY for m in (elementwise, gemm, reduction, transpose, branch,
                                                                boundary, gemm_tc, conv2d, stencil, softmax,
                                                                layernorm, intrinsics, scan, spmv, sort, attention,
                                                                attention_backward)}


def families() -> list[Family]:
    return list(FAMILIES.values())


def family(name: str) -> Family:
    try:
        return FAMILIES[name]
    except KeyError:
        raise KeyError(f"no kernel family {name!r}; known: {', '.join(FAMILIES)}") from None


def all_rungs() -> list[Rung]:
    return [r for f in families() for r in f.rungs]
