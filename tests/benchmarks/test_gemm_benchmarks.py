"""The GEMM benchmarks' CPU side: the real-shape set (classes, layouts, sources), its summary table,
the dispatch table's grid and its leave-one-out grade - what a GPU run would otherwise find
broken only at its end."""

import math


def test_the_shape_set_covers_the_issue_classes_and_layouts(bench_script):
    g = bench_script("gemm_shapes")
    shapes = g.shape_set()
    assert len(shapes) >= 200 and len({(s.M, s.N, s.K, s.layout) for s in shapes}) == len(shapes)
    classes = {s.cls for s in shapes}
    assert classes == {"large", "small work", "side 17-128", "side <= 16", "K >= 100000"}
    assert {"nn", "nt", "tn"} <= {s.layout for s in shapes}  # (a linear layer's forward and both backward products)
    assert any(s.N % 8 for s in shapes) and any(min(s.M, s.N) == 1 for s in shapes)  # (odd rows, one row)
    fp32 = [s for s in shapes if s.source.startswith(g.FP32_SOURCES)]
    assert len(fp32) >= 50 and any(s.K == 65536 for s in fp32)
    assert len(g.batched_shapes()) >= 10


def test_the_summary_prints_every_class_the_worst_ten_and_failures(bench_script):
    g = bench_script("gemm_shapes")
    rows = []
    for i, s in enumerate(g.shape_set()[:40]):
        rows.append({"M": s.M, "N": s.N, "K": s.K, "layout": s.layout, "source": s.source, "class": s.cls,
                     "us": 10.0 + i, "torch_us": 10.0, "share": 10.0 / (10.0 + i), "of_roofline": 0.5})
    rows.append({"M": 1, "N": 2, "K": 3, "layout": "nn", "source": "x", "class": "large", "failed": "RuntimeError: x"})
    text = g.summary(rows, "bf16", "a GPU")
    assert "| **all** | 40 |" in text and "worst ten:" in text and "failed: 1" in text
    assert text.count("\n  ") == 10
    assert math.isclose(g.geomean([1.0, 4.0]), 2.0)


def test_a_roofline_counts_flops_bytes_and_one_launch(bench_script):
    g = bench_script("gemm_shapes")
    s = g.Shape(4096, 16, 4096, "nn", "GEMV")
    ceil = {"tc_tflops": 800.0, "copy_gbs": 3000.0, "launch_us": 2.0}
    assert math.isclose(g.roofline_us(s, 2, ceil), s.bytes(2) / 3e12 * 1e6 + 2.0)  # (memory-bound: 3000 GB/s)


def test_the_dispatch_grid_and_its_grade(bench_script):
    t = bench_script("gemm_dispatch_table")
    tc, fp32 = t.grid(False, "gemm_tc"), t.grid(False, "gemm")
    assert 500 <= len(tc) <= 900 and len(fp32) <= len(tc)
    assert all(2 * m * n * k <= t.MAX_FLOPS["gemm_tc"] for m, n, k in tc)
    assert not t.worth_timing("r7:128x128:s1", 4096, 4, 4096)  # (a 128-wide tile on a 4-wide side)
    assert t.worth_timing("r7:64x8:s1", 4096, 4, 4096) and t.worth_timing("r6", 1, 1, 64)
    assert not t.worth_timing("r14:64x64:s8", 64, 64, 256)  # (8 blocks on 4 slices)
    from simtlab.ops import gemm_dispatch as gd

    table = {"sms": 132, "rows": [{"M": 16, "N": 4096, "K": 4096, "us": {"r10": 30.0, "r14:64x16:s4": 10.0}},
                                  {"M": 32, "N": 4096, "K": 4096, "us": {"r10": 30.0, "r14:64x16:s4": 12.0}}]}
    text = t.grade(table, gd.FP32)
    assert "| nearest neighbour | 100.0% |" in text and "r10 alone" in text
