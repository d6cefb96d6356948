"""The occupancy model against the driver, for every catalog kernel at its launch configuration."""

import pytest

pytestmark = pytest.mark.gpu


def test_model_matches_driver_for_every_catalog_kernel():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import occupancy_check as oc

    from simtlab.device import device_info
    from simtlab.launch import build, prepare

    dev = device_info()
    wrong = []
    for fam, rung, params in oc.configurations():
        problem = fam.op().parse_size(oc.problem_size(fam, {"gemm": "1000x1013x37"}))
        inst = build(rung, params, dev.arch)
        launch = inst.geometry(problem, dev)
        for vec in (True, False) if rung.vec_variant else (None,):
            model = inst.occupancy(launch, vec).blocks_per_sm
            func = prepare(inst, launch, vec, dev)
            driver = oc.driver_blocks(func, launch.threads, launch.shared)
            if model != driver:
                wrong.append((inst.expression(vec), model, driver))
    assert not wrong
