"""The codegen sweep's option sets compile rung 10 spill-free, and its static facts read the main loop."""

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "codegen_sweep.py"


def _module():
    spec = importlib.util.spec_from_file_location("codegen_sweep", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_option_sets_compile_rung_10_and_change_its_sass():
    from simtlab.catalog import family
    from simtlab.compile import compile_file
    from simtlab.launch import RungInstance

    mod = _module()
    rung = family("gemm").rung("tuned")
    params = rung.params("sm_90")
    facts = []
    for opts in mod.OPTION_SETS:
        inst = RungInstance(rung, params, compile_file(rung.source, rung.name_expressions(params), arch="sm_90",
                                                       options=opts))
        f = mod.static_facts(inst, True)
        assert f["spill"] == 0 and 2048 < f["loop"] < 2600 and f["reuse"] > 1000
        facts.append(f)
    assert facts[0]["registers"] == 224  # the ladder's build
    assert len({f["sass"] for f in facts}) >= 3  # the options do move ptxas's output
