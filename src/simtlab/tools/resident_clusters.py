"""How many of tensor-core rung 6's clusters the device holds at once, per cluster shape (the
driver's count for the compiled kernel, its threads and its shared memory): a persistent grid
of clusters is cut to it, so a shape whose clusters leave SMs unused runs on fewer SMs.

    python -m simtlab.tools.resident_clusters [--size 4096:bf16]
"""

from __future__ import annotations

import argparse

from simtlab.catalog import family
from simtlab.device import device_info
from simtlab.launch import build, choose_params, prepare
from simtlab.ops import gemm_tc

SHAPES = ({"CM": 2, "CN": 1}, {"CM": 1, "CN": 2}, {"CM": 2, "CN": 2})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="4096")
    args = ap.parse_args()
    dev = device_info()
    rung, p = family("gemm_tc").rung("wgmma_cluster"), gemm_tc.parse_size(args.size)
    for shape in SHAPES:
        inst = build(rung, choose_params(rung, p, dev, None, explicit=shape), dev.arch)
        launch = inst.geometry(p, dev)
        cs = shape["CM"] * shape["CN"]
        cut = gemm_tc.resident_clusters(prepare(inst, launch, None, dev), launch, cs)
        print(f"clusters of {shape['CM']}x{shape['CN']}: {cut.grid[0] // cs} at once ({cut.grid[0]} of "
              f"{dev.sms} SMs), {launch.shared} bytes of shared memory a block", flush=True)


if __name__ == "__main__":
    main()
