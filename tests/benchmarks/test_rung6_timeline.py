"""The rung-6 timeline: its instrumented build compiles (and the ordinary one carries none of it),
and the summary reads the recorded stamps right."""

import numpy as np


def test_timeline_build_records_clocks_and_the_plain_build_does_not():
    from simtlab.analyze.sass import disassemble
    from simtlab.catalog import family
    from simtlab.compile import compile_file
    from simtlab.launch import build

    rung = family("gemm_tc").rung("wgmma_cluster")
    # keeping 4 pieces (the default): the producer keeps 40 registers, room for its stamps
    # (keeping 5 gives 16 of them to the consumers and the instrumented build spills a few)
    plain = build(rung, {"KEEP": 4}, "sm_90")
    traced = compile_file(rung.source, rung.name_expressions(plain.params), arch="sm_90a",
                          options={"define_macro": "SIMTLAB_TIMELINE"})
    assert b"simtlab_timeline" in traced.data()  # the __device__ array the script reads
    assert traced.resources(plain.expression(None)).spill_bytes == 0
    assert "SR_CLOCK" in disassemble(traced.path)
    plain_sass = disassemble(plain.cubin.path)
    assert "SR_CLOCK" not in plain_sass and "HGMMA" in plain_sass


def test_summary_of_synthetic_stamps(bench_script):
    mod = bench_script("rung6_timeline")
    blocks, ideal = 4, 1000.0
    stamps = np.zeros((blocks, 3, mod.TL_TILES, mod.TL_FIELDS), dtype=np.int64)
    for b in range(blocks):
        t = 100
        for i in range(3 if b else 2):  # block 0 has one tile fewer
            # start, waited, main loop end (1100 cycles after start), epilogue end (+200)
            stamps[b, 1, i] = (t, 50 if i else 400, t + 1100, t + 1300, 40, 30, 100, 30, 1000 * i + 10 * b, 1000 * i + 10 * b + 100)
            stamps[b, 0, i] = (t, 7, t + 900, 0, 0, 0, 0, 0, 0, 0)
            t += 1300 + 20  # 20-cycle gap to the next tile
    s = mod.summarise({"stamps": stamps, "ideal_tile_cycles": ideal})
    assert s["tiles per block"] == "2-3"
    assert s["main loop, median"].startswith("1100 (1.100")
    assert s["epilogue, median"] == "200" and s["gap to the next tile, median"] == "20"
    assert s["consumers waiting for data in the main loop, median"] == "50"
    assert s["consumers waiting, first tile of a block"] == "400"
    # tile i's epilogues (one a block, 10 ns apart, 100 ns long) overlap each other, not other tiles'
    assert s["epilogue on the global timer, median ns"] == "100"
    assert s["SMs in an epilogue at the same time, median / max"] == "4 / 4 of 4"
    assert s["  of it (EPI 1): writing the staging (and the proxy fence)"] == "100"
    assert s["producer waiting for free slots, median a tile"] == "7"
    # a block of 3 tiles spans 3*1300 + 2*20 = 3940 cycles for 3000 ideal
    assert s["block span / ideal (all its tiles), median"] == f"{3940 / 3000:.3f}"
