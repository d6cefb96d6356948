def test_the_sweeps_progress_yields_every_item_in_order(bench_script):
    """The benchmark sweeps' progress bar (shown on a terminal only) hands on every configuration."""
    sweep = bench_script("param_sweep")
    assert list(sweep.steps(iter(range(5)), "sweep")) == [0, 1, 2, 3, 4]
    assert list(sweep.steps([], "nothing")) == []


def test_a_grid_compiles_without_a_gpu_and_a_point_that_fails_is_said(bench_script, tmp_cache, capsys):
    """`param_sweep.py --compile-only ARCH`: every point built as the sweep would choose its
    parameters (the problem's own ones included) into the cubin cache; a point the kernel refuses
    is reported and the rest still built."""
    from simtlab.catalog import family

    sweep = bench_script("param_sweep")
    fam = family("sort")
    grid = [("STAGED", [1, 2]), ("ITEMS", [12, 20])]  # (STAGED 2 with pairs at 20 a thread: over 48 KB)
    sweep.compile_grid(fam, fam.rung("radix_onesweep"), "4096:pairs", grid, "sm_90")
    lines = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("built") for line in lines) == 3
    assert [line for line in lines if line.startswith("failed")][0].startswith("failed {'STAGED': 2, 'ITEMS': 20}")
    assert any(tmp_cache.glob("*.cubin"))
