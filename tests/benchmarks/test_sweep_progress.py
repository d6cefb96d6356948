def test_the_sweeps_progress_yields_every_item_in_order(bench_script):
    """The benchmark sweeps' progress bar (shown on a terminal only) hands on every configuration."""
    sweep = bench_script("param_sweep")
    assert list(sweep.steps(iter(range(5)), "sweep")) == [0, 1, 2, 3, 4]
    assert list(sweep.steps([], "nothing")) == []
