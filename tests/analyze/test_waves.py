"""Wave quantization: rounds of work units over the slots that run at once."""

import pytest

from simtlab.analyze.waves import Waves, waves
from simtlab.catalog import family
from simtlab.ops import gemm, gemm_tc


def test_rounds_and_the_idle_share_of_the_last():
    w = Waves(512, 132)
    assert w.rounds == pytest.approx(3.8788, abs=1e-4) and w.idle_share == pytest.approx(16 / 528)
    assert Waves(528, 132).idle_share == 0 and Waves(1, 132).idle_share == pytest.approx(131 / 132)
    assert Waves(512, 132).as_dict()["rounds"] == w.rounds


def test_one_shot_grids_fill_every_block_slot():
    p = gemm.GemmProblem(4096, 4096, 4096)
    tuned, multistage = family("gemm").rung("tuned"), family("gemm").rung("multistage")
    assert waves(tuned, {}, p, grid_blocks=512, blocks_per_sm=1, sms=132) == Waves(512, 132)
    assert waves(multistage, {}, p, grid_blocks=1024, blocks_per_sm=2, sms=132) == Waves(1024, 264)
    assert waves(tuned, {}, p, grid_blocks=512, blocks_per_sm=0, sms=132) is None


def test_persistent_rungs_count_their_own_units():
    p = gemm_tc.parse_size("4096:bf16")
    fam = family("gemm_tc")
    ws = fam.rung("wgmma_ws").params("sm_90")
    cl = fam.rung("wgmma_cluster").params("sm_90")
    assert waves(fam.rung("wgmma_ws"), ws, p, grid_blocks=132, blocks_per_sm=1, sms=132) == Waves(512, 132)
    # clusters of two blocks sharing B: 256 cluster tiles over 66 clusters, the same 3.88 rounds
    assert waves(fam.rung("wgmma_cluster"), cl, p, grid_blocks=132, blocks_per_sm=1, sms=132) == Waves(256, 66)
    assert waves(fam.rung("wgmma_cluster"), {**cl, "CN": 2}, p, 132, 1, 132) == Waves(128, 33)
