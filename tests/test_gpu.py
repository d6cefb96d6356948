"""GPU tests: every rung verified on odd shapes against float64 and the library, timing sane."""

import numpy as np
import pytest

from simtlab.catalog import all_rungs, family
from simtlab.launch import build, choose_params, prepare, runner
from simtlab.verify import compare

pytestmark = pytest.mark.gpu

GEMM_SHAPES = [(1, 1, 1), (127, 129, 65), (1000, 1013, 37), (64, 64, 64), (1, 4096, 1), (33, 1, 300)]
SCALES = [(1.0, 0.0), (0.5, -2.0)]


def _run_rung(fam, rung, problem, seed, ladder_params=False, edit=None, params=None):
    """Run a rung once on fresh, poisoned inputs: at its catalog defaults, or (`ladder_params`) at the
    parameters the ladder would choose for the problem (its dtype, radius or row length), or at
    `params` over the defaults. `edit(ws)` may overwrite inputs first (special values)."""
    import cupy

    from simtlab.device import device_info

    dev = device_info()
    ws = fam.op().workspace(problem, seed)
    if edit is not None:
        edit(ws)
    vec = ws.vec_ok() if rung.vec_variant else None
    inst = build(rung, choose_params(rung, problem, dev, vec) if ladder_params else params, dev.arch)
    ws.poison()
    runner(inst, problem, ws, vec, dev)()
    cupy.cuda.get_current_stream().synchronize()
    return ws


def _matches_float64_then_library(ws, tol, library):
    """Our output within `tol` of the float64 reference; then the library's own result (`library(ws)`,
    written into the poisoned output) within 2*tol of ours. (The workspace's output(): C as numbers,
    a bf16 C widened from its bits.)"""
    import cupy

    ours = ws.output().copy()
    verdict = compare(ours, ws.expected(), tol)
    assert verdict.ok, verdict.reason
    ws.poison()
    library(ws)()
    cupy.cuda.get_current_stream().synchronize()
    assert compare(ours, ws.output(), 2 * tol).ok


@pytest.mark.parametrize("rung", family("gemm").rungs, ids=lambda r: r.name)
@pytest.mark.parametrize("mnk", GEMM_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("scale", SCALES, ids=lambda s: f"a{s[0]}b{s[1]}")
def test_gemm_rung_matches_float64_and_cublas(rung, mnk, scale):
    from simtlab.ops import gemm

    p = gemm.GemmProblem(*mnk, *scale)
    # rung 11's catalog defaults store C through tensor maps (16-byte rows): at an odd N it runs with
    # what the ladder picks for the shape (the register epilogue), as every caller gets it
    ws = _run_rung(family("gemm"), rung, p, seed=hash((rung.name, mnk, scale)) & 0xFFFF,
                   ladder_params=rung.can(gemm.TF32X3) or rung.name == "f16x3")
    _matches_float64_then_library(ws, gemm.tolerance(p), gemm._cublas_sgemm)


# With 128x256 tiles and 16-deep slices: interior and edge tiles in one launch, K with a partial
# last slice, every tile interior, rows of B not 16-byte aligned (no interior path), a deep K.
@pytest.mark.parametrize("mnk", [(300, 600, 100), (256, 512, 64), (1000, 1013, 37), (129, 1024, 2048),
                                 (4097, 4095, 4093)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.gemm
@pytest.mark.parametrize("scale", SCALES, ids=lambda s: f"a{s[0]}b{s[1]}")
@pytest.mark.parametrize("interior", [0, 1])
def test_gemm_tuned_interior_copies_match_float64_and_cublas(mnk, scale, interior):
    from simtlab.ops import gemm

    p = gemm.GemmProblem(*mnk, *scale)
    ws = _run_rung(family("gemm"), family("gemm").rung("tuned"), p, seed=sum(mnk), params={"INTERIOR": interior})
    _matches_float64_then_library(ws, gemm.tolerance(p), gemm._cublas_sgemm)


@pytest.mark.gemm
@pytest.mark.parametrize("mnk", [(4097, 4095, 4093), (2048, 2048, 2048)], ids=lambda s: "x".join(map(str, s)))
def test_gemm_top_rungs_large(mnk):
    from simtlab.ops import gemm

    for name in ("multistage", "tuned"):
        p = gemm.GemmProblem(*mnk)
        ws = _run_rung(family("gemm"), family("gemm").rung(name), p, seed=7)
        v = compare(ws.C, ws.expected(), gemm.tolerance(p))
        assert v.ok, (name, v.reason)


@pytest.mark.parametrize("rung", family("elementwise").rungs, ids=lambda r: r.name)
@pytest.mark.parametrize("n", [1, 3, 127, 1000003, 1 << 22])
def test_elementwise_rung(rung, n):
    from simtlab.ops import elementwise

    p = elementwise.VecProblem(n)
    ws = _run_rung(family("elementwise"), rung, p, seed=n)
    v = compare(ws.z, ws.expected(), elementwise.tolerance(p))
    assert v.ok, v.reason


@pytest.mark.elementwise
def test_elementwise_unaligned_takes_the_scalar_path():
    import cupy

    from simtlab.device import device_info
    from simtlab.ops import elementwise

    dev = device_info()
    rung = family("elementwise").rung("float4")
    inst = build(rung, None, dev.arch)
    n = 1001
    buf = cupy.random.default_rng(3).random(3 * (n + 1), dtype=cupy.float32)
    x, y, z = buf[1 : n + 1], buf[n + 2 : 2 * n + 2], cupy.full(n, np.nan, cupy.float32)
    assert x.data.ptr % 16 != 0
    launch = inst.geometry(elementwise.VecProblem(n), dev)
    func = prepare(inst, launch, False, dev)
    func(launch.grid, launch.block, (x, y, z, np.int64(n)))
    assert compare(z, x.astype(cupy.float64) + y, 1e-6).ok


@pytest.mark.gemm
@pytest.mark.api
def test_gemm_api_on_misaligned_and_torch_inputs():
    import cupy

    import simtlab

    M, N, K = 67, 64, 128
    buf = cupy.random.default_rng(0).random(M * K + 1, dtype=cupy.float32)
    A = buf[1:].reshape(M, K)  # contiguous but not 16-byte aligned
    B = cupy.random.default_rng(1).random((K, N), dtype=cupy.float32)
    C = simtlab.gemm(A, B)
    assert compare(C, A.astype(cupy.float64) @ B.astype(cupy.float64), 1e-5).ok
    for rung in ("naive", 7, "warptiling"):
        assert compare(simtlab.gemm(A, B, rung=rung), A.astype(cupy.float64) @ B, 1e-5).ok
    torch = pytest.importorskip("torch")
    a, b = torch.rand(M, K, device="cuda"), torch.rand(K, N, device="cuda")
    c = simtlab.gemm(a, b)
    assert isinstance(c, torch.Tensor)
    assert torch.allclose(c, (a.double() @ b.double()).float(), rtol=1e-4, atol=1e-4)


@pytest.mark.gemm_tc
@pytest.mark.api
@pytest.mark.parametrize("shape", [(256, 512, 1024), (67, 65, 131), (3, 129, 72, 200)], ids=lambda s: "x".join(map(str, s)))
def test_gemm_tc_api_on_cupy_and_torch_inputs(shape):
    """simtlab.gemm_tc: fp16 CuPy arrays and fp16 / bf16 PyTorch tensors (bf16 zero-copy as its bits),
    2-D and batched, odd K and N (padded copies), C in fp32 or the inputs' type, rung 6 and rung 3,
    each against the float64 product within the family's tolerance."""
    import cupy

    import simtlab
    from simtlab.ops import gemm_tc

    *lead, M, N, K = shape
    rng = cupy.random.default_rng(7)
    A = (rng.random((*lead, M, K), dtype=cupy.float32) * 2 - 1).astype(cupy.float16)
    B = (rng.random((*lead, K, N), dtype=cupy.float32) * 2 - 1).astype(cupy.float16)
    ref = A.astype(cupy.float64) @ B.astype(cupy.float64)
    for out, rung in (("float32", "best"), ("float16", "best"), ("float32", "mma_multistage")):
        C = simtlab.gemm_tc(A, B, out_dtype=out, rung=rung)
        assert C.dtype == cupy.dtype(out) and C.shape == ref.shape
        p = gemm_tc.TcProblem(M, N, K, "float16", lead[0] if lead else 1, out)
        verdict = compare(C, ref, gemm_tc.tolerance(p))
        assert verdict.ok, (out, rung, verdict.reason)
    C = cupy.full(ref.shape, cupy.nan, dtype=cupy.float32)  # in place
    assert simtlab.gemm_tc(A, B, C) is C and compare(C, ref, gemm_tc.tolerance(gemm_tc.TcProblem(M, N, K))).ok
    torch = pytest.importorskip("torch")
    a = torch.from_dlpack(A).to(torch.bfloat16)
    b = torch.from_dlpack(B).to(torch.bfloat16)
    ref = a.double() @ b.double()
    for out in ("float32", "bfloat16"):
        c = simtlab.gemm_tc(a, b, out_dtype=out)
        assert isinstance(c, torch.Tensor) and c.dtype == getattr(torch, out) and tuple(c.shape) == tuple(ref.shape)
        p = gemm_tc.TcProblem(M, N, K, "bfloat16", lead[0] if lead else 1, out)
        err = float(torch.linalg.vector_norm((c.double() - ref).flatten()) / torch.linalg.vector_norm(ref.flatten()))
        assert err <= gemm_tc.tolerance(p), (out, err)


@pytest.mark.gemm_tc
@pytest.mark.api
def test_gemm_tc_api_errors():
    import cupy

    import simtlab

    a = cupy.ones((4, 8), cupy.float16)
    b = cupy.ones((8, 16), cupy.float16)
    cases = [  # (the error, what it must say, the call)
        (TypeError, "takes float16 or bfloat16", lambda: simtlab.gemm_tc(a.astype(cupy.float32), b)),
        (ValueError, "inner dimensions", lambda: simtlab.gemm_tc(a, a)),
        (ValueError, "out_dtype is 'float32' or the inputs' own type", lambda: simtlab.gemm_tc(a, b, out_dtype="bfloat16")),
        (ValueError, "C is float16", lambda: simtlab.gemm_tc(a, b, cupy.ones((4, 16), cupy.float16))),
        (ValueError, "both 2-D", lambda: simtlab.gemm_tc(a[None], b)),
        (TypeError, "GPU array", lambda: simtlab.gemm_tc(np.ones((4, 8), np.float16), b)),
        (ValueError, "must be >= 1", lambda: simtlab.gemm_tc(cupy.ones((0, 8), cupy.float16), b)),
    ]
    for error, says, call in cases:
        with pytest.raises(error, match=says):
            call()
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="A is bfloat16 and B is float16"):
        simtlab.gemm_tc(torch.ones(4, 8, device="cuda", dtype=torch.bfloat16),
                        torch.ones(8, 16, device="cuda", dtype=torch.float16))
    with pytest.raises(TypeError, match="pass one library's arrays"):
        simtlab.gemm_tc(torch.ones(4, 8, device="cuda", dtype=torch.bfloat16), b)


@pytest.mark.gemm
@pytest.mark.api
def test_gemm_api_errors():
    import cupy

    import simtlab

    a = cupy.ones((4, 5), cupy.float32)
    b = cupy.ones((5, 3), cupy.float32)
    with pytest.raises(TypeError, match="dtype float64"):
        simtlab.gemm(a.astype(cupy.float64), b)
    with pytest.raises(ValueError, match="inner dimensions"):
        simtlab.gemm(a, a)
    with pytest.raises(TypeError, match="GPU array"):
        simtlab.gemm(np.ones((4, 5), np.float32), b)
    with pytest.raises(ValueError, match="C-contiguous"):
        simtlab.gemm(cupy.ones((4, 10), cupy.float32)[:, ::2], b)  # (a transposed view is taken: tests/test_api_gpu.py)
    with pytest.raises(ValueError, match="C has shape"):
        simtlab.gemm(a, b, cupy.ones((3, 3), cupy.float32), beta=1.0)
    with pytest.raises(ValueError, match="2-D"):
        simtlab.gemm(cupy.ones(5, cupy.float32), b)
    with pytest.raises(ValueError, match="needs an input C"):
        simtlab.gemm(a, b, beta=1.0)
    with pytest.raises(ValueError, match="sizes must be >= 1"):
        simtlab.gemm(cupy.ones((0, 5), cupy.float32), b)
    with pytest.raises(ValueError, match="C-contiguous"):
        simtlab.gemm(a[::-1], b)  # negative stride


@pytest.mark.gemm
@pytest.mark.ladder
@pytest.mark.api
def test_out_of_memory_is_named_and_leaves_nothing_allocated(tmp_path):
    import cupy

    import simtlab
    from simtlab.ladder import run_ladder
    from simtlab.store import Store

    pool = cupy.get_default_memory_pool()
    before = pool.used_bytes()
    a = cupy.ones((200_000, 8), cupy.float32)
    b = cupy.ones((8, 200_000), cupy.float32)
    with pytest.raises(MemoryError, match="does not fit on GPU"):
        simtlab.gemm(a, b)  # C would be 149 GiB
    del a, b
    store = Store(tmp_path / "r.db")
    run = store.start_run("oom")
    rows = run_ladder(family("gemm"), ["200000x200000x8"], [family("gemm").rung("naive")], store, run)
    assert rows and all(r.status == "out-of-memory" and "GiB" in r.error for r in rows), [(r.status, r.error) for r in rows]
    assert len(store.results(run_id=run)) == len(rows)  # reported and stored, not lost
    assert pool.used_bytes() <= before  # nothing the failed allocations touched stays allocated


@pytest.mark.gemm
@pytest.mark.ladder
def test_small_ladder_end_to_end(tmp_path):
    from simtlab.ladder import LadderOptions, run_ladder
    from simtlab.store import Store

    store = Store(tmp_path / "r.db")
    run = store.start_run("test")
    rows = run_ladder(family("gemm"), ["127x129x65"], None, store, run, LadderOptions(target_ms=5, beta=0.5))
    assert all(r.status in ("ok", "reference") for r in rows), [(r.name, r.status, r.error) for r in rows]
    assert len(store.results(run_id=run)) == len(rows)
    rungs = [r for r in rows if not r.is_reference]
    assert all(r.median_ms > 0 and r.rel_error is not None and r.pct_of_reference for r in rungs)


_CHECK_REFERENCES: dict = {}  # each family's references, timed once at its check size


@pytest.mark.parametrize("rung", all_rungs(), ids=lambda r: r.id)
def test_every_rung_verifies_through_the_ladder(rung):
    """Any family, old or new, with nothing written for it: each rung through the ladder at its
    family's check size (fresh inputs, poisoned output, a float64 or library reference)."""
    from simtlab.ladder import LadderOptions, run_ladder

    fam = family(rung.family)
    rows = run_ladder(fam, [fam.check_size], [rung], opts=LadderOptions(target_ms=1, max_reps=5, clocks=False),
                      reference_cache=_CHECK_REFERENCES.setdefault(fam.name, {}))
    row = rows[-1]
    assert row.name == rung.id and row.status in ("ok", "unsupported"), (row.status, row.error)


@pytest.mark.gemm
@pytest.mark.ladder
def test_isolated_ladder_kills_a_rung_past_its_limit_and_goes_on(tmp_path):
    """`simtlab ladder` measures in a child process: a rung that outlives --timeout is killed, its
    row stored as a timeout, and a fresh process measures the next one."""
    from simtlab.children import IsolatedEvaluator
    from simtlab.ladder import LadderOptions, ladder_child, run_ladder_isolated
    from simtlab.store import Store

    store = Store(tmp_path / "r.db")
    run = store.start_run("isolated")
    fam = family("gemm")
    rungs = [fam.rung("naive"), fam.rung("tuned")]
    endless = LadderOptions(target_ms=30_000, max_reps=10**6)  # far past the limit below
    kwargs = {"family": "gemm", "db": str(store.path), "run_id": run, "opts": endless}
    with IsolatedEvaluator(ladder_child, kwargs, timeout_s=8) as child:
        rows = run_ladder_isolated(fam, ["255x257x129"], rungs, store, run, endless, child=child)
        assert [r.status for r in rows] == ["timeout"] * 3, [(r.name, r.status, r.error) for r in rows]
        assert child.restarts == 3
    assert [r["status"] for r in store.results(run_id=run)] == ["timeout"] * 3
    rows = run_ladder_isolated(fam, ["127x129x65"], rungs, store, run, LadderOptions(target_ms=5))
    assert all(r.status in ("ok", "reference") for r in rows), [(r.name, r.status, r.error) for r in rows]
    assert len(store.results(run_id=run)) == 3 + len(rows)


@pytest.mark.ladder
def test_clock_log_samples_the_gpu_while_it_works(tmp_path):
    import time

    import cupy

    from simtlab.bench import time_gpu
    from simtlab.ladder import LadderOptions, run_ladder
    from simtlab.tools.clock_log import ClockLog

    x = cupy.ones(1 << 26, cupy.float32)
    with ClockLog() as log:
        t0 = time.time()
        time_gpu(lambda: x.__imul__(1.0), target_ms=200)
        s = log.summary(t0, time.time())
    assert log.unavailable is None and log.power_source in ("instant", "1 s average"), log.unavailable
    assert s["samples"] >= 3 and 200 <= s["sm_mhz"] <= 3000 and 30 <= s["watts"] <= 1500, s
    rows = run_ladder(family("gemm"), ["255x257x129"], [family("gemm").rung("tuned")], opts=LadderOptions(target_ms=5))
    assert all(r.sm_mhz for r in rows if r.median_ms), [(r.name, r.sm_mhz) for r in rows]


@pytest.mark.ladder
def test_timing_is_positive_and_ordered():
    import cupy

    from simtlab.bench import time_gpu

    x = cupy.ones(1 << 24, cupy.float32)
    t = time_gpu(lambda: x.__imul__(1.0), target_ms=20)
    assert 0 < t.min_ms <= t.p20_ms <= t.median_ms <= t.p80_ms and t.reps >= 5


SCAN_SIZES = [1, 31, 1000, 4096, (1 << 20) + 7, (1 << 24) + 3]


@pytest.mark.parametrize("rung", family("scan").rungs, ids=lambda r: r.name)
@pytest.mark.parametrize("n", SCAN_SIZES)
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_scan_rung(rung, n, dtype):
    """Every scan rung at lengths that are one element, part of a tile, whole tiles and several
    levels of tile totals: int32 exactly (wrapping as the GPU adds), fp32 within its bound of the
    float64 scan."""
    from simtlab.ops import scan

    p = scan.ScanProblem(n, dtype)
    ws = _run_rung(family("scan"), rung, p, seed=n, ladder_params=True)
    v = compare(ws.out, ws.expected(), scan.tolerance(p))
    assert v.ok, (rung.name, n, dtype, v.reason)


@pytest.mark.scan
@pytest.mark.parametrize("params", [{"BLOCK": 128, "ITEMS": 4}, {"BLOCK": 1024, "ITEMS": 16}, {"BLOCK": 512, "ITEMS": 8}])
def test_scan_space_points_are_correct(params):
    """Points of the tuner's space for rungs 3-5 (smallest and largest tiles), int32 exactly."""
    from simtlab.ops import scan

    fam = family("scan")
    for name in ("warp_shuffle", "reduce_then_scan", "decoupled_lookback", "striped_lookback"):
        p = scan.ScanProblem(3 * 16384 + 5, "int32")
        ws = _run_rung(fam, fam.rung(name), p, seed=3, params={**params, "DT": 1})
        assert compare(ws.out, ws.expected(), 0.0).ok, (name, params)


@pytest.mark.scan
@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("items", [4, 12, 16])
@pytest.mark.parametrize("n", [33, 4095, (1 << 22) + 13])
def test_scan_striped_groups_and_tile_order(order, items, n):
    """Rung 6 with tiles by ticket and by block index, odd group counts a lane (ITEMS 12) and
    lengths that end inside a warp's stretch: int32 exactly, fp32 within its bound."""
    from simtlab.ops import scan

    fam = family("scan")
    for dtype, dt in (("int32", 1), ("float32", 0)):
        p = scan.ScanProblem(n, dtype)
        ws = _run_rung(fam, fam.rung("striped_lookback"), p, seed=n + items,
                       params={"DT": dt, "BLOCK": 256, "ITEMS": items, "ORDER": order})
        v = compare(ws.out, ws.expected(), scan.tolerance(p))
        assert v.ok, (order, items, n, dtype, v.reason)


REDUCE_SIZES = [1, 31, 1000, (1 << 20) + 7, 1 << 26]


@pytest.mark.parametrize("rung", family("reduction").rungs, ids=lambda r: r.name)
@pytest.mark.parametrize("n", REDUCE_SIZES)
@pytest.mark.parametrize("op", ["sum", "max"])
def test_reduction_rung(rung, n, op):
    import cupy

    from simtlab.device import device_info
    from simtlab.ops import reduction

    dev = device_info()
    p = reduction.ReduceProblem(n, op)
    ws = reduction.workspace(p, seed=n)
    vec = ws.vec_ok() if rung.vec_variant else None
    inst = build(rung, choose_params(rung, p, dev, vec), dev.arch)
    run = runner(inst, p, ws, vec, dev)
    ws.poison()
    run()
    cupy.cuda.get_current_stream().synchronize()
    first = float(ws.out[0])
    v = compare(ws.out, ws.expected(), reduction.tolerance(p, ws))
    assert v.ok, (rung.name, n, op, v.reason)
    run()  # again: the single-pass rung must have reset its ticket; every rung is deterministic
    assert float(ws.out[0]) == first


@pytest.mark.parametrize("rung", family("transpose").rungs, ids=lambda r: r.name)
@pytest.mark.parametrize("shape", [(1, 1), (33, 65), (1000, 1013), (4097, 31), (1, 1000), (1000, 1), (64, 128)],
                         ids=lambda s: "x".join(map(str, s)))
def test_transpose_rung(rung, shape):
    from simtlab.ops import transpose

    p = transpose.TransposeProblem(*shape)
    ws = _run_rung(family("transpose"), rung, p, seed=shape[0] * 7 + shape[1])
    v = compare(ws.out, ws.expected(), 0.0)
    assert v.ok, (rung.name, shape, v.reason)


@pytest.mark.transpose
def test_transpose_references():
    import cupy

    from simtlab.ops import transpose

    p = transpose.TransposeProblem(333, 517)
    ws = transpose.workspace(p, 1)
    ws.poison()
    transpose._cupy_transpose(ws)()
    transpose._tile_copy(ws)()
    cupy.cuda.get_current_stream().synchronize()
    assert compare(ws.out, ws.expected(), 0.0).ok


@pytest.mark.gemm
@pytest.mark.tune
def test_tune_cli_small(tmp_path):
    from typer.testing import CliRunner

    from simtlab.cli import app
    from simtlab.store import Store

    db = tmp_path / "t.db"
    args = ["tune", "gemm", "--size", "256", "--budget", "3", "--strategy", "random", "--target-ms", "5",
            "--db", str(db), "--json"]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    again = CliRunner().invoke(app, args)  # --budget is the problem's total: all three are in history
    assert again.exit_code == 0, again.output
    rows = [r for r in Store(db).results() if r["rung"] == "gemm/10_tuned"]
    # three searched, then the shipped configuration unless the search drew it (measured once, beyond the budget)
    assert len(rows) in (3, 4) and len({r["params"] for r in rows}) == len(rows) and all(r["status"] == "ok" for r in rows)
    more = CliRunner().invoke(app, [*args[:5], "6", *args[6:]])  # a larger total runs only what is left
    assert more.exit_code == 0, more.output
    rows = [r for r in Store(db).results() if r["rung"] == "gemm/10_tuned"]
    assert len(rows) == 6 and len({r["params"] for r in rows}) == 6


@pytest.mark.gemm
@pytest.mark.tune
def test_tune_cli_model_builds_the_space_first(tmp_path):
    """The cost model's static profiles: rung 8's 354 points built before the search, then 3 measured
    (its shipped configuration is not a point of its space: nothing measured after the search)."""
    from typer.testing import CliRunner

    from simtlab.cli import app
    from simtlab.store import Store

    db = tmp_path / "t.db"
    out = CliRunner().invoke(app, ["tune", "gemm", "--rung", "warptiling", "--size", "300", "--budget", "3",
                                   "--strategy", "model", "--target-ms", "5", "--db", str(db), "--json"])
    assert out.exit_code == 0, out.output
    rows = [r for r in Store(db).results() if r["rung"] == "gemm/08_warptiling"]
    assert len(rows) == 3 and all(r["status"] == "ok" for r in rows)


@pytest.mark.branch
@pytest.mark.boundary
@pytest.mark.parametrize("name", ["branch", "boundary"])
@pytest.mark.parametrize("n", [1, 31, 1000, (1 << 20) + 7])
def test_divergence_rungs(name, n):
    fam = family(name)
    op = fam.op()
    for rung in fam.rungs:
        p = op.parse_size(str(n))
        ws = _run_rung(fam, rung, p, seed=n)
        v = compare(ws.output(), ws.expected(), op.tolerance(p))
        assert v.ok, (rung.id, n, v.reason)


TC_SHAPES = [(1, 1, 1), (127, 129, 65), (1000, 1013, 37), (256, 256, 256), (64, 136, 72), (33, 1, 300)]


@pytest.mark.parametrize("rung", family("gemm_tc").rungs, ids=lambda r: r.name)
@pytest.mark.parametrize("mnk", TC_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_tensor_core_rung_matches_float64_and_cublas(rung, mnk, dtype):
    from simtlab.ops import gemm_tc

    p = gemm_tc.TcProblem(*mnk, dtype)
    ws = _run_rung(family("gemm_tc"), rung, p, hash((rung.name, mnk, dtype)) & 0xFFFF, ladder_params=True)
    _matches_float64_then_library(ws, gemm_tc.tolerance(p), gemm_tc._cublas)


@pytest.mark.parametrize("rung", family("conv2d").rungs, ids=lambda r: r.name)
@pytest.mark.parametrize("shape", [(1, 1), (33, 65), (1000, 1013), (7, 2000)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("radius", range(1, 8))
def test_conv2d_rung_matches_float64(rung, shape, radius):
    from simtlab.ops import conv2d

    p = conv2d.ConvProblem(*shape, radius)
    ws = _run_rung(family("conv2d"), rung, p, hash((rung.name, shape, radius)) & 0xFFFF, ladder_params=True)
    verdict = compare(ws.out, ws.expected(), conv2d.tolerance(p))
    assert verdict.ok, verdict.reason


@pytest.mark.conv2d
def test_conv2d_library_references_agree():
    import cupy
    import torch
    import torch.nn.functional as F

    from simtlab.ops import conv2d

    torch.backends.cudnn.allow_tf32 = False  # fp32, as the reference in ops/conv2d.py runs it
    p = conv2d.ConvProblem(1000, 1013, 5)
    ws = conv2d.workspace(p, seed=3)
    ws.poison()
    conv2d._cupyx(ws)()
    assert compare(ws.out, ws.expected(), conv2d.tolerance(p)).ok
    res = F.conv2d(torch.as_tensor(ws.img, device="cuda")[None, None], torch.as_tensor(ws.filt, device="cuda")[None, None],
                   padding=p.R)[0, 0]
    assert compare(cupy.asarray(res), ws.expected(), 4 * conv2d.tolerance(p)).ok


@pytest.mark.parametrize("rung", family("stencil").rungs, ids=lambda r: r.name)
@pytest.mark.parametrize("shape", [(1, 1, 1), (17, 33, 65), (3, 1000, 7), (130, 9, 40)], ids=lambda s: "x".join(map(str, s)))
def test_stencil_rung_matches_float64(rung, shape):
    from simtlab.ops import stencil

    p = stencil.StencilProblem(*shape)
    ws = _run_rung(family("stencil"), rung, p, seed=hash((rung.name, shape)) & 0xFFFF)
    verdict = compare(ws.out, ws.expected(), stencil.tolerance(p))
    assert verdict.ok, verdict.reason


def _rung_ops(fam, problem_type):
    """(rung, operator) for every operator each rung of a row family computes."""
    return [(r, op) for r in family(fam).rungs for op in problem_type.OPS
            if r.ops.unsupported(r, problem_type(1, 1, op=op)) is None]


def _softmax_ops():
    from simtlab.ops.softmax import SoftmaxProblem

    return _rung_ops("softmax", SoftmaxProblem)


def _layernorm_ops():
    from simtlab.ops.layernorm import LayerNormProblem

    return _rung_ops("layernorm", LayerNormProblem)


@pytest.mark.parametrize("rung_op", _softmax_ops(), ids=lambda r: f"{r[0].name}-{r[1]}")
@pytest.mark.parametrize("shape", [(1, 1), (3, 127), (5, 1000), (7, 4096), (2, 32768), (333, 517), (9, 1025),
                                   (4, 4097), (3, 16385), (2, 40001), (2, 65536), (1500, 16392)],
                         ids=lambda s: "x".join(map(str, s)))  # (1500 rows: rung 6's stages and exchanges wrap)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_softmax_rung_matches_float64(rung_op, shape, dtype):
    from simtlab.ops import softmax

    rung, op = rung_op
    p = softmax.SoftmaxProblem(*shape, dtype, op)
    if rung.stage <= 4 and shape[1] > softmax.MAX_REGISTER_ROW:
        pytest.skip("rung 4 holds rows of up to 32768 values")
    ws = _run_rung(family("softmax"), rung, p, hash((rung.name, shape)) & 0xFFFF, ladder_params=True)
    verdict = compare(ws.output(), ws.expected(), softmax.tolerance(p))
    assert verdict.ok, verdict.reason


def _extreme_rows(ws):
    """Rows a real model produces: masked (-inf) entries, huge logits of both signs, a row at the top
    of the range, one whose only finite entry is huge, and a fully masked row (0/0: NaN, as PyTorch)."""
    import cupy

    from simtlab.ops import softmax

    x = softmax.load(ws.x, ws.p.dtype).copy()
    cols = ws.p.cols
    x[0, ::3] = -cupy.inf
    x[1, ::2] = 1e30
    x[1, 1::2] = -1e30
    x[2, :] = 3e38
    x[3, :] = -cupy.inf
    x[3, cols // 2] = 1e30
    x[4, :] = -cupy.inf
    ws.x[...] = softmax.store(x, ws.p.dtype)


@pytest.mark.softmax
@pytest.mark.parametrize("rung", family("softmax").rungs, ids=lambda r: r.name)
@pytest.mark.parametrize("shape", [(6, 1000), (5, 4100), (5, 40000)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_softmax_stays_finite_on_masked_and_huge_rows(rung, shape, dtype):
    import cupy

    from simtlab.ops import softmax

    if rung.stage == 4 and shape[1] > softmax.MAX_REGISTER_ROW:
        pytest.skip("rung 4 holds rows of up to 32768 values")
    p = softmax.SoftmaxProblem(*shape, dtype)
    ws = _run_rung(family("softmax"), rung, p, 11, ladder_params=True, edit=_extreme_rows)
    out, ref = ws.output(), ws.expected()
    verdict = compare(out, ref, softmax.tolerance(p))
    assert verdict.ok, verdict.reason
    live = cupy.ones(shape[0], dtype=bool)
    live[4] = False  # the fully masked row is NaN in the reference and in ours (checked by compare)
    assert bool(cupy.isfinite(out[live]).all())
    sums = out[live].astype(cupy.float64).sum(axis=1)
    assert float(abs(sums - 1).max()) < 4 * softmax.tolerance(p) * shape[1] ** 0.5


@pytest.mark.softmax
def test_softmax_reference_agrees():
    import cupy
    import torch

    from simtlab.ops import softmax

    for dtype in ("float32", "bfloat16"):
        p = softmax.SoftmaxProblem(64, 4096, dtype)
        ws = softmax.workspace(p, seed=5)
        res = torch.softmax(softmax.torch_view(ws.x, dtype), dim=-1).float()
        assert compare(cupy.asarray(res), ws.expected(), softmax.tolerance(p)).ok
@pytest.mark.parametrize("rung_op", _layernorm_ops(), ids=lambda r: f"{r[0].name}-{r[1]}")
@pytest.mark.parametrize("shape", [(1, 1), (3, 127), (5, 1000), (7, 4096), (2, 32768), (333, 517), (4, 4097),
                                   (1000, 6145), (300, 8192), (3, 20001), (20000, 1024)],
                         ids=lambda s: "x".join(map(str, s)))  # (20000 rows: teams of many rows, each stage's last)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_layernorm_rung_matches_float64(rung_op, shape, dtype):
    from simtlab.ops import layernorm

    rung, op = rung_op
    if rung.stage <= 4 and shape[1] > 32768:
        pytest.skip("the forward rungs hold rows of up to 32768 values")
    p = layernorm.LayerNormProblem(*shape, dtype, op)
    ws = _run_rung(family("layernorm"), rung, p, hash((rung.name, shape)) & 0xFFFF, ladder_params=True)
    verdict = compare(ws.output(), ws.expected(), layernorm.tolerance(p, ws))  # (ws: how much a backward's dx cancels)
    assert verdict.ok, verdict.reason


@pytest.mark.layernorm
def test_layernorm_reference_agrees():
    import cupy
    import torch.nn.functional as F

    from simtlab.ops import layernorm
    from simtlab.ops.rows import torch_view

    for dtype in ("float32", "bfloat16"):
        p = layernorm.LayerNormProblem(64, 4096, dtype)
        ws = layernorm.workspace(p, seed=5)
        x, w, b = (torch_view(a, dtype) for a in (ws.x, ws.w, ws.b))
        res = F.layer_norm(x, (p.cols,), w, b, layernorm.EPS).float()
        assert compare(cupy.asarray(res), ws.expected(), 2 * layernorm.tolerance(p)).ok




@pytest.mark.parametrize("rung", family("intrinsics").rungs, ids=lambda r: r.name)
@pytest.mark.parametrize("size", ["exp:1000003:r4", "div:1000003:r4", "int:1000003:r4", "exp:1:r0", "div:333:r64"])
def test_intrinsics_rung_matches_float64_and_reports_ulps(rung, size):
    from simtlab.ops import intrinsics

    p = intrinsics.parse_size(size)
    ws = _run_rung(family("intrinsics"), rung, p, hash((rung.name, size)) & 0xFFFF, ladder_params=True)
    verdict = compare(ws.output(), ws.expected(), intrinsics.tolerance(p))
    assert verdict.ok, verdict.reason
    err = intrinsics.ulp_error(ws)
    if p.op == "int":
        assert err["wrong"] == 0
    elif rung.name == "precise":
        assert err["max_ulp"] <= (2.5 if p.op == "exp" else 0.5)  # expf's documented bound; IEEE division
    elif p.n >= 1000:
        assert err["max_ulp"] > 0.5  # the fast spellings do lose accuracy, measurably


@pytest.mark.gemm
@pytest.mark.api
@pytest.mark.parametrize("K", [1000, 16384])
def test_kahan_option_is_more_accurate_and_still_correct(K):
    """Positive inputs make the plain fp32 sum's error grow with K; the compensated one stays near
    one rounding. Both must pass the fp32 tolerance; Kahan must be clearly closer to float64."""
    import cupy

    import simtlab
    from simtlab.verify import relative_error

    rng = cupy.random.default_rng(K)
    A = rng.random((67, K), dtype=cupy.float32)
    B = rng.random((K, 65), dtype=cupy.float32)
    ref = A.astype(cupy.float64) @ B.astype(cupy.float64)
    plain = simtlab.gemm(A, B, rung="warptiling")
    kahan = simtlab.gemm(A, B, kahan=True)
    e_plain, e_kahan = relative_error(plain, ref), relative_error(kahan, ref)
    assert compare(kahan, ref, 1e-6).ok
    assert e_kahan < e_plain / 4 and e_kahan < 2 ** -23, (e_plain, e_kahan)
    with pytest.raises(ValueError, match="option of the warptiling rung"):
        simtlab.gemm(A, B, rung="tuned", kahan=True)


@pytest.mark.gemm_tc
@pytest.mark.parametrize("rung_name", ["wgmma_ws", "wgmma_cluster"])
@pytest.mark.parametrize("size", [f"{m}x{n}x{k}:tf32" for m, n, k in TC_SHAPES] + ["4096x264x520:tf32", "3x65x66x67:tf32"])
def test_tf32_matches_float64_and_cublas_tf32(size, rung_name):
    """TF32 (fp32 inputs, rungs 5-6, B transposed first): within the TF32 band of the float64 product,
    beside cuBLAS's TF32 mode; every other rung refuses the problem by name."""
    from simtlab.device import device_info
    from simtlab.launch import LaunchError
    from simtlab.ops import gemm_tc

    fam = family("gemm_tc")
    p = gemm_tc.parse_size(size)
    assert family("gemm_tc").rung(rung_name).can(gemm_tc.TF32)
    ws = _run_rung(fam, fam.rung(rung_name), p, 17, ladder_params=True)
    _matches_float64_then_library(ws, gemm_tc.tolerance(p), gemm_tc._cublas)
    assert compare(ws.C, ws.expected(), gemm_tc.tolerance(p)).ok  # cuBLAS's TF32 lands in the same band
    other = build(fam.rung("wgmma_tma"), None, device_info().arch)  # (its fp16 build: no TF32 form to compile)
    with pytest.raises(LaunchError, match="TF32 inputs run on rungs"):
        runner(other, p, ws, None)


# rung 6's variants: no cluster, clusters along M (B shared), N (A shared) or both (2x2), register or TMA-store
# epilogue, 128x256, 64x256 or 64x64 tiles; M = 300 and N = 264 leave a cluster with one tile past the
# end (3 tile rows at BM 128, 3 tile columns at BN 128), the batched shapes walk clusters over
# matrices; each problem runs three times (a persistent kernel must leave nothing behind for the
# next launch) and is checked after the last
CLUSTER_VARIANTS = [dict(CM=1, EPI=0), dict(CM=1, EPI=1), dict(CM=2, EPI=0), dict(CM=2, EPI=1),
                    dict(CM=1, CN=2, EPI=1), dict(CM=1, CN=2, EPI=3), dict(CM=1, CN=2, EPI=3, KEEP=5),
                    dict(CM=2, EPI=2), dict(CM=1, EPI=2), dict(BM=64, BN=256, CM=2, EPI=2),
                    dict(CM=2, EPI=3), dict(CM=1, EPI=3), dict(BM=64, BN=64, CM=1, EPI=3),
                    dict(CM=2, EPI=3, KEEP=5), dict(CM=1, EPI=3, KEEP=5),
                    dict(CM=2, EPI=3, KEEP=0), dict(CM=2, CN=2, EPI=3), dict(CM=2, CN=2, EPI=1), dict(CM=2, CN=2, BM=64, BN=128, EPI=2),
                    dict(CM=2, EPI=3, KEEP=5, LEAN=0), dict(CM=2, CN=2, EPI=1, LEAN=0), dict(BM=64, BN=64, CM=1, EPI=3, LEAN=0)]


@pytest.mark.parametrize("variant", CLUSTER_VARIANTS, ids=lambda v: "-".join(f"{k}{v[k]}" for k in sorted(v)))
@pytest.mark.parametrize("size", ["300x264x520:fp16", "1000x1013x37:bf16", "1x1x1:fp16", "3x129x65x66:bf16",
                                  "300x264x520:tf32", "3x65x66x67:tf32"])
@pytest.mark.gemm_tc
@pytest.mark.cluster
def test_cluster_rung_variants_match_float64_and_cublas(size, variant):
    _cluster_variant_matches(size, variant, seed=23)


def _cluster_variant_matches(size: str, variant: dict, seed: int) -> None:
    """Rung 6 built with `variant` over the problem's size defaults (its input and output types among
    them), three launches on a poisoned C, then float64 and cuBLAS."""
    import cupy

    from simtlab.device import device_info
    from simtlab.ops import gemm_tc

    fam, dev = family("gemm_tc"), device_info()
    rung, p = fam.rung("wgmma_cluster"), gemm_tc.parse_size(size)
    ws = fam.op().workspace(p, seed)
    inst = build(rung, choose_params(rung, p, dev, None, explicit=variant), dev.arch)
    assert all(inst.params[k] == v for k, v in variant.items())
    assert inst.params["OUT"] == gemm_tc.OUT[p.out]
    run = runner(inst, p, ws, None, dev)
    for _ in range(3):
        ws.poison()
        run()
    cupy.cuda.get_current_stream().synchronize()
    _matches_float64_then_library(ws, gemm_tc.tolerance(p), gemm_tc._cublas)


# rung 6 writing a 16-bit C (mixed precision): its defaults and the epilogues and cluster shapes
OUT_VARIANTS = [dict(), dict(CM=2), dict(EPI=1), dict(EPI=2), dict(KEEP=5), dict(KEEP=0), dict(LEAN=0), dict(CM=2, CN=2),
                dict(CM=1, CN=2), dict(BM=64, BN=64, CM=1, EPI=3), dict(BM=64, BN=128, CM=1, EPI=1)]


@pytest.mark.parametrize("variant", OUT_VARIANTS, ids=lambda v: "-".join(f"{k}{v[k]}" for k in sorted(v)) or "default")
@pytest.mark.parametrize("size", ["300x264x520:fp16:fp16", "1000x1013x37:bf16:bf16", "1x1x1:bf16:bf16",
                                  "3x129x65x66:fp16:fp16", "2048x2048x4096:bf16:bf16"])
@pytest.mark.gemm_tc
def test_sixteen_bit_output_matches_float64_and_cublas(size, variant):
    """fp16/bf16 inputs, fp32 sums, C rounded to fp16/bf16 in rung 6's epilogue: within the accumulation
    bound plus half an ulp of the output type of the float64 product (C poisoned with NaN first, three
    launches), and within twice that of cuBLAS writing the same type."""
    _cluster_variant_matches(size, variant, seed=31)


@pytest.mark.gemm_tc
def test_sixteen_bit_output_is_refused_by_name_elsewhere():
    """Rungs 1-5 write fp32 only: a 16-bit C is refused with the reason, never written wrongly."""
    from simtlab.launch import LaunchError
    from simtlab.ops import gemm_tc
    from simtlab.device import device_info

    fam, p = family("gemm_tc"), gemm_tc.parse_size("128:bf16:bf16")
    ws = fam.op().workspace(p, 5)
    with pytest.raises(LaunchError, match="written by rung wgmma_cluster only"):
        runner(build(fam.rung("wgmma_ws"), None, device_info().arch), p, ws, None)


@pytest.mark.gemm_tc
@pytest.mark.parametrize("rung", family("gemm_tc").rungs, ids=lambda r: r.name)
@pytest.mark.parametrize("size", ["3x65x66x67:fp16", "4x128x128x64:bf16", "2x1x1x1:fp16"])
def test_tensor_core_batched_matches_float64_and_cublas_batched(rung, size):
    """Batched strided: every matrix of the batch right (poisoned C, float64 reference per matrix),
    and cuBLAS's strided-batched GEMM agrees."""
    from simtlab.ops import gemm_tc

    p = gemm_tc.parse_size(size)
    ws = _run_rung(family("gemm_tc"), rung, p, 21, ladder_params=True)
    assert ws.C.shape == (p.batch, p.M, p.N)
    _matches_float64_then_library(ws, gemm_tc.tolerance(p), gemm_tc._cublas)


@pytest.mark.gemm_tc
@pytest.mark.parametrize("size", ["127x129x72:bf16", "256:fp16", "3x65x64x64:bf16", "127x129x72:tf32"])
def test_tensor_core_triton_reference_matches_float64(size):
    """The Triton matmul timed beside the tensor-core rungs computes the same product."""
    from simtlab.ops import gemm_tc

    _triton_matches_float64(gemm_tc, gemm_tc.parse_size(size), seed=3)


@pytest.mark.gemm
@pytest.mark.parametrize("mnk, scale", [((127, 129, 65), (1.0, 0.0)), ((256, 200, 300), (0.5, 2.0))])
def test_fp32_triton_reference_matches_float64(mnk, scale):
    """The IEEE-fp32 Triton matmul timed beside the fp32 rungs: alpha, beta and odd shapes."""
    from simtlab.ops import gemm

    _triton_matches_float64(gemm, gemm.GemmProblem(*mnk, *scale), seed=4)


def _triton_matches_float64(op, p, seed):
    """A family's Triton reference on fresh inputs with a poisoned C, against float64."""
    pytest.importorskip("triton")
    import cupy

    ws = op.workspace(p, seed)
    ws.poison()
    op._triton(ws)()
    cupy.cuda.get_current_stream().synchronize()
    verdict = compare(ws.C, ws.expected(), op.tolerance(p))
    assert verdict.ok, verdict.reason
