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
    op = {"rms": "rms_norm", "backward": "layer_norm_backward", "cluster_rows": "layer_norm_backward"}.get(rung.name,
                                                                                                    "layer_norm")
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
    if rung.name == "cluster_rows":  # whole clusters; a row's blocks cover it, each some of it
        size = params["CLUSTER"] * params["GROUP"]
        span = params["BLOCK"] * 4 * params["VPT"]
        assert L.grid[0] % size == 0 and 1 <= L.grid[0] // size <= -(-p.rows // params["GROUP"])
        assert span * params["CLUSTER"] >= p.cols > span * (params["CLUSTER"] - 1)
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


@pytest.mark.parametrize("cols", [1, 3, 100, 1000, 1024, 4095, 4096, 4104, 8192, 20000, 32768, 32776, 65536])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_cluster_rows_shape_fits_the_row_and_an_sm(cols, dtype):
    """Rung 6: 8 or 16 values a thread, at most 8 blocks a cluster, one cluster shape (a row split,
    or teams of whole rows), and the stages plus the w slice within an SM's shared memory at 1024
    threads an SM (512 at 16 values)."""
    rung = family("layernorm").rung(6)
    p = ln.LayerNormProblem(4096, cols, dtype, "rms_norm_backward")
    params = rung.params("sm_90", ln.cluster_params(p))
    launch = ln.geometry_cluster(params, p)
    assert params["CLUSTER"] * params["GROUP"] <= ln.CLUSTER_MAX and min(params["CLUSTER"], params["GROUP"]) == 1
    assert 2 <= params["STAGES"] <= 4 and params["BLOCK"] % 32 == 0
    assert min(16, max(1, 2048 // params["VPT"] // params["BLOCK"])) * (launch.shared + 5120) <= 228 * 1024
    assert launch.shared >= 8 * 4 * params["VPT"] * params["BLOCK"]  # (teams add their column sums in the stages')
    assert params["VPT"] == (2 if dtype == "float32" else 4)


def test_cluster_rows_refuses_rows_past_eight_blocks_and_counts_one_read():
    rung = family("layernorm").rung(6)
    assert "at most 8 blocks" in ln.unsupported(rung, ln.LayerNormProblem(2, 65537, op="layer_norm_backward"))
    assert ln.unsupported(rung, ln.LayerNormProblem(2, 65536, op="layer_norm_backward")) is None
    assert "backwards" in ln.unsupported(rung, ln.LayerNormProblem(2, 64, op="layer_norm"))
    p = ln.LayerNormProblem(4096, 32768, "bfloat16", "layer_norm_backward")
    five, six = (family("layernorm").rung(r).requested_bytes({}, p) for r in (5, 6))
    assert six < 0.65 * five and six >= 3 * 2 * 4096 * 32768  # rung 5 reads these rows twice; rung 6 once
