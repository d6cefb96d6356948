"""Cross-check simtlab's occupancy model against the driver: for every catalog kernel (both
VEC variants, and the tuned rung's tile classes) at its launch configuration, the model's
blocks per SM must equal cudaOccupancyMaxActiveBlocksPerMultiprocessor. Prints a table and
the number of mismatches; exits 1 if there is any.

    python benchmarks/occupancy_check.py [--size-gemm 4096] [--size-elementwise 2^28]
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console
from rich.table import Table

from simtlab.catalog import families
from simtlab.device import device_info
from simtlab.launch import build, prepare
from simtlab.ops import gemm


def driver_blocks(func, threads: int, shared: int) -> int:
    """cuOccupancyMaxActiveBlocksPerMultiprocessor for a loaded CuPy function."""
    import cupy

    handle = getattr(func, "kernel", func).ptr  # RawKernel wraps the driver-level Function
    query = getattr(cupy.cuda.driver, "occupancyMaxActiveBlocksPerMultiprocessor", None)
    if query is not None:
        return int(query(handle, threads, shared))
    from cuda.bindings import driver

    err, blocks = driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(driver.CUfunction(handle), threads, shared)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuOccupancyMaxActiveBlocksPerMultiprocessor: {err}")
    return int(blocks)


def problem_size(fam, overrides: dict[str, str]) -> str:
    """The size a family is checked at: an override, else its small odd check size."""
    return overrides.get(fam.name, fam.check_size)


def configurations():
    for fam in families():
        for rung in fam.rungs:
            yield fam, rung, None
        if fam.name == "gemm":
            tuned = fam.rung("tuned")
            for params in (gemm.TUNED_MEDIUM, gemm.TUNED_SMALL, gemm.TUNED_PREDICATED):
                yield fam, tuned, params


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size-gemm", default="4096")
    ap.add_argument("--size-elementwise", default="2^28")
    args = ap.parse_args()
    dev = device_info()
    t = Table(title=f"occupancy model vs driver on {dev.name} ({dev.arch})", title_justify="left")
    for col in ("kernel", "threads", "regs", "smem", "model blocks/SM", "driver", "limiter", "match"):
        t.add_column(col)
    mismatches = total = 0
    for fam, rung, params in configurations():
        sizes = {"gemm": args.size_gemm, "elementwise": args.size_elementwise}
        problem = fam.op().parse_size(problem_size(fam, sizes))
        inst = build(rung, params, dev.arch)
        launch = inst.geometry(problem, dev)
        for vec in (True, False) if rung.vec_variant else (None,):
            res = inst.resources(vec)
            occ = inst.occupancy(launch, vec)
            func = prepare(inst, launch, vec, dev)
            drv = driver_blocks(func, launch.threads, launch.shared)
            ok = drv == occ.blocks_per_sm
            total += 1
            mismatches += not ok
            t.add_row(inst.expression(vec), str(launch.threads), str(res.registers),
                      str(res.shared_static + launch.shared), str(occ.blocks_per_sm), str(drv), occ.limiter,
                      "yes" if ok else "[red]NO[/]")
    Console(width=200).print(t)
    print(f"{total} kernel configurations, {mismatches} mismatches")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
