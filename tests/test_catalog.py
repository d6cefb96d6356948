import itertools

import pytest

from simtlab.catalog import FAMILIES, all_rungs, family
from simtlab.compile import KERNELS_DIR
from simtlab.ops import elementwise, gemm


def test_every_rung_is_one_file_with_a_header_lesson():
    for r in all_rungs():
        text = (KERNELS_DIR / r.source).read_text()
        assert text.startswith(f"// Rung {r.stage} - "), r.source
        header = next(i for i, line in enumerate(text.splitlines()) if not line.startswith("//"))
        assert header <= 15, f"{r.source}: a {header}-line header (at most 15; the history goes to docs/design/)"
        assert f"{r.stage:02d}_{r.name}.cu" == r.source.split("/")[-1]
        assert r.kernel in text and r.lesson
        assert callable(r.geometry) and r.ops is family(r.family).op()


def test_each_rung_builds_on_the_rung_its_header_names():
    """A header that says what changed "from rung N" names the rung `explain` compares it with
    (Rung.base_stage: the one before unless the catalog says builds_on)."""
    import re

    for r in all_rungs():
        lines = (KERNELS_DIR / r.source).read_text().splitlines()
        header = " ".join(line[2:].strip() for line in itertools.takewhile(lambda s: s.startswith("//"), lines))
        named = re.search(r"changed from rung (\d+)", header, re.IGNORECASE)
        want = int(named.group(1)) if named else r.stage - 1
        assert r.base_stage == want, f"{r.id}: its header builds on rung {want}, the catalog on {r.base_stage}"
        assert any(o.stage == r.base_stage for o in family(r.family).rungs) or r.stage == 1, r.id


def test_stages_are_consecutive():
    for f in FAMILIES.values():
        assert [r.stage for r in f.rungs] == list(range(1, len(f.rungs) + 1))


def test_rung_lookup():
    g = family("gemm")
    assert g.rung("naive") is g.rung(1) is g.rung("01") is g.rung("gemm/01_naive")
    assert g.rung("warptile") is g.rung("warptiling")  # the name the tuner issue uses
    with pytest.raises(KeyError, match="no rung"):
        g.rung("fastest")
    with pytest.raises(KeyError, match="no kernel family"):
        family("fft")


def test_params_and_name_expressions():
    r = family("gemm").rung("multistage")
    p = r.params("sm_90", {"STAGES": 4})
    assert p["STAGES"] == 4 and r.params("sm_80")["MINB"] == 1 and r.params("sm_90")["MINB"] == 2
    assert r.name_expression(p, True) == "gemm_multistage<128, 128, 8, 32, 64, 2, 2, 4, 2, true>"
    assert r.name_expressions(p)[1].endswith("false>")
    with pytest.raises(ValueError, match="no parameter"):
        r.params("sm_90", {"TILE": 3})


ODD = [(1, 1, 1), (127, 129, 65), (1000, 1013, 37), (4097, 4095, 4093), (1, 4096, 1), (3000, 1, 17)]


@pytest.mark.parametrize("rung", family("gemm").rungs, ids=lambda r: r.name)
@pytest.mark.parametrize("mnk", ODD)
def test_gemm_geometry_covers_every_output(rung, mnk):
    p = gemm.GemmProblem(*mnk)
    params = rung.params("sm_90")
    L = rung.geometry(params, p)
    assert 1 <= L.threads <= 1024
    # outputs per block x blocks must cover C; reconstruct the block tile from the parameters
    if rung.name == "naive":
        assert L.grid[0] * L.block[0] >= p.M and L.grid[1] * L.block[1] >= p.N
    elif rung.name == "coalesced":
        assert L.grid[0] * L.block[0] >= p.N and L.grid[1] * L.block[1] >= p.M
    elif rung.name == "smem_tiling":
        assert L.grid[0] * params["TILE"] >= p.N and L.grid[1] * params["TILE"] >= p.M
    elif rung.name == "tuned":  # a 1D grid in grouped tile order
        tiles = -(-p.M // params["BM"]) * -(-p.N // params["BN"])
        assert L.grid == (tiles, 1, 1)
    elif rung.name in ("tf32x3", "f16x3"):  # persistent clusters walking every cluster tile (rung 6's grid)
        from simtlab.ops import f16x3, gemm_tc, tf32x3

        work = gemm_tc.cluster_work(params, (tf32x3 if rung.name == "tf32x3" else f16x3).tc_problem(p))
        assert work * params["CM"] * params["BM"] * params["BN"] >= p.M * p.N
        assert L.grid[0] == min(132 // params["CM"], work) * params["CM"] and L.threads == 3 * 128
    else:
        assert L.grid[0] * params["BN"] >= p.N and L.grid[1] * params["BM"] >= p.M
        assert (L.grid[0] - 1) * params["BN"] < p.N and (L.grid[1] - 1) * params["BM"] < p.M  # no empty blocks
    if rung.name in ("multistage", "tuned"):
        # STAGES x (padded transposed A tile + B tile) floats
        assert L.shared == params["STAGES"] * params["BK"] * ((params["BM"] + 4) + params["BN"]) * 4


def test_tuned_swizzle_visits_every_tile_once():
    # The grouped order in 10_tuned.cu, replayed on the host for odd tile counts.
    for tiles_m, tiles_n, group in itertools.product((1, 3, 8, 13), (1, 5, 16), (1, 4, 8)):
        seen = set()
        per_group = group * tiles_n
        for pid in range(tiles_m * tiles_n):
            first = (pid // per_group) * group
            rows = min(tiles_m - first, group)
            seen.add((first + (pid % per_group) % rows, (pid % per_group) // rows))
        assert seen == {(m, n) for m in range(tiles_m) for n in range(tiles_n)}


def test_problem_sizes_and_counts():
    p = gemm.parse_size("4097x4095x4093")
    assert (p.M, p.N, p.K) == (4097, 4095, 4093)
    assert p.flops == 2 * 4097 * 4095 * 4093
    assert p.bytes == 4 * (4097 * 4093 + 4093 * 4095 + 4097 * 4095)
    assert gemm.parse_size("64", beta=1.0).bytes == 4 * 64 * 64 * 4
    assert gemm.parse_size("2^10").M == 1024
    for bad in ("0", "12x0x3", "axb", "1x2", "-5", "1.5"):
        with pytest.raises(ValueError):
            gemm.parse_size(bad)
    v = elementwise.parse_size("1e6")
    assert v.n == 1_000_000 and v.bytes == 12_000_000
    with pytest.raises(ValueError, match=">= 1"):
        elementwise.parse_size("0")


def test_elementwise_geometry():
    class Dev:
        sms, max_threads_per_sm = 132, 2048

    p = elementwise.VecProblem(1_000_003)
    assert elementwise.geometry_scalar({"BLOCK": 256}, p).grid[0] * 256 >= p.n
    assert elementwise.geometry_float4({"BLOCK": 256}, p).grid[0] * 256 * 4 >= p.n
    g = elementwise.geometry_grid_stride({"BLOCK": 256, "UNROLL": 4}, elementwise.VecProblem(2**28), Dev())
    assert g.grid[0] == 132 * 8
    assert elementwise.geometry_grid_stride({"BLOCK": 256, "UNROLL": 4}, elementwise.VecProblem(1), Dev()).grid[0] == 1


def test_tuned_defaults_pick_the_measured_tile_class():
    class Dev:
        sms = 132

    pick = lambda *mnk, vec=True: gemm.tuned_defaults(gemm.GemmProblem(*mnk), Dev(), vec)
    assert pick(8192, 8192, 8192) == gemm.TUNED_LARGE
    assert pick(2048, 2048, 2048) == gemm.TUNED_LARGE  # 128 tiles: one wave
    assert pick(1536, 1536, 1536) == gemm.TUNED_MEDIUM
    assert pick(1024, 1024, 1024) == gemm.TUNED_SMALL
    assert pick(4097, 4095, 4093, vec=False) == gemm.TUNED_PREDICATED


@pytest.mark.parametrize("name", list(FAMILIES))
def test_every_family_op_module_meets_the_contract(name):
    """What the ladder, plan, explain, report and tuner call on a family's op module, checked with no GPU."""
    import inspect

    from simtlab.launch import check_grid

    from simtlab.family import FamilyOps

    fam = family(name)
    op = fam.op()
    hooks = ("DTYPE", "parse_size", "workspace", "references", "tolerance", "requested_bytes", "unsupported",
             "make_runner")
    assert isinstance(op, FamilyOps), [a for a in hooks if not hasattr(op, a)]
    assert op.FAMILY is fam and all(r.ops is op for r in fam.rungs)
    assert "ws" in inspect.signature(op.tolerance).parameters
    for size in fam.default_sizes + (fam.check_size,):
        p = op.parse_size(size)
        assert p.bytes > 0 and p.flops >= 0 and p.label
        assert op.tolerance(p) >= 0
        for rung in fam.rungs:
            params = rung.params("sm_90")
            if rung.size_defaults:
                params.update(rung.size_defaults(p, None, True))
            launch = rung.geometry(params, p, None)
            assert launch.threads >= 32 and launch.blocks >= 1
            check_grid(launch)
            assert rung.requested_bytes(params, p) >= p.bytes or fam.name == "gemm"
    assert fam.metric in ("tflops", "gbs")
    assert op.references() or fam.name == "intrinsics", "every family is measured against something"


def test_runner_uses_the_family_hook_or_one_default_launch(monkeypatch):
    """launch.runner: a family's make_runner where it takes the rung (softmax's three passes), the
    single launch with ws.args() where the hook returns None or the family has none."""
    import simtlab.launch as launch
    from simtlab.ops import softmax

    calls = []

    class Func:
        def __call__(self, grid, block, args, shared_mem=0):
            calls.append((grid, block, args[-1]))

    monkeypatch.setattr(launch, "prepare", lambda *a, **k: Func())

    class Ws:
        x = y = stats = None

        def args(self):
            return ("x", "y", "default")

    fam = family("softmax")
    p = softmax.SoftmaxProblem(5, 1000)
    three = launch.build(fam.rung("three_pass"), None, "sm_90")
    launch.runner(three, p, Ws(), None)()
    assert [int(c[2]) for c in calls] == [0, 1, 2] and calls[0][0] == (5, 1, 1)
    calls.clear()
    fused = launch.build(fam.rung("fused"), None, "sm_90")
    launch.runner(fused, p, Ws(), None)()
    assert calls == [((5, 1, 1), (256, 1, 1), "default")]
