import pytest

from simtlab.catalog import family
from simtlab.ops import softmax as sm


def test_parse_and_counts():
    p = sm.parse_size("32768x4096")
    assert (p.rows, p.cols, p.label, p.bytes) == (32768, 4096, "32768x4096", 8 * 32768 * 4096)
    for bad in ("4096", "0x5", "1x2x3", "ax3", "4x4:fp8", "4x4:int8", "4x4:softmax_grad"):
        with pytest.raises(ValueError):
            sm.parse_size(bad)
    assert 0 < sm.tolerance(p) < 1e-4
    q = sm.parse_size("32768x4096:bf16")
    assert (q.dtype, q.label, q.bytes) == ("bfloat16", "32768x4096:bf16", 4 * 32768 * 4096)
    assert sm.tolerance(p) < sm.tolerance(q) < 1e-2
    assert sm.row_params(q)["DT"] == 1 and sm.dtype_params(p) == {"DT": 0}
    with pytest.raises(ValueError, match="float32, bfloat16 or float16"):
        sm.SoftmaxProblem(4, 4, "float64")
    h = sm.parse_size("8x5:log_softmax_backward:fp16")
    assert (h.dtype, h.op, h.label, h.bytes) == ("float16", "log_softmax_backward", "8x5:fp16:log_softmax_backward",
                                                  3 * 2 * 8 * 5)
    assert sm.parse_size(h.label) == h and sm.tolerance(h) < sm.tolerance(sm.parse_size("8x5:bf16:log_softmax_backward"))


@pytest.mark.parametrize("cols", [1, 3, 128, 129, 1000, 1024, 1025, 4096, 8192, 8193, 32768])
def test_rung4_shape_covers_the_row(cols):
    p = sm.SoftmaxProblem(10, cols)
    q = sm.row_params(p)
    lanes = 32 if q["WARP_ROWS"] else q["BLOCK"]
    assert 1 <= q["VPT"] <= 8 and lanes * q["VPT"] * 4 >= cols
    assert (q["WARP_ROWS"] == 1) == (cols <= 1024)


def test_rung4_refuses_rows_it_cannot_hold():
    with pytest.raises(ValueError, match="at most 32768"):
        sm.row_params(sm.SoftmaxProblem(1, 32769))


@pytest.mark.parametrize("rung", family("softmax").rungs, ids=lambda r: r.name)
@pytest.mark.parametrize("shape", [(1, 1), (1000, 3), (5, 1024), (32768, 4096), (7, 32768)])
def test_every_row_has_a_block_or_warp(rung, shape):
    p = sm.SoftmaxProblem(*shape)
    params = rung.params("sm_90", rung.size_defaults(p) if rung.size_defaults else None)
    L = rung.geometry(params, p)
    if rung.stage == 6:  # whole clusters taking rows in turn, no more than the rows
        assert L.grid[0] % params["CLUSTER"] == 0 and 1 <= L.grid[0] // params["CLUSTER"] <= p.rows
        return
    per_block = params["BLOCK"] // 32 if params.get("WARP_ROWS") else 1
    assert L.grid[0] * per_block >= p.rows and (L.grid[0] - 1) * per_block < p.rows


def test_each_rung_reads_less():
    p = sm.parse_size("32768x4096")
    req = [r.requested_bytes({}, p) for r in family("softmax").rungs]
    assert req == sorted(req, reverse=True) and req[-1] == p.bytes


def test_the_register_row_space_and_what_it_refuses():
    """softmax rung 4's space (layernorm's adds EARLY): every point fits its registers by design; at
    a given row length the points whose lanes cannot hold the row are refused at launch, by name."""
    sm4, ln2 = family("softmax").rung("vectorized"), family("layernorm").rung("welford")
    points = sm4.space(232448).valid()
    assert len(points) == 110 and 110 < len(ln2.space(232448).valid()) < 220
    assert all(4 * c["VPT"] + 24 <= min(255, 65536 // c["BLOCK"]) for c in points)
    p = sm.SoftmaxProblem(8, 4096)
    held = [c for c in points if (32 if c["WARP_ROWS"] else c["BLOCK"]) * 4 * c["VPT"] >= p.cols]
    assert 0 < len(held) < len(points)
    for c in points:
        params = sm4.params("sm_90", {**sm.row_params(p), **c})
        if c in held:
            assert sm4.geometry(params, p).block[0] == c["BLOCK"]
        else:
            with pytest.raises(ValueError, match="not a 4096-value row"):
                sm4.geometry(params, p)


@pytest.mark.parametrize("rung", [("softmax", "vectorized"), ("layernorm", "two_sums")], ids=lambda r: r[0])
def test_the_space_s_heaviest_points_compile_without_spills(rung, tmp_path, monkeypatch):
    """At each block size, the most values a thread the space allows (layernorm: with EARLY too)."""
    from simtlab.launch import build

    monkeypatch.setenv("SIMTLAB_CACHE_DIR", str(tmp_path))
    r = family(rung[0]).rung(rung[1])
    points = r.space(232448).valid()
    heaviest = {}
    for c in points:
        key = (c["BLOCK"], c.get("EARLY", 0))
        if c["WARP_ROWS"] == 0 and c["VPT"] > heaviest.get(key, {"VPT": 0})["VPT"]:
            heaviest[key] = c
    for c in heaviest.values():
        res = build(r, {**r.defaults, **c}, "sm_90").resources()
        assert res.spill_stores == 0 and res.spill_loads == 0, (c, res)
