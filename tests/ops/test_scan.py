import pytest

from simtlab.catalog import family
from simtlab.ops import scan


def test_sizes_types_and_labels():
    assert scan.parse_size("1000003") == scan.ScanProblem(1000003, "float32")
    p = scan.parse_size("2^24:int32")
    assert (p.n, p.dtype, p.label) == (1 << 24, "int32", "16777216:int32")
    assert p.bytes == 8 * p.n and p.flops == p.n
    with pytest.raises(ValueError, match="use fp32 or int32"):
        scan.parse_size("1000:int8")
    with pytest.raises(ValueError, match="must be >= 1"):
        scan.parse_size("0")


def test_tolerance_is_exact_for_integers_and_grows_with_the_length_for_floats():
    assert scan.tolerance(scan.ScanProblem(1 << 28, "int32")) == 0.0
    short, long = scan.tolerance(scan.ScanProblem(1000)), scan.tolerance(scan.ScanProblem(1 << 28))
    assert 0 < short < long < 1e-2


def test_levels_shrink_to_one_tile():
    params = {"BLOCK": 256, "ITEMS": 16}  # 4096-element tiles
    assert scan.plan_levels(params, 1 << 28) == [1 << 28, 65536, 16]
    assert scan.plan_levels(params, 4096) == [4096]
    assert scan.plan_levels(params, 4097) == [4097, 2]
    assert scan.plan_levels({"BLOCK": 512, "ITEMS": 1}, 1) == [1]


def test_bytes_asked_of_memory_by_rung():
    fam = family("scan")
    p = scan.ScanProblem(1 << 20)
    by = {r.name: r.requested_bytes(r.params("sm_90"), p) for r in fam.rungs}
    assert by["reduce_then_scan"] == 12 * p.n and by["warp_shuffle"] == 16 * p.n
    assert by["decoupled_lookback"] == by["striped_lookback"] == 8 * p.n == p.bytes
    assert all(b >= p.bytes for b in by.values())


def test_geometry_covers_every_element():
    for r in family("scan").rungs:
        params = r.params("sm_90")
        for n in (1, 1000, 1 << 20):
            launch = r.geometry(params, scan.ScanProblem(n))
            assert launch.blocks * params["BLOCK"] * params["ITEMS"] >= n > (launch.blocks - 1) * scan.tile(params)


def test_rung_6_keeps_a_full_sm_on_hopper_for_both_types():
    """Rung 6 at its defaults (512 threads, 12 elements a lane) is held to 32 registers on sm_90 -
    int32 took 36 without the bound, three quarters of an SM - and builds spill-free on sm_80, where
    it keeps its own count."""
    from simtlab.launch import build

    rung = family("scan").rung("striped_lookback")
    for dt in (0, 1):
        hopper = build(rung, {"DT": dt}, "sm_90").resources(None)
        assert hopper.registers <= 32 and hopper.spill_bytes == 0, (dt, hopper)
        ampere = build(rung, {"DT": dt}, "sm_80").resources(None)
        assert ampere.spill_bytes == 0, (dt, ampere)
