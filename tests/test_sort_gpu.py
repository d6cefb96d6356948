"""The sort ladder on the GPU: every rung on uint32 and float32 keys (with -0.0, infinities and NaNs
of both signs) and, for the stable rungs, key-value pairs; lengths from 1 to past several tiles
and powers of two; the output poisoned before each of three runs; bit-exact against CuPy's stable
sort for the radix rung (stability included), and as numbers (±0 equal, NaN = NaN) for the
bitonic ones."""

import numpy as np
import pytest

from simtlab.catalog import family

pytestmark = [pytest.mark.gpu, pytest.mark.sort]

SIZES = ["1", "2", "3", "1000", "2048", "2049", "100003", "1048576", "1000:float32", "100003:float32",
         "1:pairs", "1000:pairs", "100003:pairs", "100003:float32:pairs", "1048577:float32:pairs"]


def _run(rung, size, seed=1, params=None, edit=None):
    """Build the rung (its chosen parameters, or `params`), let `edit(ws)` change the fresh
    workspace, then run it three times on poisoned outputs; the input keys must stay as they were."""
    import cupy

    from simtlab.device import device_info
    from simtlab.launch import build, choose_params, runner
    from simtlab.ops import sort

    dev = device_info()
    p = sort.parse_size(size)
    if sort.unsupported(rung, p):
        pytest.skip(sort.unsupported(rung, p))
    ws = sort.workspace(p, seed=seed)
    if edit is not None:
        edit(ws)
    inst = build(rung, params or choose_params(rung, p, dev, None), dev.arch)
    run = runner(inst, p, ws, None, dev)
    before = ws.keys.copy()
    for _ in range(3):
        ws.poison()
        run()
    cupy.cuda.get_current_stream().synchronize()
    assert bool((ws.keys == before).all()), "the input keys were changed"
    return p, ws


def _assert_stable_order(ws, *context):
    """The output is the very bits of the stable sort of the keys, and the values (pairs) with them."""
    order = ws.stable_order()
    assert bool((ws.out_keys == ws.keys[order]).all()), ("keys", *context)
    assert ws.vals is None or bool((ws.out_vals == ws.vals[order]).all()), ("values", *context)


@pytest.mark.parametrize("rung", family("sort").rungs, ids=lambda r: r.name)
@pytest.mark.parametrize("size", SIZES)
def test_sort_rung(rung, size):
    import cupy

    from simtlab.ops import sort
    from simtlab.verify import compare

    p, ws = _run(rung, size)
    v = compare(ws.output(), ws.expected(), 0.0)
    assert v.ok, (rung.name, size, v.reason)
    if rung.can(sort.RADIX) or rung.can(sort.ONESWEEP):  # stable: the very bits of NumPy's stable sort, values included
        order = ws.stable_order()
        assert bool((ws.out_keys == ws.keys[order]).all()), "keys not bit-exact (a stable sort keeps ±0 and NaNs in order)"
        if p.pairs:
            assert bool((ws.out_vals == ws.vals[order]).all())
        if p.n <= 100003:  # and NumPy itself, on the host
            keys = cupy.asnumpy(ws.keys)
            host = np.argsort(keys.view(np.float32) if p.dtype == "float32" else keys, kind="stable")
            assert np.array_equal(cupy.asnumpy(ws.out_keys), keys[host])
            if p.pairs:
                assert np.array_equal(cupy.asnumpy(ws.out_vals), cupy.asnumpy(ws.vals)[host])


@pytest.mark.parametrize("name,params,sizes", [
    ("radix_lsd", {"BLOCK": 128, "ITEMS": 4, "BITS": 5}, ("100003:float32:pairs", "65536")),
    ("radix_lsd", {"BLOCK": 512, "ITEMS": 16, "BITS": 4}, ("100003:float32:pairs", "65536")),
    ("radix_onesweep", {"BLOCK": 512, "ITEMS": 8, "STAGED": 0}, ("1000003:float32:pairs", "2000000")),  # (look-back over
    ("radix_onesweep", {"BLOCK": 256, "ITEMS": 20, "STAGED": 0}, ("1000003:float32:pairs", "2000000")),  # hundreds of tiles)
    ("radix_onesweep", {"BLOCK": 256, "ITEMS": 16, "STAGED": 1}, ("1", "3", "2049", "100003:pairs", "1000003:float32:pairs",
                                                                  "2000000", "1048576:float32")),
    ("radix_onesweep", {"BLOCK": 512, "ITEMS": 12, "STAGED": 1}, ("1000:pairs", "1000003:float32:pairs", "2000000")),
    ("radix_onesweep", {"BLOCK": 256, "ITEMS": 20, "STAGED": 1, "EARLY": 1}, ("1", "3", "2049", "100003:pairs",
                                                                              "1000003:float32:pairs", "2000000")),
    ("radix_onesweep", {"BLOCK": 512, "ITEMS": 8, "STAGED": 0, "EARLY": 1}, ("1000003:float32:pairs", "2000000")),
    ("radix_onesweep", {"BLOCK": 256, "ITEMS": 20, "STAGED": 1, "MATCH": 1, "LOOK": 4, "ORDER": 1},
     ("1", "3", "2049", "100003:pairs", "1000003:float32:pairs", "2000000", "1048576:float32")),
    ("radix_onesweep", {"BLOCK": 512, "ITEMS": 8, "STAGED": 0, "MATCH": 1, "LOOK": 8}, ("1000003:float32:pairs", "2000000")),
    ("radix_onesweep", {"BLOCK": 256, "ITEMS": 12, "STAGED": 1, "LOOK": 3, "ORDER": 1}, ("5121:pairs", "2000000")),
    ("radix_onesweep", {"BLOCK": 256, "ITEMS": 12, "STAGED": 1, "MATCH": 2}, ("1", "2049", "100003:pairs",
                                                                              "1000003:float32:pairs", "2000000")),
    ("radix_onesweep", {"BLOCK": 256, "ITEMS": 12, "STAGED": 1, "MATCH": 3}, ("2049", "100003:pairs", "2000000")),
    ("radix_onesweep", {"BLOCK": 256, "ITEMS": 8, "STAGED": 1, "VALS": 1, "REGS": 0}, ("1:pairs", "2049:pairs",
                                                                                     "1000003:float32:pairs")),
    ("radix_onesweep", {"BLOCK": 512, "ITEMS": 8, "STAGED": 0, "VALS": 1}, ("100003:pairs", "1000003:float32:pairs")),
    ("radix_onesweep", {"BLOCK": 256, "ITEMS": 12, "STAGED": 2, "VALS": 1, "REGS": 80, "MATCH": 1},
     ("1:pairs", "3:pairs", "2049:pairs", "100003:pairs", "1000003:float32:pairs", "2000000")),
    ("radix_onesweep", {"BLOCK": 256, "ITEMS": 16, "STAGED": 2, "VALS": 0, "REGS": 80}, ("5121:pairs",
                                                                                      "1000003:float32:pairs")),
    # digits of other widths: 7 bits (five passes, the last of 4 bits), 5 (seven, the last of 2), 3
    # (eleven: more passes than warps to count them), 1 (32 passes of two digit values)
    ("radix_onesweep", {"BITS": 7}, ("1", "2049", "100003:pairs", "1000003:float32:pairs", "2000000")),
    ("radix_onesweep", {"BITS": 5, "BLOCK": 256, "ITEMS": 16, "STAGED": 2, "VALS": 1, "REGS": 80, "MATCH": 1},
     ("3:pairs", "100003:pairs", "1000003:float32:pairs")),
    ("radix_onesweep", {"BITS": 6, "BLOCK": 512, "ITEMS": 8, "STAGED": 0, "MATCH": 0}, ("2049", "1000003:float32:pairs")),
    ("radix_onesweep", {"BITS": 3, "STAGED": 1, "MATCH": 3}, ("2049", "100003:pairs", "1000003:float32")),
    ("radix_onesweep", {"BITS": 1, "STAGED": 1, "EARLY": 1}, ("3", "100003:float32:pairs")),
], ids=["lsd-128x4-5bit", "lsd-512x16", "onesweep-512x8", "onesweep-256x20", "onesweep-staged-256x16",
        "onesweep-staged-512x12", "onesweep-early-staged-256x20", "onesweep-early-512x8",
        "onesweep-ballots-look4-by-index", "onesweep-ballots-look8", "onesweep-look3-by-index",
        "onesweep-match-and-ballots", "onesweep-match-every-third", "onesweep-values-with-keys",
        "onesweep-values-with-keys-scattered", "onesweep-pairs-as-words", "onesweep-pairs-as-words-values-late",
        "onesweep-7bit", "onesweep-5bit-pairs-as-words", "onesweep-6bit-match-any", "onesweep-3bit", "onesweep-1bit"])
def test_radix_tiles_and_digits_of_the_space(name, params, sizes):
    """Other tiles (and digit widths) of the radix rungs' spaces."""
    from simtlab.ops import sort

    rung = family("sort").rung(name)
    for size in sizes:
        p = sort.parse_size(size)
        _, ws = _run(rung, size, params={**rung.params(), **sort.radix_params(p), **params})
        _assert_stable_order(ws, name, params, size)


@pytest.mark.parametrize("name", ["radix_lsd", "radix_onesweep", "radix_skip"])
def test_equal_keys_keep_their_order(name):
    """Few distinct keys, many ties: a stable sort's values come out in input order within a key."""
    import cupy

    from simtlab.device import device_info
    from simtlab.launch import build, choose_params, runner
    from simtlab.ops import sort

    dev = device_info()
    rung = family("sort").rung(name)
    p = sort.parse_size("300001:pairs")
    ws = sort.workspace(p, seed=4)
    ws.keys[...] = ws.keys % 7
    ws.vals[...] = cupy.arange(p.n, dtype=cupy.uint32)
    runner(build(rung, choose_params(rung, p, dev, None), dev.arch), p, ws, None, dev)()
    keys, vals = cupy.asnumpy(ws.out_keys), cupy.asnumpy(ws.out_vals)
    assert np.all(np.diff(keys.astype(np.int64)) >= 0)
    for k in range(7):
        assert np.all(np.diff(vals[keys == k].astype(np.int64)) > 0)


@pytest.mark.parametrize("size", ["100003", "1000003:float32"])
def test_onesweep_counts_keys_that_start_off_a_16_byte_boundary(size):
    """Rung 4's counting launch reads 16-byte groups only from an aligned array: keys 4 bytes past a
    boundary take its one-key-a-thread path, and the sort is still exact."""
    import cupy

    def off_boundary(ws):
        buffer = cupy.empty(ws.keys.size + 1, dtype=ws.keys.dtype)
        buffer[1:] = ws.keys
        ws.keys = buffer[1:]  # (4 bytes past CuPy's aligned start; the view keeps the buffer)

    _, ws = _run(family("sort").rung("radix_onesweep"), size, seed=5, edit=off_boundary)
    assert ws.keys.data.ptr % 16 == 4
    assert bool((ws.out_keys == ws.keys[ws.stable_order()]).all())


def _set_keys(f):
    """An edit of a fresh workspace: its keys replaced by f(keys) (CuPy uint32 in, uint32 out)."""
    def edit(ws):
        ws.keys[...] = f(ws.keys)
    return edit


def _floats_in_one_to_two(keys):
    import cupy

    return (1.0 + (keys >> 9).astype(cupy.float32) / 2**23).astype(cupy.float32).view(cupy.uint32)


SKIPPED_DIGITS = {  # name: (size, rung 5's parameters over its defaults, edit of the keys)
    "below 2^16: two of four passes": ("1000003:bits16", {}, None),
    "below 2^24 pairs: three passes, the first writes the output": ("1000003:bits24:pairs", {}, None),
    "low byte one value: the first pass skipped": ("1000003:pairs", {}, _set_keys(lambda k: (k & 0xFFFFFF00) | 0x5A)),
    "a middle byte one value": ("100003:pairs", {}, _set_keys(lambda k: (k & 0xFFFF00FF) | 0x2A00)),
    "every key equal: no pass, a copy": ("100003:pairs", {}, _set_keys(lambda k: k * 0 + 0x12345678)),
    "equal but the last key: one pass": ("5121:pairs", {}, _set_keys(lambda k: k * 0 + 7 + 2 * (k == k[-1]))),
    "floats in [1, 2): the top digit skipped": ("1000003:float32:pairs", {}, _set_keys(_floats_in_one_to_two)),
    "7-bit digits below 2^20: three of five passes": ("1000003:bits20:pairs", {"BITS": 7}, None),
    "ranked by match_any, tiles by ticket": ("1000003:bits16", {"MATCH": 0, "ORDER": 0}, None),
    "arrays asserted global (GLOBAL 1), keys": ("1000003:bits16", {"GLOBAL": 1}, None),
    "arrays asserted global (GLOBAL 1), full-range float pairs: no pass skipped": (
        "1000003:float32:pairs", {"GLOBAL": 1}, None),
    "arrays asserted global (GLOBAL 1), pairs, the first pass skipped": (
        "1000003:pairs", {"GLOBAL": 1}, _set_keys(lambda k: (k & 0xFFFFFF00) | 0x5A)),
    "arrays asserted global (GLOBAL 1), every key equal: a copy": (
        "100003:pairs", {"GLOBAL": 1}, _set_keys(lambda k: k * 0 + 0x12345678)),
}


@pytest.mark.parametrize("case", list(SKIPPED_DIGITS))
def test_the_skipping_rung_sorts_keys_whose_digits_are_shared(case):
    """Rung 5 on keys where some digit is one value for every key: the passes it skips, and the
    arrays each moving pass picks on the device, still give the stable order, values included."""
    from simtlab.ops import sort

    size, params, edit = SKIPPED_DIGITS[case]
    rung = family("sort").rung("radix_skip")
    p = sort.parse_size(size)
    _, ws = _run(rung, size, seed=7, params={**rung.size_defaults(p), **params}, edit=edit)
    _assert_stable_order(ws, case)


def test_the_skipping_rung_replays_in_a_cuda_graph_whatever_the_keys():
    """Nothing rung 5 skips is decided on the host: one captured graph sorts keys that use every
    pass, keys that skip two, and keys that skip all four (a copy)."""
    import cupy

    from simtlab.device import device_info
    from simtlab.launch import build, runner
    from simtlab.ops import sort

    dev = device_info()
    rung = family("sort").rung("radix_skip")
    p = sort.parse_size("300007:pairs")
    ws = sort.workspace(p, seed=9)
    run = runner(build(rung, rung.size_defaults(p), dev.arch), p, ws, None, dev)
    full = ws.keys.copy()
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:  # (every step on this stream: the graph's launch is ordered after the keys' change)
        run()  # (loads the module outside the capture)
        stream.synchronize()
        stream.begin_capture()
        run()
        graph = stream.end_capture()
        for keys in (full, full & 0xFFFF, full * 0 + 3, full):
            ws.keys[...] = keys
            ws.poison()
            graph.launch(stream)
            _assert_stable_order(ws, "graph replay")
