import pytest

from simtlab.catalog import family
from simtlab.ops import layernorm as ln


def test_parse_and_counts():
    p = ln.parse_size("32768x4096")
    assert (p.rows, p.cols, p.dtype, p.label) == (32768, 4096, "float32", "32768x4096")
    assert p.bytes == 4 * (2 * 32768 * 4096 + 2 * 4096)
    q = ln.parse_size("32768x4096:bf16")
    assert q.dtype == "bfloat16" and q.bytes == p.bytes // 2
    for bad in ("4096", "0x5", "3x4:fp8", "ax3", "3x4:layer_norm_grad"):
        with pytest.raises(ValueError, match="layernorm"):
            ln.parse_size(bad)
    assert 0 < ln.tolerance(p) < ln.tolerance(q) < 1e-2


@pytest.mark.parametrize("rung", family("layernorm").rungs, ids=lambda r: r.name)
@pytest.mark.parametrize("shape", [(1, 1), (1000, 3), (5, 1024), (32768, 4096), (7, 32768), (3, 1025)])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_every_row_is_covered(rung, shape, dtype):
    op = {"rms": "rms_norm", "backward": "layer_norm_backward"}.get(rung.name, "layer_norm")
    p = ln.LayerNormProblem(*shape, dtype, op)
    params = rung.params("sm_90", rung.size_defaults(p))
    L = rung.geometry(params, p)
    if rung.name == "backward" and params["VPT"] == ln.STREAMED:  # column blocks x slices of the rows
        assert L.grid[0] * params["BLOCK"] * 4 >= p.cols > (L.grid[0] - 1) * params["BLOCK"] * 4
        assert 1 <= L.grid[1] <= p.rows and ln.statistics_launch(params, p).grid[0] == p.rows
        return
    if rung.name == "backward":  # a persistent grid: a block (a slot a warp) a row at most, striding over the rest
        per_block = params["BLOCK"] // 32 if params["WARP_ROWS"] else 1
        assert 1 <= L.grid[0] <= -(-p.rows // per_block)
        return
    per_block = params["BLOCK"] // 32 if params.get("WARP_ROWS") else 1
    assert L.grid[0] * per_block >= p.rows and (L.grid[0] - 1) * per_block < p.rows
    if rung.name in ("welford", "two_sums"):
        lanes = 32 if params["WARP_ROWS"] else params["BLOCK"]
        assert lanes * params["VPT"] * 4 >= p.cols


def test_one_read_is_the_point():
    p = ln.parse_size("32768x4096")
    three, one, also_one = (r.requested_bytes({}, p) for r in family("layernorm").rungs[:3])
    assert one == also_one == p.bytes and three > 1.9 * one


def test_weight_and_bias_load_early_only_where_registers_allow():
    assert ln.row_params(ln.LayerNormProblem(8, 4096))["EARLY"] == 1
    assert ln.row_params(ln.LayerNormProblem(8, 32768))["EARLY"] == 0
    q = ln.row_params(ln.LayerNormProblem(8, 4096, "bfloat16"))  # the sweep's best shape for bf16
    assert (q["BLOCK"], q["VPT"], q["EARLY"]) == (128, 8, 0)
    for cols in (1025, 2048, 4097, 8192, 32768):
        q = ln.row_params(ln.LayerNormProblem(8, cols, "bfloat16"))
        assert q["BLOCK"] % 32 == 0 and q["BLOCK"] * q["VPT"] * 4 >= cols and q["VPT"] <= 8
