"""The codegen sweep's option sets compile rung 10 spill-free, and its static facts read the main loop."""


def test_option_sets_compile_rung_10_and_change_its_sass(bench_script):
    from simtlab.catalog import family
    from simtlab.compile import compile_file
    from simtlab.launch import RungInstance

    mod = bench_script("codegen_sweep")
    rung = family("gemm").rung("tuned")
    params = rung.params("sm_90")
    facts = []
    for opts in mod.OPTION_SETS:
        inst = RungInstance(rung, params, compile_file(rung.source, rung.name_expressions(params), arch="sm_90",
                                                       options=opts))
        f = mod.static_facts(inst, True)
        assert f["spill"] == 0 and 2048 < f["loop"] < 2600 and f["reuse"] > 1000
        facts.append(f)
    assert facts[0]["registers"] == 226  # the ladder's build (INTERIOR 1; 224 without)
    assert len({f["sass"] for f in facts}) >= 3  # the options do move ptxas's output
