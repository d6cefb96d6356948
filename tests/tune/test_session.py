"""Every rung that declares a search space: its points are valid launches of kernels that compile
(checked with no GPU), and `simtlab tune` names the rungs that have one."""

import random

import pytest

from simtlab.catalog import all_rungs, family
from simtlab.cli import EXIT_INPUT, main
from simtlab.hw.occupancy import arch_limits
from simtlab.launch import build, check_grid
from simtlab.tune.session import rung_space

SPACED = [r for r in all_rungs() if r.space is not None]


def test_the_families_the_tuner_serves():
    assert {r.family for r in SPACED} >= {"gemm", "gemm_tc", "conv2d"}


@pytest.mark.parametrize("rung", SPACED, ids=lambda r: r.id)
def test_every_point_of_a_space_is_a_launch_and_one_compiles(rung, tmp_cache):
    fam = family(rung.family)
    space = rung_space(fam, rung, arch_limits("sm_90").smem_per_block_optin)
    valid = space.valid()
    assert valid and len(valid) <= space.size
    p = fam.op().parse_size(fam.check_size)  # (any family: its own small odd problem)
    base = rung.size_defaults(p, None, None) if rung.size_defaults else {}
    launchable = []
    for config in valid:
        params = rung.params("sm_90", {**base, **space.complete(config)})
        try:
            launch = rung.geometry(params, p, None)
        except ValueError as exc:  # a point that cannot take this problem (a register row too short for
            assert "row" in str(exc)  # the row, softmax / layernorm) is refused by name, never run wrong
            continue
        assert 32 <= launch.threads <= 1024 and launch.shared <= arch_limits("sm_90").smem_per_block_optin
        check_grid(launch)
        launchable.append(config)
    assert len(launchable) >= len(valid) // 2, f"{len(launchable)} of {len(valid)} launch at {p.label}"
    pick = random.Random(rung.id).choice(launchable)  # one point off the defaults compiles for sm_90
    inst = build(rung, {**base, **space.complete(pick)}, "sm_90")
    # (gemm's register tiles and conv2d rung 8's taps held in registers spill at some points - 1024-thread
    # blocks at radius 7 - which the tuner measures like any other: slow, not wrong; its defaults never do)
    spill_ok = rung.family == "gemm" or rung.id == "conv2d/08_filter_arg"
    assert inst.resources(True if rung.vec_variant else None).spill_bytes == 0 or spill_ok


def test_a_rung_without_a_space_is_named_with_those_that_have_one(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("SIMTLAB_DB", str(tmp_path / "t.db"))
    assert main(["tune", "gemm", "--rung", "naive", "--size", "256"]) == EXIT_INPUT
    err = capsys.readouterr().err
    assert "gemm/01_naive declares no search space; gemm rungs with one: warptiling, multistage, tuned" in err


def test_the_size_filter_leaves_out_what_the_launch_refuses_at_that_size():
    """softmax rung 4's space at a 1024-value row: the points whose lanes cannot hold the row are
    refused before the search (their reason counted), the rest kept; at 128 values nearly all run."""
    from simtlab.catalog import family
    from simtlab.tune.session import runnable_at

    fam = family("softmax")
    rung = fam.rung("vectorized")
    configs = rung.space(232448).valid()
    keep, refused = runnable_at(rung, configs, fam.op().parse_size("131072x1024"))
    assert len(keep) + sum(refused.values()) == len(configs) == 110
    assert sum(refused.values()) == 39 and all("1024-value row" in r for r in refused)
    short, _ = runnable_at(rung, configs, fam.op().parse_size("1048576x128"))
    assert len(short) > len(keep)
