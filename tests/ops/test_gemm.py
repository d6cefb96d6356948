"""fp32 GEMM, CPU side: rung 11's stream-K schedule and grid."""

import pytest

from simtlab.catalog import family
from simtlab.ops import gemm


def _check_schedule(tiles: int, slices: int, blocks: int):
    pieces = gemm.stream_k_pieces(tiles, slices, blocks)
    split = tiles % blocks and tiles > blocks
    whole = (tiles // blocks - 1) * blocks if split else tiles  # tiles dealt out whole, round robin
    covered = {}
    for b, run in enumerate(pieces):
        first_split = sum(1 for u, _, _ in run if u < whole)
        assert [u for u, _, _ in run[:first_split]] == list(range(b, whole, blocks))
        for n, (u, k0, k1) in enumerate(run):
            assert 0 <= u < tiles and 0 <= k0 < k1 <= slices
            assert k0 == 0 or n == first_split, "only a run's first stream-K piece may start inside a tile"
            for k in range(k0, k1):
                assert (u, k) not in covered, "a slice computed twice"
                covered[(u, k)] = b
    assert len(covered) == tiles * slices, "a slice left out"
    # a cut tile has two pieces: its first slices at the end of block b's run (the finisher), the
    # rest at the start of block b + 1's - whose partials the finisher adds
    for b, run in enumerate(pieces):
        for n, (u, k0, k1) in enumerate(run):
            if k0 == 0 and k1 < slices:
                assert n == len(run) - 1 and b + 1 < blocks
                nxt = pieces[b + 1]
                assert nxt[sum(1 for v, _, _ in nxt if v < whole)] == (u, k1, slices)
    work = [sum(k1 - k0 for _, k0, k1 in run) for run in pieces]
    return pieces, work


@pytest.mark.parametrize("tiles, slices, blocks", [(512, 256, 132), (2048, 512, 132), (144, 19, 132),
                                                     (768, 5, 528), (1056, 512, 264), (100, 7, 132),
                                                     (133, 1, 132), (263, 3, 132), (7, 1, 1)])
def test_stream_k_schedule_covers_every_slice_once_and_balances_the_last_waves(tiles, slices, blocks):
    pieces, work = _check_schedule(tiles, slices, blocks)
    if tiles % blocks and tiles > blocks:
        assert max(work) - min(work) <= 1, "every block within a slice of the others"
        assert max(work) == -(-tiles * slices // blocks)
    else:  # whole tiles round robin, as rung 10's grid
        assert all(k0 == 0 and k1 == slices for run in pieces for _, k0, k1 in run)
        assert max(len(run) for run in pieces) == -(-tiles // blocks)


def test_stream_k_at_4096_saves_the_ragged_wave():
    """512 tiles of 128x256 on 132 SMs: rung 10's grid runs 4 waves; stream-K ~3.88."""
    _, work = _check_schedule(512, 256, 132)
    assert max(work) / 256 == pytest.approx(3.88, abs=0.01)


def test_stream_k_grid_is_at_most_the_tiles_and_the_resident_blocks():
    params = family("gemm").rung("stream_k").params("sm_90")
    assert gemm.geometry_stream_k(params, gemm.GemmProblem(4096, 4096, 4096)).grid == (132, 1, 1)
    assert gemm.geometry_stream_k(params, gemm.GemmProblem(300, 300, 64)).grid == (3 * 2, 1, 1)
    small = {**params, **gemm.TUNED_SMALL}
    assert gemm.geometry_stream_k(small, gemm.GemmProblem(4096, 4096, 64)).grid == (4 * 132, 1, 1)
