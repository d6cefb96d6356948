"""The tensor-core GEMM's dispatcher and rung 7's host side, with no GPU: which kernel a shape
gets (the measured table's nearest shape, else the rule), the swap and layouts rung 7 runs with,
its grid, and every candidate's build."""

import json

import pytest

from simtlab.ops import gemm_dispatch as gd
from simtlab.ops.gemm_tc import (TcProblem, geometry_split_k, row_alignment, split_layout, split_smem,
                                 split_threads)

pytestmark = pytest.mark.split


def problem(M, N, K, layout="nn", batch=1, out="bfloat16"):
    return TcProblem(M, N, K, "bfloat16", batch, out, layout)


@pytest.fixture
def no_table(monkeypatch):
    monkeypatch.setattr(gd, "load_table", lambda arch, family="gemm_tc": None)


def test_the_rule_takes_rung_6_for_big_products_and_rung_7_for_the_rest(no_table):
    assert gd.rule(problem(4096, 4096, 4096), 132) == gd.RUNG6
    assert gd.rule(problem(8192, 1024, 8192), 132) == gd.RUNG6
    for shape, tile in (((4096, 16, 4096), "64x16"), ((1, 4096, 4096), "64x8"), ((128, 1, 1024), "32x8"),
                        ((35, 8457, 2560), "64x64"), ((2048, 128, 2048), "128x128"), ((512, 8, 500_000), "32x8")):
        name = gd.rule(problem(*shape), 132)
        assert name.split(":")[1] == tile, (shape, name)


def test_the_rules_split_fills_the_sms_and_keeps_slices_a_split(no_table):
    # 4096x16x4096: 64 tiles of 64x16, 64 slices of K: two blocks a tile put one on every SM
    assert gd.rule(problem(4096, 16, 4096), 132) == "r7:64x16:s4"
    # 512x8x500000: 16 tiles of 32x8 and thousands of slices: the largest split
    assert gd.rule(problem(512, 8, 500_000), 132) == "r7:32x8:s8"
    # K = 128 (two slices): no split leaves a block under MIN_SLICES_A_SPLIT slices
    assert gd.rule(problem(64, 8, 128), 132).endswith(":s1")
    for shape in ((1, 4096, 4096), (16, 11008, 4096), (2048, 64, 2048), (300, 300, 300)):
        name = gd.rule(problem(*shape), 132)
        tile, split = gd.TILES[name.split(":")[1]], int(name.split(":s")[1])
        assert -(-shape[2] // tile["BK"]) // split >= gd.MIN_SLICES_A_SPLIT or split == 1


@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
def test_swapped_layouts_are_the_transposes_of_the_other_operand(layout):
    p = problem(40, 300, 96, layout)
    plain, swapped = split_layout(p, False), split_layout(p, True)
    assert (plain.M, plain.N, plain.TA, plain.TB, plain.TC) == (40, 300, int(layout[0] == "t"), int(layout[1] == "t"), 0)
    # C^T = B^T A^T: B^T is row-major exactly where B is a transposed view
    assert (swapped.M, swapped.N, swapped.TC) == (300, 40, 1)
    assert swapped.TA == 1 - int(layout[1] == "t") and swapped.TB == 1 - int(layout[0] == "t")
    assert (swapped.AV, swapped.BV) == (plain.BV, plain.AV)


def test_row_alignment_follows_the_contiguous_extent():
    assert [row_alignment(n) for n in (8, 4096, 12, 6, 9, 1)] == [16, 16, 8, 4, 2, 2]
    p = problem(35, 8457, 2560)  # B's rows (N = 8457 elements) start on 2-byte boundaries only
    assert split_layout(p, False).BV == 2 and split_layout(p, False).AV == 16


def test_without_a_measured_table_every_shape_keeps_rung_6(no_table):
    for shape in ((1, 4096, 4096), (4096, 16, 4096), (512, 8, 500_000), (4096, 4096, 4096)):
        c = gd.choose(problem(*shape))
        assert c.rung == "wgmma_cluster" and "no measured table" in c.why


def test_choose_swaps_the_long_side_onto_m_and_names_why(monkeypatch):
    monkeypatch.setattr(gd, "load_table", lambda arch, family="gemm_tc": {"device": "a GPU", "run": "t", "sms": 132, "rows": []})
    c = gd.choose(problem(1, 4096, 4096, "nt"))  # (an empty table: the rule, past the table's reach)
    assert c.rung == "split_k" and c.params["TC"] == 1 and "swapped" in c.why and "rule" in c.why
    assert (c.params["TA"], c.params["TB"]) == (0, 1)  # W (N x K) row-major as A, x^T as B
    c = gd.choose(problem(4096, 1, 4096))
    assert c.params["TC"] == 0
    assert gd.choose(TcProblem(64, 64, 64, "float32")).rung == "wgmma_cluster"  # TF32: rung 6 only


def test_the_table_decides_by_the_nearest_measured_shape(tmp_path, monkeypatch):
    table = {"device": "a GPU", "run": "test", "sms": 132, "rows": [
        {"M": 16, "N": 4096, "K": 4096, "us": {"r6": 40.0, "r7:64x16:s2": 9.0, "r7:64x8:s4": 12.0}},
        {"M": 4096, "N": 4096, "K": 4096, "us": {"r6": 190.0, "r7:128x128:s1": 300.0}},
    ]}
    monkeypatch.setattr(gd, "load_table", lambda arch, family="gemm_tc": table)
    near = gd.choose(problem(12, 3000, 5000))  # (a shape left out of the table: its nearest row's fastest)
    assert near.rung == "split_k" and near.params["BN"] == 16 and near.params["SPLITS"] == 2
    assert "nearest measured shape 16x4096x4096" in near.why
    assert gd.choose(problem(4000, 4100, 4000)).rung == "wgmma_cluster"
    far = gd.choose(problem(2, 2, 64))  # far from both rows: the rule
    assert "rule" in far.why and far.rung == "split_k"
    row, d = gd.nearest(table, 16, 4096, 4096, exclude=table["rows"][0])
    assert row is table["rows"][1] and d == pytest.approx(8.0)


def test_a_committed_table_names_only_known_candidates():
    from simtlab.ops.gemm_dispatch import TABLES

    names = set(gd.candidates())
    for path in TABLES.glob("gemm_tc_*.json"):
        table = json.loads(path.read_text())
        assert table["rows"] and {"device", "run", "sms", "rows"} <= set(table)
        for row in table["rows"]:
            assert set(row["us"]) <= names, path


def test_split_geometry_and_limits():
    params = {**gd.TILES["64x8"], "SPLITS": 4, "TC": 1}
    g = geometry_split_k(params, problem(3, 1000, 4096))  # swapped: 1000 rows of 64, 3 columns of 8
    assert g.grid == (1, 16, 4) and g.threads == split_threads(params) == 256 and g.shared == split_smem(params)
    with pytest.raises(ValueError, match="65535"):
        geometry_split_k({**params, "SPLITS": 8}, problem(8, 8, 64, batch=9000))


def test_every_candidate_tile_builds_without_spills_both_ways():
    from simtlab.catalog import family
    from simtlab.launch import build

    rung = family("gemm_tc").rung("split_k")
    for tile in gd.TILES.values():
        for layout in (split_layout(problem(96, 40, 64, "nt"), True), split_layout(problem(91, 59, 131, "tn"), False)):
            inst = build(rung, {**tile, "DT": 1, "OUT": 2, **layout.params}, "sm_90")
            res = inst.resources(None)
            assert res.spill_bytes == 0 and res.stack_frame == 0, (tile, layout)
