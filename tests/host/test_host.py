"""Host-side experiments: their kernels compile clean everywhere (CPU), and on a GPU the copies,
the overlapped pipeline and the graph replay run, agree with each other and with float64."""

import pytest

from simtlab.compile import compile_file
from simtlab.host import KERNEL_FILES


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("path", KERNEL_FILES)
def test_host_kernels_compile_without_spills(path, arch):
    cubin = compile_file(path, arch=arch)
    report = cubin.resources()
    assert report and all(r.spill_stores == 0 and r.stack_frame == 0 for r in report.values())


def test_pipeline_refuses_impossible_schedules():
    from simtlab.host.transfers import pipeline

    with pytest.raises(ValueError, match="chunks and streams"):
        pipeline(1 << 20, chunks=0)
    with pytest.raises(ValueError, match="cannot be cut"):
        pipeline(8, chunks=4)


def test_reference_recurrence():
    import numpy as np

    from simtlab.host.transfers import reference

    x = np.array([1.0, 2.0], np.float32)
    assert np.allclose(reference(x, 0), x) and np.allclose(reference(x, 1), x * 0.999 + x, rtol=1e-7)


@pytest.mark.gpu
def test_pinned_copies_beat_pageable_and_round_trip():
    from simtlab.host.transfers import copy_bandwidth

    rows = {r.name: r for r in copy_bandwidth(64 << 20, reps=3)}  # raises if the round trips differ
    assert set(rows) == {"H2D pageable", "H2D pinned", "D2H pageable", "D2H pinned"}
    assert all(r.gbs > 0 for r in rows.values())
    assert rows["H2D pinned"].gbs > rows["H2D pageable"].gbs


@pytest.mark.gpu
def test_overlapped_pipeline_matches_serial_and_hides_time():
    from simtlab.host.transfers import pipeline

    res = pipeline(64 << 20, chunks=8, streams=4, reps=3)  # raises if outputs differ or drift from float64
    assert res["overlapped_ms"] < res["serial_ms"] and res["hidden_share"] > 0.3


@pytest.mark.gpu
def test_graph_replay_and_fusion_cut_per_step_time():
    from simtlab.host.graphs import launch_overhead

    res = launch_overhead(steps=200, n=1000, reps=3)  # raises if the three schedules' values differ
    us = res["us_per_step"]
    assert us["CUDA graph"] < us["one by one"] and us["fused kernel"] < us["CUDA graph"]
