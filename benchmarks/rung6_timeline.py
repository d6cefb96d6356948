"""Where tensor-core rung 6's time goes, tile by tile. The kernel built with -DSIMTLAB_TIMELINE
records, per block, warpgroup and tile, the SM clock when the tile starts, the cycles the
warpgroup waited on the pipeline's barriers (consumers: "full", producer: "empty"), when its last
slice was multiplied (issued, for the producer), when its epilogue ended, and (EPI 1) the epilogue's
cycles in four steps, and the global timer at the epilogue's start and end (how many SMs store at
once). Printed: medians over all tiles against the tensor cores' time for the tile at full
rate, and a block's whole span.

    python benchmarks/rung6_timeline.py --size 4096:bf16 [--param GROUP_M=16] [--json out.json]
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from rich.console import Console
from rich.table import Table

TL_TILES, TL_BLOCKS, TL_FIELDS = 64, 264, 10  # as declared in the kernel
DENSE_FLOP_PER_CYCLE = {"float16": 4096, "bfloat16": 4096, "float32": 2048}  # per SM, sm_90 tensor cores


def collect(size: str, overrides: dict[str, int], seed: int = 5) -> dict:
    import cupy

    from simtlab.bench import time_gpu
    from simtlab.catalog import family
    from simtlab.compile import compile_file
    from simtlab.device import device_info
    from simtlab.launch import RungInstance, build, choose_params, runner
    from simtlab.ops import gemm_tc
    from simtlab.verify import relative_error

    fam, dev = family("gemm_tc"), device_info()
    rung, p = fam.rung("wgmma_cluster"), gemm_tc.parse_size(size)
    plain = build(rung, choose_params(rung, p, dev, None, explicit=overrides or None), dev.arch)
    cubin = compile_file(rung.source, rung.name_expressions(plain.params), arch=rung.build_arch(dev.arch),
                         options={"define_macro": "SIMTLAB_TIMELINE"})
    traced = RungInstance(rung, plain.params, cubin)
    ws = fam.op().workspace(p, seed)
    launch = traced.geometry(p, dev)
    if launch.grid[0] > TL_BLOCKS:
        raise SystemExit(f"{launch.grid[0]} blocks: the timeline holds {TL_BLOCKS}")
    times = {name: time_gpu(runner(inst, p, ws, None, dev)).median_ms for name, inst in (("plain", plain),
                                                                                         ("traced", traced))}
    # (the grid the runner launched: clusters of 4 are cut to what the device holds at once)
    launch = gemm_tc.resident_clusters(traced.function(None), launch, plain.params["CM"] * plain.params["CN"])
    buf = traced.module().get_global("simtlab_timeline")
    stamps = cupy.ndarray((TL_BLOCKS, 3, TL_TILES, TL_FIELDS), dtype=cupy.uint64, memptr=buf)
    stamps.fill(0)
    ws.poison()
    runner(traced, p, ws, None, dev)()
    cupy.cuda.get_current_stream().synchronize()
    err = float(relative_error(ws.output(), ws.expected()))
    # (the stamps need registers: a build that keeps more than 4 pieces spills a few of them;
    # the plain and traced times side by side show whether that changed the kernel's pace)
    spill = traced.resources(None).spill_bytes
    return {"size": size, "params": plain.params, "grid": launch.grid[0], "times_ms": times, "rel_err": err,
            "traced_spill_bytes": spill,
            "stamps": stamps.get()[:launch.grid[0]].astype(np.int64),
            "ideal_tile_cycles": 2 * plain.params["BM"] * plain.params["BN"] * p.K / DENSE_FLOP_PER_CYCLE[p.dtype]}


def summarise(run: dict) -> dict:
    """Per-tile medians (cycles) of the consumers' main loop, their waits for data, the epilogue and
    the gap to the next tile; the producer's waits for free slots; the whole span of a block."""
    s = run["stamps"]
    cons = s[:, 1]  # consumer warpgroup 0 (both consumers finish a tile together)
    used = cons[:, :, 0] > 0
    main = (cons[:, :, 2] - cons[:, :, 0])[used]
    epi = (cons[:, :, 3] - cons[:, :, 2])[used]
    wait = cons[:, :, 1][used]
    gaps = (cons[:, 1:, 0] - cons[:, :-1, 3])[used[:, 1:]]
    first = used[:, 0]
    prod = s[:, 0]
    pwait = prod[:, :, 1][prod[:, :, 0] > 0]
    spans = np.array([cons[b, used[b], 3].max() - cons[b, used[b], 0].min() for b in range(len(cons)) if used[b].any()])
    tiles = used.sum(axis=1)
    # epilogues on the global timer (ns, common to all SMs): at each one's midpoint, how many run
    start, end = cons[:, :, 8][used], cons[:, :, 9][used]
    mid = (start + end) // 2
    at_once = ((start[None, :] <= mid[:, None]) & (mid[:, None] <= end[None, :])).sum(axis=1)
    ideal = run["ideal_tile_cycles"]
    busy = ideal * tiles[tiles > 0] / spans
    return {
        "tiles per block": f"{tiles.min()}-{tiles.max()}",
        "ideal cycles a tile (tensor cores at full rate)": f"{ideal:.0f}",
        "main loop, median": f"{np.median(main):.0f} ({np.median(main) / ideal:.3f} x ideal)",
        "main loop, first tile of a block": f"{np.median((cons[:, 0, 2] - cons[:, 0, 0])[first]):.0f}",
        "consumers waiting for data in the main loop, median": f"{np.median(wait):.0f}",
        "consumers waiting, first tile of a block": f"{np.median(cons[:, 0, 1][first]):.0f}",
        "epilogue, median": f"{np.median(epi):.0f}",
        "  of it (EPI 1): waiting for earlier stores to read the staging": f"{np.median(cons[:, :, 4][used]):.0f}",
        "  of it (EPI 1): barrier before writing": f"{np.median(cons[:, :, 5][used]):.0f}",
        "  of it (EPI 1): writing the staging (and the proxy fence)": f"{np.median(cons[:, :, 6][used]):.0f}",
        "  of it (EPI 1): barrier after writing": f"{np.median(cons[:, :, 7][used]):.0f}",
        "epilogue on the global timer, median ns": f"{np.median(end - start):.0f}",
        "SMs in an epilogue at the same time, median / max": f"{np.median(at_once):.0f} / {at_once.max()} "
                                                             f"of {len(cons)}",
        "gap to the next tile, median": f"{np.median(gaps):.0f}" if gaps.size else "-",
        "producer waiting for free slots, median a tile": f"{np.median(pwait):.0f}",
        "block span / ideal (all its tiles), median": f"{np.median(1 / busy):.3f}",
        "tensor cores busy over a block's span, min / median / max": f"{busy.min():.3f} / {np.median(busy):.3f} / "
                                                                     f"{busy.max():.3f}",
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", action="append", required=True)
    ap.add_argument("--param", action="append", default=[], help="NAME=value over the rung's size defaults")
    ap.add_argument("--json")
    args = ap.parse_args()
    from simtlab.tools.launch_once import parse_params

    overrides = parse_params(args.param)
    out = []
    for size in args.size:
        run = collect(size, overrides)
        summary = summarise(run)
        t = Table(title=f"rung 6 at {size} {run['params']}: {run['grid']} blocks, plain {run['times_ms']['plain']:.3f} ms, "
                        f"traced {run['times_ms']['traced']:.3f} ms"
                        + (f" ({run['traced_spill_bytes']} bytes spilled)" if run.get("traced_spill_bytes") else "")
                        + f", rel err {run['rel_err']:.1e}",
                  title_justify="left", header_style="bold")
        t.add_column("per tile, SM cycles")
        t.add_column("value")
        for k, v in summary.items():
            t.add_row(k, v)
        Console(width=160).print(t)
        out.append({k: v for k, v in run.items() if k != "stamps"} | {"summary": summary,
                                                                        "stamps": run["stamps"].tolist()})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f)


if __name__ == "__main__":
    main()
