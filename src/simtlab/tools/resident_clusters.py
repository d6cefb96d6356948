"""How many of tensor-core rung 6's clusters the device holds at once, per cluster shape (the
driver's count for the compiled kernel, its threads and its shared memory): a persistent grid
of clusters of 4 is cut to it, so a shape whose clusters leave SMs unused runs on fewer SMs.

    python -m simtlab.tools.resident_clusters [--size 4096:bf16]
"""

from __future__ import annotations

import argparse

from simtlab.catalog import family
from simtlab.device import device_info
from simtlab.launch import build, choose_params, function_handle, prepare
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
        fits = gemm_tc.max_active_clusters(function_handle(prepare(inst, launch, None, dev)), launch.threads,
                                            launch.shared)
        print(f"clusters of {shape['CM']}x{shape['CN']}: {fits} at once ({fits * cs} of {dev.sms} SMs), "
              f"{launch.shared} bytes of shared memory a block", flush=True)


if __name__ == "__main__":
    main()
