"""The sort family on the CPU: sizes, bytes, the bitonic rungs' launch plan (run through a NumPy
model of the network), the float key order, and every rung's build."""

import numpy as np
import pytest

from simtlab.catalog import family
from simtlab.launch import build
from simtlab.ops import sort


def test_sizes_name_the_key_type_and_pairs():
    assert sort.parse_size("2^24") == sort.SortProblem(1 << 24)
    p = sort.parse_size("1000:float32:pairs")
    assert (p.n, p.dtype, p.pairs, p.label) == (1000, "float32", True, "1000:float32:pairs")
    assert p.bytes == 16 * 1000 and sort.parse_size("1000").bytes == 8 * 1000
    with pytest.raises(ValueError, match="'float32' \\(or 'uint32'\\), 'bitsNN' .* and 'pairs'"):
        sort.parse_size("1000:int8")
    with pytest.raises(ValueError, match="must be >= 1"):
        sort.parse_size("0")
    with pytest.raises(ValueError, match="at most 2\\^31 - 1"):
        sort.SortProblem(2**31)


def test_sizes_name_a_key_range_for_uint32_keys():
    p = sort.parse_size("2^28:bits16:pairs")
    assert (p.n, p.bits, p.pairs, p.label) == (1 << 28, 16, True, "268435456:bits16:pairs")
    assert sort.parse_size(p.label) == p and sort.parse_size("1000").bits == 32
    with pytest.raises(ValueError, match="1 to 32 bits"):
        sort.parse_size("1000:bits0")
    with pytest.raises(ValueError, match="for uint32 keys"):
        sort.parse_size("1000:float32:bits16")
    with pytest.raises(ValueError, match="'bitsNN'"):
        sort.parse_size("1000:bits")


def test_the_skipping_rung_counts_the_passes_that_move_keys():
    """Rung 5 moves keys below 2^bits in the passes whose digit holds some of those bits (none for
    one key: a copy), and its traffic counts only those passes."""
    skip = family("sort").rung("radix_skip")
    onesweep = family("sort").rung("radix_onesweep")
    params, seven = skip.params(), skip.params(None, {"BITS": 7})
    assert [sort.moving_passes(params, sort.parse_size(f"1000:bits{b}")) for b in (32, 24, 17, 16, 8, 1)] == \
        [4, 3, 3, 2, 1, 1]
    assert sort.moving_passes(seven, sort.parse_size("1000:bits16")) == 3 and sort.moving_passes(params, sort.SortProblem(1)) == 0
    full, half = sort.parse_size("2^20"), sort.parse_size("2^20:bits16")
    assert skip.requested_bytes(params, full) == onesweep.requested_bytes(params, full)
    assert skip.requested_bytes(params, half) == 4 * (1 << 20) + 2 * 8 * (1 << 20) + 8 * 256 * 256
    assert skip.requested_bytes(params, sort.SortProblem(1)) == 4 + 8 + 8 * 256  # (one copy)


def test_the_float_key_orders_as_numpy_sorts():
    """numpy_order_keys (the kernels' sort_key, and the GPU reference's order) against NumPy itself."""
    x = np.array([3.0, -0.0, np.nan, -np.inf, 0.0, -2.5, np.inf, -np.nan, 1e-45, -1e-45, 7.0], dtype=np.float32)
    order = np.argsort(sort.numpy_order_keys(x.view(np.uint32)), kind="stable")
    expect = np.sort(x, kind="stable")
    assert np.array_equal(x[order], expect, equal_nan=True)
    assert np.array_equal(x[order].view(np.uint32)[:8], np.sort(x, kind="stable").view(np.uint32)[:8])  # ±0 stay in order


@pytest.mark.parametrize("n,tile,tails", [(1, 4, False), (1000, 8, False), (1000, 8, True), (4096, 16, True),
                                          (37, 64, True)])
def test_the_bitonic_plan_sorts(n, tile, tails):
    """The launch plan, each launch done as the kernels do it (bitonic_tile, bitonic_global_step),
    sorts padded random keys; rung 2's plan has fewer global passes."""
    rng = np.random.default_rng(n)
    n2 = sort.padded(n, tile)
    keys = np.full(n2, 0xFFFFFFFF, dtype=np.uint64)
    keys[:n] = rng.integers(0, 2**32, n)

    def step(a, lo_base, k, j, count):
        p = np.arange(count)
        lo = 2 * j * (p // j) + p % j
        hi = lo + j
        up = ((lo + lo_base) & k) == 0
        swap = (a[lo] > a[hi]) == up
        a[lo[swap]], a[hi[swap]] = a[hi[swap]], a[lo[swap]].copy()

    for phase, k, j in sort.bitonic_steps(n2, tile, tails):
        if phase == 1:
            step(keys, 0, k, j, n2 // 2)
            continue
        for base in range(0, n2, tile):  # a block a tile, in shared memory
            s = keys[base:base + tile]
            stages = [(kk, jj) for kk in (2 ** e for e in range(1, tile.bit_length())) for jj in
                      (2 ** e for e in range(kk.bit_length() - 2, -1, -1))] if phase == 0 else \
                [(k, jj) for jj in (2 ** e for e in range((tile // 2).bit_length() - 1, -1, -1))]
            for kk, jj in stages:
                step(s, base, kk, jj, tile // 2)
    assert np.array_equal(keys[:n], np.sort(keys)[:n])
    globals_ = sum(1 for ph, _, _ in sort.bitonic_steps(n2, tile, tails) if ph == 1)
    if n2 > tile:
        assert globals_ < sum(1 for ph, _, _ in sort.bitonic_steps(n2, tile, False) if ph == 1) or not tails


def test_bytes_and_geometry():
    fam = family("sort")
    b1, b2, radix, onesweep, _ = fam.rungs
    p = sort.SortProblem(1 << 20)
    assert b2.requested_bytes(b2.params(), p) < b1.requested_bytes(b1.params(), p)
    assert radix.requested_bytes(radix.params(), p) == 8 * 4 * (1 << 20) * 3
    assert radix.requested_bytes(radix.params(), sort.SortProblem(1 << 20, pairs=True)) == 8 * 4 * (1 << 20) * 5
    assert b1.geometry(b1.params(), sort.SortProblem(3000)).blocks == 2  # 4096 padded, tiles of 2048
    assert radix.geometry(radix.params(), sort.SortProblem(2049)).blocks == 2
    assert sort.unsupported(b1, sort.SortProblem(10, pairs=True)) and sort.unsupported(radix, sort.SortProblem(10,
                                                                                                           pairs=True)) is None
    assert sort.radix_params(sort.parse_size("8:float32:pairs")) == {"FLOAT": 1, "PAIRS": 1}
    # one-sweep: a histogram read, then four passes of a read and a write - under rung 3's 8 x 3
    assert onesweep.requested_bytes(onesweep.params(), p) == 4 * (1 << 20) * 9 + 8 * 256 * 256
    assert onesweep.requested_bytes(onesweep.params(), p) < radix.requested_bytes(radix.params(), p) / 2
    assert onesweep.geometry(onesweep.params(), sort.SortProblem(4097)).blocks == 2  # tiles of 256 x 16
    # 7-bit digits: five passes (the last of 4 bits), 128 look-back words a tile
    assert onesweep.requested_bytes(onesweep.params(None, {"BITS": 7}), p) == 4 * (1 << 20) * 11 + 8 * 128 * 256


@pytest.mark.parametrize("bits", [1, 3, 5, 6, 7, 8])
@pytest.mark.parametrize("size", ["1000", "1000:pairs"])
def test_one_sweep_digits_of_any_width_build_spill_free_in_the_shared_memory_counted(bits, size):
    """BITS 1-8: 32 / BITS passes; onesweep_static_smem counts the block's static shared memory, never
    under it (the space's 48 KB filter relies on that) - with fewer bits, more passes than warps to
    count them in the histogram launch (3 bits: 11 passes of 8 values, 8 warps). Spill-free from 3
    bits; 1 bit (32 passes: the counting launch's 32 counts a key) spills at 64 or 80 registers."""
    onesweep = family("sort").rung("radix_onesweep")
    params = {**onesweep.params("sm_90"), **onesweep.size_defaults(sort.parse_size(size)), "BITS": bits}
    res = build(onesweep, params, "sm_90").resources(None)
    assert (res.spill_bytes == 0 and res.stack_frame == 0) == (bits >= 3)
    assert 0 <= sort.onesweep_static_smem(params) - res.shared_static <= 16  # (ptxas drops unused words)
    assert sort.radix_digits(params) == (1 << bits, -(-32 // bits))


def test_the_one_sweep_defaults_are_the_measured_ones():
    """Rung 4 ships its tile staged in digit order, 4-word look-backs and tiles by block index, with
    each key type's fastest spill-free point (runs 89a652 to 4e5762): 16 keys a thread at 64
    registers ranked by ballots and match_any in turn, 8 for float keys; with values 16 at 80
    registers ranked by ballots, each value read with its key and staged beside it as one word."""
    onesweep = family("sort").rung("radix_onesweep")
    keys, floats, pairs = (onesweep.size_defaults(sort.parse_size(s))
                           for s in ("268435456", "268435456:float32", "16777216:pairs"))
    p = onesweep.params()
    assert (p["STAGED"], p["LOOK"], p["ORDER"]) == (1, 4, 1)
    assert (keys["BLOCK"], keys["ITEMS"], keys["PAIRS"], keys["REGS"], keys["MATCH"]) == (256, 16, 0, 64, 2)
    assert (floats["ITEMS"], floats["FLOAT"], floats["REGS"], floats["MATCH"]) == (8, 1, 64, 2)
    assert (pairs["BLOCK"], pairs["ITEMS"], pairs["PAIRS"], pairs["REGS"], pairs["MATCH"], pairs["VALS"],
            pairs["STAGED"]) == (256, 16, 1, 80, 1, 1, 2)


@pytest.mark.parametrize("rung", family("sort").rungs, ids=lambda r: r.name)
@pytest.mark.parametrize("size", ["1000", "1000:pairs", "1000:float32", "1000:float32:pairs"])
def test_every_rung_builds_spill_free(rung, size):
    p = sort.parse_size(size)
    if sort.unsupported(rung, p):
        pytest.skip("bitonic: keys only")
    inst = build(rung, {**rung.params("sm_90"), **rung.size_defaults(p)}, "sm_90")
    res = inst.resources(None)
    assert res.spill_bytes == 0 and res.stack_frame == 0


def test_global_asserts_the_skipping_rungs_chosen_arrays_are_global_memory():
    """Rung 5 reads its arrays' addresses from shared memory, where the compiler cannot see their
    space: generic loads and stores (LD/ST) unless GLOBAL 1 asserts it (LDG/STG only) - the pairs
    build without spills either way (what the GPU sweep `gpu_run.py sort-global` weighs)."""
    from collections import Counter

    from simtlab.analyze.sass import disassemble, parse_sass

    rung = family("sort").rung("radix_skip")
    p = sort.parse_size("1000:pairs")
    ops = {}
    for g in (0, 1):
        inst = build(rung, {**rung.size_defaults(p), "GLOBAL": g}, "sm_90")
        ops[g] = Counter(i.opcode.split(".")[0] for f in parse_sass(disassemble(inst.cubin.path)).values() for i in f)
        assert inst.resources(None).spill_bytes == 0
    assert ops[0]["LD"] > 0 and ops[0]["ST"] > 0
    assert ops[1]["LD"] == 0 and ops[1]["ST"] == 0 and ops[1]["LDG"] > ops[0]["LDG"]


def test_the_float_key_orders_random_bits_as_numpy_sorts():
    bits = np.random.default_rng(0).integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)
    bits[::97] = 0x80000000  # -0.0 among +0.0 (bits[::89])
    bits[::89] = 0
    x = bits.view(np.float32)
    order = np.argsort(sort.numpy_order_keys(bits), kind="stable")
    assert np.array_equal(bits[order], bits[np.argsort(x, kind="stable")])  # bit for bit, NaN payloads and ±0


@pytest.mark.parametrize("passes,pairs", [(8, False), (7, True), (4, True), (1, False)])
def test_radix_passes_read_the_input_then_each_others_output_and_end_in_the_output(passes, pairs):
    class Ws:
        keys, out_keys = np.zeros(5, np.uint32), np.zeros(5, np.uint32)
        vals = np.zeros(5, np.uint32) if pairs else None
        out_vals = np.zeros(5, np.uint32) if pairs else None

    routes, temps = sort.pass_routes(Ws, passes, np)
    assert len(routes) == passes and routes[0][0] is Ws.keys and routes[-1][1] is Ws.out_keys
    for before, after in zip(routes, routes[1:]):
        assert after[0] is before[1] and after[2] is before[3]  # each pass reads what the last wrote
    for k_in, k_out, v_in, v_out in routes:
        assert k_out is not k_in and {id(k_out)} <= {id(Ws.out_keys), id(temps[0])}
        if pairs:
            assert v_out is not v_in and (v_out is Ws.out_vals) == (k_out is Ws.out_keys)
        else:
            assert v_in == v_out == 0  # (null pointers)
    assert (routes[0][2] is Ws.vals) if pairs else temps[1] is None


def test_one_sweep_registers_follow_regs():
    """REGS 64 holds rung 4 to 64 registers (4 blocks of 256 an SM, the measured step); REGS 0 leaves
    the count to ptxas, which takes more for the same code."""
    onesweep = family("sort").rung("radix_onesweep")
    held = build(onesweep, {**onesweep.params("sm_90"), "REGS": 64}, "sm_90").resources(None)
    free = build(onesweep, {**onesweep.params("sm_90"), "REGS": 0}, "sm_90").resources(None)
    assert held.registers <= 64 and held.spill_bytes == 0
    assert free.registers > 64


class _FakeArray:
    def __init__(self, n, dtype):
        self.size, self.dtype, self.nbytes = n, dtype, n * np.dtype(dtype).itemsize
        self.data = type("Ptr", (), {"ptr": id(self)})()


def _fake_cupy(monkeypatch, memsets):
    """Enough of CuPy for a runner to be built and run on the CPU: arrays that are names, a stream,
    memsets recorded."""
    import sys
    import types

    cuda = types.SimpleNamespace(get_current_stream=lambda: types.SimpleNamespace(ptr=7),
                                 runtime=types.SimpleNamespace(memsetAsync=lambda *a: memsets.append(a)))
    fake = types.SimpleNamespace(empty=lambda n, dtype: _FakeArray(n, dtype), uint32=np.uint32, uint64=np.uint64,
                                 cuda=cuda)
    monkeypatch.setitem(sys.modules, "cupy", fake)


@pytest.mark.parametrize("pairs", [False, True])
@pytest.mark.parametrize("name,count", [("radix_onesweep", 11), ("radix_skip", 14)])
def test_the_one_sweep_runners_launch_what_their_kernels_take(monkeypatch, name, count, pairs):
    """The host side of rungs 4-5 without a GPU: every launch passes as many arguments as the
    kernel's signature has (rung 4: 11, rung 5 adds a buffer of keys, one of values and the notes),
    the phase first and the pass last; a counting launch, the scan (a block a digit), then a pass a
    digit over the tiles; rung 5 gives every launch the same arrays, the input first."""
    memsets = []
    _fake_cupy(monkeypatch, memsets)
    rung = family("sort").rung(name)
    p = sort.parse_size("100000:pairs" if pairs else "100000")
    params = rung.params(None, {"BITS": 7})

    class Ws:
        keys, out_keys = _FakeArray(p.n, np.uint32), _FakeArray(p.n, np.uint32)
        vals = _FakeArray(p.n, np.uint32) if pairs else None
        out_vals = _FakeArray(p.n, np.uint32) if pairs else None

    calls = []
    run = sort._onesweep_runner(lambda grid, block, args: calls.append((grid, args)), params, p, Ws, (256, 1, 1),
                                skip=rung.can(sort.SKIP))
    run()
    t = sort.tiles(params, p.n)
    assert [int(args[0]) for _, args in calls] == [0, 1] + [2] * 5  # (7-bit digits: five passes)
    assert [grid[0] for grid, _ in calls] == [min(t, 1024), 5] + [t] * 5
    assert all(len(args) == count and int(args[-1]) == (i - 2 if i >= 2 else 0) for i, (_, args) in enumerate(calls))
    assert all(args[1] is Ws.keys for _, args in calls[:2]) and len(memsets) == 3
    if rung.can(sort.SKIP):
        assert all(args[1:7] == calls[0][1][1:7] for _, args in calls)
        assert all(args[3] is Ws.out_keys and (args[6] is Ws.out_vals if pairs else int(args[6]) == 0)
                   for _, args in calls)
    else:
        assert calls[-1][1][2] is Ws.out_keys and (calls[-1][1][4] is Ws.out_vals if pairs else int(calls[-1][1][4]) == 0)
