import pytest

from simtlab.catalog import family
from simtlab.ops import gemm_tc as tc


def test_parse_labels_and_counts():
    p = tc.parse_size("1000x1013x37:bf16")
    assert (p.M, p.N, p.K, p.dtype, p.label) == (1000, 1013, 37, "bfloat16", "1000x1013x37:bf16")
    assert tc.parse_size("64").label == "64x64x64:fp16"
    assert p.flops == 2 * 1000 * 1013 * 37 and p.bytes == 2 * (1000 * 37 + 37 * 1013) + 4 * 1000 * 1013
    for bad in ("0", "2x3", "64:fp8", "axbxc"):
        with pytest.raises(ValueError):
            tc.parse_size(bad)
    assert tc.dtype_params(p) == {"DT": 1} and tc.dtype_params(tc.parse_size("8")) == {"DT": 0}
    assert 0 < tc.tolerance(tc.parse_size("4096")) < 1e-3
    b = tc.parse_size("64x512x256x128:bf16")  # batched strided
    assert (b.batch, b.M, b.N, b.K, b.label) == (64, 512, 256, 128, "64x512x256x128:bf16")
    assert b.flops == 64 * 2 * 512 * 256 * 128 and b.bytes == 64 * tc.TcProblem(512, 256, 128).bytes
    with pytest.raises(ValueError, match="z limit"):
        tc.TcProblem(8, 8, 8, "float16", 70000)


@pytest.mark.parametrize("rung", family("gemm_tc").rungs, ids=lambda r: r.name)
@pytest.mark.parametrize("mnk", [(1, 1, 1), (127, 129, 65), (4096, 4096, 4096), (33, 1, 300)])
def test_every_output_has_a_block(rung, mnk):
    p = tc.TcProblem(*mnk)
    params = rung.params("sm_90", tc.dtype_params(p))
    L = rung.geometry(params, p)
    if rung.name == "wgmma_ws":  # persistent: one block per SM (or per tile), each walks tiles
        tiles = tc.wgmma_tiles(params, p)
        assert L.grid == (min(132, tiles), 1, 1) and tiles * params["BM"] * params["BN"] >= p.M * p.N
        assert L.threads == params["BM"] // 64 * 128 + 128 and L.shared <= 227 * 1024
        return
    if rung.name == "wgmma_cluster":  # persistent clusters of CM x CN blocks, as many tiles each
        for shape in (params, {**params, "CM": 1, "CN": 2}):
            cs, work = shape["CM"] * shape["CN"], tc.cluster_work(shape, p)
            L = tc.geometry_wgmma_cluster(shape, p)
            assert L.grid == (min(132 // cs, work) * cs, 1, 1) and L.grid[0] % cs == 0
            assert work * cs * shape["BM"] * shape["BN"] >= p.M * p.N
            assert L.threads == 2 * 128 + 128 and L.shared == tc.cluster_smem(shape) <= 227 * 1024
        return
    if rung.name == "split_k":  # clusters of SPLITS blocks along z share one tile's K; swapped (TC 1): C^T's tiles
        for swapped in (0, 1):
            shape = {**params, "TC": swapped}
            L = tc.geometry_split_k(shape, p)
            m, n = (p.N, p.M) if swapped else (p.M, p.N)
            assert L.grid[0] * shape["BN"] >= n and (L.grid[0] - 1) * shape["BN"] < n
            assert L.grid[1] * shape["BM"] >= m and (L.grid[1] - 1) * shape["BM"] < m
            assert L.grid[2] == shape["SPLITS"]
            assert tc.geometry_split_k(shape, tc.TcProblem(*mnk, batch=7)).grid[2] == 7 * shape["SPLITS"]
            assert L.threads == tc.split_threads(shape) <= 1024 and L.shared == tc.split_smem(shape) <= 227 * 1024
        return
    if rung.name == "wmma":
        bm, bn = 16 * params["WARPS_M"], 16 * params["WARPS_N"]
    else:
        bm, bn = params["BM"], params["BN"]
    assert L.grid[0] * bn >= p.N and (L.grid[0] - 1) * bn < p.N
    assert L.grid[1] * bm >= p.M and (L.grid[1] - 1) * bm < p.M
    assert L.grid[2] == 1 and rung.geometry(params, tc.TcProblem(*mnk, batch=7)).grid[2] == 7
    assert L.threads <= 1024 and L.shared <= 227 * 1024


def test_explicit_parameters_keep_the_problems_dtype():
    from simtlab.launch import choose_params

    rung = family("gemm_tc").rung("mma_multistage")
    p = tc.parse_size("256:bf16")
    assert choose_params(rung, p, None, True, explicit={"STAGES": 3}) == {"DT": 1, "STAGES": 3}


def test_tma_boxes_describe_the_row_major_operands():
    """Innermost dimension first, byte strides between rows and between matrices of the batch;
    A read in 64 x BM boxes, B in 64 x 64 boxes (BN/64 per slice); K and N must be multiples of 8."""
    params = {"BM": 128, "BN": 256, "STAGES": 4}
    a, b = tc.tma_boxes(params, tc.TcProblem(300, 136, 72, "bfloat16", 5))
    assert a.dims == (72, 300, 5) and a.strides == (144, 144 * 300) and a.box == (64, 128, 1)
    assert b.dims == (136, 72, 5) and b.strides == (272, 272 * 72) and b.box == (64, 64, 1)
    for bad in ((8, 12, 8), (8, 8, 12)):
        with pytest.raises(ValueError, match="multiples of 8"):
            tc.tma_boxes(params, tc.TcProblem(*bad))
    # TF32: 32 fp32 per 128-byte row; B^T (N x K) read in 32 x BN boxes
    a, b = tc.tma_boxes(params, tc.TcProblem(300, 136, 72, "float32", 5))
    assert a.dims == (72, 300, 5) and a.strides == (288, 288 * 300) and a.box == (32, 128, 1)
    assert b.dims == (72, 136, 5) and b.strides == (288, 288 * 136) and b.box == (32, 256, 1)
    # the ring (48 KiB a stage at 128x256), the barriers and the alignment slack fit the opt-in limit
    assert tc.wgmma_smem(params) == 4 * (384 * 64 * 2 + 8) + 1024 <= 227 * 1024
    # a cluster of 2 blocks shares B^T: each block's box is half the tile's rows
    _, b = tc.tma_boxes({**params, "CM": 2}, tc.TcProblem(300, 136, 72, "float32", 5))
    assert b.box == (32, 128, 1)
    # rung 6's TMA stores: C in 32-column x 64-row boxes
    c = tc.store_box(tc.TcProblem(300, 136, 72, "float16", 5))
    assert c.dims == (136, 300, 5) and c.strides == (544, 544 * 300) and c.box == (32, 64, 1)


def test_cluster_rung_shared_memory_and_its_limit():
    """Rung 6 adds two 8 KiB staging buffers per consumer warpgroup (EPI 1-3) and, when a store
    warp hands them back (EPI 2, 3), an 8-byte mbarrier each; 4 stages of 128x256 fit, 5 do not and
    are refused by name, as is a tile height the kernel has no warpgroups for."""
    p = tc.TcProblem(4096, 4096, 4096)
    params = family("gemm_tc").rung("wgmma_cluster").params("sm_90", {"DT": 0})
    ring = tc.wgmma_smem(params, 2)
    assert tc.cluster_smem({**params, "EPI": 0}) == ring
    assert tc.cluster_smem({**params, "EPI": 1}) == ring + 2 * 2 * 8192
    for epi in (2, 3):
        assert tc.cluster_smem({**params, "EPI": epi, "STAGES": 4}) == ring + 2 * 2 * (8192 + 8) <= 227 * 1024
    with pytest.raises(ValueError, match="BM is 64 or 128"):
        tc.geometry_wgmma_cluster({**params, "BM": 256, "BN": 128}, p)
    with pytest.raises(ValueError, match="shared memory"):
        tc.geometry_wgmma_cluster({**params, "STAGES": 5}, p)
    # 4096^3 at 128x256: 16 cluster tiles down x 16 across, 66 clusters of 2 on 132 SMs
    assert tc.cluster_work(params, p) == 16 * 16 and tc.geometry_wgmma_cluster(params, p).grid == (132, 1, 1)
    # an odd number of tile rows: the last cluster tile has one tile past the end
    assert tc.cluster_work(params, tc.TcProblem(300, 256, 64)) == 2
    # tiles side by side in pairs along N (A shared): each block of the pair loads half of A's rows
    beside = {**params, "CM": 1, "CN": 2}
    assert tc.cluster_work(beside, p) == 32 * 8 and tc.cluster_consumers(beside) == 2
    assert tc.cluster_work(beside, tc.TcProblem(300, 264, 64)) == 3 * 1  # 3 tile rows, 2 columns -> 1 pair
    a, _ = tc.tma_boxes(beside, tc.TcProblem(300, 264, 64))
    assert a.box == (64, 64, 1)
    # 2x2: each block loads half its A rows and half its B columns, each multicast to two blocks
    quad = {**params, "CM": 2, "CN": 2}
    assert tc.cluster_work(quad, p) == 8 * 16 and tc.geometry_wgmma_cluster(quad, p).grid == (132, 1, 1)
    a, b = tc.tma_boxes(quad, p)
    assert a.box == (64, 64, 1) and b.box[:2] == (64, 64)
    with pytest.raises(ValueError, match="CM and CN are 1 or 2"):
        tc.geometry_wgmma_cluster({**params, "CM": 4, "CN": 1}, p)


def test_cluster_grid_is_cut_to_the_clusters_the_device_holds(monkeypatch):
    """A persistent grid of clusters larger than the device holds at once would leave clusters
    waiting for others to finish all their tiles: the runner cuts it to the driver's count."""
    from simtlab.launch import Launch, LaunchError

    class Func:  # (as a CuPy RawKernel: the driver's handle in .kernel.ptr)
        class kernel:
            ptr = 1

    grid = Launch((132, 1, 1), (384, 1, 1), 200_000)
    monkeypatch.setattr(tc, "max_active_clusters", lambda ptr, threads, shared: 32)
    assert tc.resident_clusters(Func(), grid, 4) == Launch((128, 1, 1), (384, 1, 1), 200_000)
    assert tc.resident_clusters(Func(), Launch((64, 1, 1), (384, 1, 1), 200_000), 4).grid == (64, 1, 1)
    monkeypatch.setattr(tc, "max_active_clusters", lambda ptr, threads, shared: 1 / 0)
    assert tc.resident_clusters(Func(), grid, 2) == grid  # (clusters of 2: no driver query)
    assert tc.resident_clusters(Func(), grid, 1) == grid  # (no cluster: nothing to ask)
    monkeypatch.setattr(tc, "max_active_clusters", lambda ptr, threads, shared: 0)
    with pytest.raises(LaunchError, match="no cluster of 4 blocks"):
        tc.resident_clusters(Func(), grid, 4)


def test_hopper_rung_is_built_for_sm90a_and_refused_elsewhere():
    from simtlab.launch import UnsupportedArchError, build

    rung = family("gemm_tc").rung("wgmma_tma")
    assert rung.supports((9, 0)) and not rung.supports((8, 0)) and not rung.supports((10, 0))
    assert rung.build_arch("sm_90") == "sm_90a" and "exactly 9.0" in rung.requirement
    for arch in ("sm_80", "sm_100"):
        with pytest.raises(UnsupportedArchError, match="sm_90a"):
            build(rung, None, arch)


def test_tf32_problems_and_the_rungs_that_take_them():
    from simtlab.launch import unsupported_reason

    p = tc.parse_size("4096:tf32")
    assert (p.dtype, p.label, tc.dtype_params(p)) == ("float32", "4096x4096x4096:tf32", {"DT": 2})
    assert p.bytes == 4 * 2 * 4096 * 4096 + 4 * 4096 * 4096
    # TF32 keeps 10 mantissa bits: its tolerance is the fp16/bf16 one plus 2^-9
    assert tc.tolerance(p) == pytest.approx(tc.tolerance(tc.parse_size("4096")) + 2 ** -9)
    for rung in family("gemm_tc").rungs:
        reason = unsupported_reason(rung, p)
        assert (reason is None) == rung.can(tc.TF32), rung.name
        assert unsupported_reason(rung, tc.parse_size("64:bf16")) is None
    assert "wgmma_ws" in unsupported_reason(family("gemm_tc").rung("wmma"), p)


def test_cluster_rung_keeps_five_pieces_only_for_long_main_loops_and_batches():
    """KEEP 5 and a 16-bit C in 64x64 pieces (WIDE 1) where K has 64 slices or more (4096 for 16-bit
    inputs, 2048 for TF32), else KEEP 4 and 64x32 pieces; batches keep 5 pieces (measured at
    64x512^3) with 64x32 pieces."""
    row_major = {"TA": 0, "TB": 0}
    assert tc.cluster_params(tc.TcProblem(4096, 4096, 4096, "bfloat16")) == {"DT": 1, "KEEP": 5, "OUT": 0, "WIDE": 1,
                                                                              **row_major}
    assert tc.cluster_params(tc.TcProblem(4096, 4096, 4032, "float16")) == {"DT": 0, "KEEP": 4, "OUT": 0, "WIDE": 0,
                                                                             **row_major}  # 63 slices
    assert tc.cluster_params(tc.TcProblem(2048, 2048, 2048, "bfloat16"))["KEEP"] == 4
    assert tc.cluster_params(tc.TcProblem(512, 512, 512, "bfloat16", 64)) == {"DT": 1, "KEEP": 5, "OUT": 0, "WIDE": 0,
                                                                               **row_major}
    assert tc.cluster_params(tc.TcProblem(4096, 4096, 2048, "float32")) == {"DT": 2, "KEEP": 5, "OUT": 0, "WIDE": 1,
                                                                             **row_major}
    rung = family("gemm_tc").rung("wgmma_cluster")
    assert rung.size_defaults is tc.cluster_params and rung.params("sm_90")["KEEP"] == 4


def test_sixteen_bit_output_is_a_second_suffix_for_rung_6_only():
    from simtlab.catalog import family

    p = tc.parse_size("4096:bf16:bf16")
    assert (p.dtype, p.out) == ("bfloat16", "bfloat16") and p.label == "4096x4096x4096:bf16:bf16"
    assert tc.parse_size(p.label) == p and tc.parse_size("4096:bf16:fp32") == tc.parse_size("4096:bf16")
    assert tc.parse_size("2x64x64x64:fp16:fp16").batch == 2
    assert p.bytes == 2 * (2 * 4096 * 4096) + 2 * 4096 * 4096  # C at two bytes an element
    # the tolerance adds half an ulp of the output type to the accumulation bound
    assert tc.tolerance(p) == pytest.approx(tc.tolerance(tc.parse_size("4096:bf16")) + 2.0 ** -8)
    assert tc.tolerance(tc.parse_size("64:fp16:fp16")) == pytest.approx(tc.tolerance(tc.parse_size("64")) + 2.0 ** -11)
    for bad, why in (("64:tf32:bf16", "float32 or the inputs' own type"), ("64:fp16:bf16", "float32 or the inputs"),
                     ("64:bf16:fp64", "output type is fp32, fp16 or bf16")):
        with pytest.raises(ValueError, match=why):
            tc.parse_size(bad)
    fam = family("gemm_tc")
    assert "written by rung wgmma_cluster and split_k only" in tc.unsupported(fam.rung("wgmma_ws"), p)
    assert tc.unsupported(fam.rung("wgmma_cluster"), p) is None
    assert tc.cluster_params(p)["OUT"] == 2 and tc.cluster_params(tc.parse_size("64:fp16:fp16"))["OUT"] == 1
    assert tc.cluster_params(tc.parse_size("64:bf16"))["OUT"] == 0
    params = fam.rung("wgmma_cluster").params("sm_90", {"DT": 1, "OUT": 2})
    with pytest.raises(ValueError, match="needs EPI 1-3"):
        tc.geometry_wgmma_cluster({**params, "EPI": 0}, p)
    box = tc.store_box(tc.TcProblem(300, 136, 72, "bfloat16", 5, "bfloat16"))
    assert box.strides == (2 * 136, 2 * 136 * 300) and box.box == (64, 64, 1)  # 128-byte rows of 64 columns


def test_cluster_pairs_only_when_the_tiles_take_more_than_one_round():
    """CM 1 where every 128x256 tile has an SM (132 by default, or the device's), else the
    catalog's CM 2."""
    assert tc.cluster_params(tc.parse_size("2048:bf16"))["CM"] == 1  # 128 tiles
    assert "CM" not in tc.cluster_params(tc.parse_size("2048x2304x64:bf16"))  # 144 tiles
    assert "CM" not in tc.cluster_params(tc.parse_size("64x512x512x512:bf16"))  # 512 tiles over the batch

    class Small:
        sms = 100

    assert "CM" not in tc.cluster_params(tc.parse_size("2048:bf16"), Small())


def test_layout_suffix_and_what_reads_transposed_views():
    """'...:tn' names A^T B (A stored K x M): a last suffix, after the types; only rung 6 reads
    transposed views, and only where their contiguous extents make whole 16-byte rows."""
    p = tc.parse_size("4096:bf16:bf16:tn")
    assert (p.dtype, p.out, p.layout, p.ta, p.tb) == ("bfloat16", "bfloat16", "tn", True, False)
    assert p.label == "4096x4096x4096:bf16:bf16:tn" and tc.parse_size(p.label) == p
    assert tc.parse_size("64:nt").layout == "nt" and tc.parse_size("64:bf16").layout == "nn"
    assert tc.parse_size("64:bf16:nn").label == "64x64x64:bf16"
    for bad, why in (("64:tf32:tt", "no transposes"), ("64:bf16:bf16:tn:nn", "at most"), ("64:bf16:xy", "a layout")):
        with pytest.raises(ValueError, match=why):
            tc.parse_size(bad)
    fam = family("gemm_tc")
    assert tc.unsupported(fam.rung("wgmma_cluster"), p) is None
    assert "rung wgmma_cluster and split_k only" in tc.unsupported(fam.rung("mma_multistage"), p)
    # A^T's contiguous extent is M, B^T's is K: TN takes any K, NT needs K but not M in whole units
    assert tc.tma_ready(tc.TcProblem(64, 64, 30, "float16", layout="tn"))
    assert not tc.tma_ready(tc.TcProblem(64, 64, 30, "float16", layout="nt"))
    assert not tc.tma_ready(tc.TcProblem(60, 64, 64, "float16", layout="tn"))
    assert tc.tma_ready(tc.TcProblem(60, 64, 64, "float16", layout="nt"))
    assert tc.cluster_params(tc.TcProblem(64, 64, 64, "float16", layout="tt")) == {
        "DT": 0, "KEEP": 4, "OUT": 0, "WIDE": 0, "TA": 1, "TB": 1, "CM": 1}
    # shapes that run on padded row-major copies are built for row-major operands
    assert tc.cluster_params(tc.TcProblem(60, 64, 64, "float16", layout="tn"))["TA"] == 0


def test_tensor_maps_follow_the_layout():
    params = family("gemm_tc").rung("wgmma_cluster").params("sm_90")  # 128 x 256 tiles, CM 2
    a, b = tc.tma_boxes(params, tc.TcProblem(256, 512, 192, "bfloat16", 3, layout="tt"))
    assert a.dims == (256, 192, 3) and a.strides == (2 * 256, 2 * 256 * 192) and a.box == (64, 64, 1)  # A^T: M inner
    assert b.dims == (192, 512, 3) and b.strides == (2 * 192, 2 * 192 * 512) and b.box == (64, 128, 1)  # B^T: K inner
    a, b = tc.tma_boxes(params, tc.TcProblem(256, 512, 192, "bfloat16"))
    assert a.dims == (192, 256, 1) and a.box == (64, 128, 1) and b.dims == (512, 192, 1) and b.box == (64, 64, 1)
    with pytest.raises(ValueError, match="multiples of 8"):
        tc.tma_boxes(params, tc.TcProblem(250, 512, 192, "bfloat16", layout="tn"))


def test_every_layout_of_rung_6_compiles_spill_free():
    """The four layouts, fp16 and bf16, and a 16-bit C (64-column pieces, KEEP 4 and 5 both keeping
    two of them), as the library call builds them (sm_90a)."""
    from simtlab.launch import build

    rung = family("gemm_tc").rung("wgmma_cluster")
    for layout, dt, out, keep in (("nn", 0, 0, 4), ("nt", 1, 0, 4), ("tn", 0, 0, 4), ("tt", 1, 0, 4),
                                  ("nn", 1, 1, 5), ("tt", 0, 2, 4)):
        params = {"DT": dt, "TA": int(layout[0] == "t"), "TB": int(layout[1] == "t"), "OUT": out, "KEEP": keep}
        res = build(rung, params, "sm_90").resources(None)
        assert res.spill_bytes == 0 and res.stack_frame == 0, (layout, out, res)
