"""Sorting 32-bit keys (uint32 or float32), optionally with uint32 values: ascending, in NumPy's
order for floats (-0.0 equal to +0.0, NaNs last). Rungs 1-2 are bitonic networks (keys only, not
stable) over the keys padded to a power of two; rung 3 is an LSD radix sort, stable, keys or
key-value pairs; rung 4 the one-sweep radix sort (a histogram launch, then one launch a digit with
decoupled look-back); rung 5 skips, on the device, the passes whose digit every key shares (keys
that span fewer bits than 32: `2^28:bits16`). Every rung reads the input and writes the output
arrays (the input is kept, so every timed run sorts the same keys), as `cupy.sort` does. Verified
against CuPy's stable sort: the keys exactly (floats compared as numbers: ±0 are equal keys, NaN
matches NaN) and, for pairs, the values exactly - a stable sort has one right answer.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from ..family import CONST, IN, OUT, SCRATCH, Declared, Family, Operator, Rung, Step, frozen
from ..hw.occupancy import SMEM_WITHOUT_OPT_IN
from ..launch import Launch
from ..space import Space
from .base import Reference, device_copy, parse_int, torch_reference

DTYPE = "uint32"
KEY_TYPES = {"uint32": "uint32", "u32": "uint32", "float32": "float32", "fp32": "float32"}
PAD = np.uint32(0xFFFFFFFF)  # the largest key (a NaN's bits for floats: sorts last either way)
# What a rung is beyond one launch over the keys (Rung.capabilities):
BITONIC = "bitonic"  # a compare-exchange network over the keys padded to a power of two: keys only
MERGE_TAILS = "merge_tails"  # each merge stage's steps below a tile done in shared memory, in one launch
RADIX = "radix"  # LSD radix passes: three launches a digit, stable, pairs too
ONESWEEP = "onesweep"  # one histogram launch, then a launch a digit with look-back (stable, pairs too)
SKIP = "skip"  # the passes whose digit all keys share noted by the scan launch and skipped on the device


@dataclass(frozen=True)
class SortProblem:
    n: int
    dtype: str = DTYPE  # the keys' type
    pairs: bool = False  # uint32 values carried with the keys
    bits: int = 32  # uint32 keys drawn below 2^bits (the sort still orders all 32 bits)

    def __post_init__(self):
        if int(self.n) < 1:
            raise ValueError(f"sort length must be >= 1, got {self.n}")
        if self.n >= 2**31:
            raise ValueError(f"sort length {self.n}: at most 2^31 - 1 keys (32-bit positions)")
        if self.dtype not in ("uint32", "float32"):
            raise ValueError(f"sort keys are uint32 or float32, got {self.dtype!r}")
        if not 1 <= self.bits <= 32:
            raise ValueError(f"sort keys span 1 to 32 bits, got bits{self.bits}")
        if self.bits < 32 and self.dtype != "uint32":
            raise ValueError("a key range (bitsNN) is for uint32 keys; float32 keys take their whole range")

    @property
    def label(self) -> str:
        return (f"{self.n}" + ("" if self.dtype == DTYPE else ":float32") + ("" if self.bits == 32 else f":bits{self.bits}")
                + (":pairs" if self.pairs else ""))

    @property
    def flops(self) -> int:
        return self.n  # (keys, not arithmetic: the GB/s column is the one to read)

    @property
    def bytes(self) -> int:
        """What any sort must move: the keys (and values) read once and written once."""
        return 8 * self.n * (2 if self.pairs else 1)


def parse_size(text: str, **_) -> SortProblem:
    """'n' (uint32 keys), then optionally ':float32', ':bitsNN' (uint32 keys below 2^NN) and ':pairs'
    ('2^24:float32:pairs', '2^28:bits16')."""
    size, *suffixes = str(text).lower().split(":")
    dtype, pairs, bits = DTYPE, False, 32
    for s in suffixes:
        if s == "pairs":
            pairs = True
        elif s in KEY_TYPES:
            dtype = KEY_TYPES[s]
        elif s.startswith("bits") and s[4:].isdigit():
            bits = int(s[4:])
        else:
            raise ValueError(f"sort size {text!r}: after the length come 'float32' (or 'uint32'), 'bitsNN' (keys "
                             f"below 2^NN) and 'pairs', not {s!r}")
    return SortProblem(parse_int(size, "sort length"), dtype, pairs, bits)


def tolerance(p: SortProblem, ws=None) -> float:
    return 0.0  # a sort has one right answer (a stable one for pairs)


def requested_bytes(params, p: SortProblem) -> int:
    """The radix rung's traffic (the family's count): 32 / BITS passes, each reading the keys twice
    (histogram, scatter) and writing them once, values read and written once in the scatter."""
    _, passes = radix_digits(params, default_bits=4)
    return passes * 4 * p.n * (3 + (2 if p.pairs else 0))


def padded(n: int, tile: int) -> int:
    """The bitonic rungs' length: a power of two, at least a tile."""
    return max(1 << (n - 1).bit_length(), tile)


def bitonic_bytes(params, p: SortProblem, merge_tails: bool = False) -> int:
    """Copy in and out of the padded buffer, the tile sort's read and write, then each global step's
    read and write - every step of every stage beyond a tile (rung 1), or those of a tile's distance
    or more plus one shared-memory launch a stage (rung 2)."""
    tile = 2 * params["BLOCK"]
    n2 = padded(p.n, tile)
    return 8 * p.n + 8 * n2 * len(bitonic_steps(n2, tile, merge_tails))  # (each launch reads and writes n2 keys)


def bitonic_steps(n2: int, tile: int, merge_tails: bool) -> list[tuple[int, int, int]]:
    """The bitonic rungs' launches as (phase, k, j): the tile sort (0), then for each merge stage k
    beyond a tile every distance j as a global step (1) - down to 1 (rung 1), or down to a tile
    with the rest of the stage in one shared-memory launch (2; rung 2)."""
    steps = [(0, 0, 0)]
    k = 2 * tile
    while k <= n2:
        j = k // 2
        while j >= (tile if merge_tails else 1):
            steps.append((1, k, j))
            j //= 2
        if merge_tails:
            steps.append((2, k, 0))
        k *= 2
    return steps


def geometry_bitonic(params, p: SortProblem, device=None) -> Launch:
    """The tile sort: a block a tile of 2 x BLOCK keys."""
    return Launch((padded(p.n, 2 * params["BLOCK"]) // (2 * params["BLOCK"]), 1, 1), (params["BLOCK"], 1, 1))


def tiles(params, n: int) -> int:
    return -(-n // (params["BLOCK"] * params["ITEMS"]))


def geometry_radix(params, p: SortProblem, device=None) -> Launch:
    """The histogram and scatter launches: a block a tile of BLOCK x ITEMS keys."""
    return Launch((tiles(params, p.n), 1, 1), (params["BLOCK"], 1, 1))


def radix_digits(params, default_bits: int = 8, key_bits: int = 32) -> tuple[int, int]:
    """The radix rungs' digits: (values a digit takes, passes) - BITS bits each, `key_bits` / BITS
    passes rounded up (the last digit may be narrower)."""
    bits = params.get("BITS", default_bits)
    return 1 << bits, -(-key_bits // bits)


def onesweep_bytes(params, p: SortProblem, passes: int | None = None) -> int:
    """Rung 4: the keys read once for the histograms, then a pass a digit (or `passes` of them) of
    one read and one write (values too), and the look-back words cleared once a run (8 bytes a digit
    value a tile)."""
    radix, digits = radix_digits(params)
    passes = digits if passes is None else passes
    return 4 * p.n + passes * 8 * p.n * (2 if p.pairs else 1) + 8 * radix * tiles(params, p.n)


def moving_passes(params, p: SortProblem) -> int:
    """Rung 5: the passes that move keys drawn below 2^bits - those whose digit holds some of the
    bits; a digit above them is 0 for every key (the workspace's keys: whole digits of random bits;
    a digit that happened to be one value for every key would be skipped too)."""
    return radix_digits(params, key_bits=p.bits)[1] if p.n > 1 else 0


def skip_bytes(params, p: SortProblem) -> int:
    """Rung 5: as rung 4 with only the moving passes (none: one copy of the input)."""
    return onesweep_bytes(params, p, max(moving_passes(params, p), 1))


def key_params(p: SortProblem, device=None, vec=None) -> dict:
    """The problem picks the float mapping of the keys."""
    return {"FLOAT": int(p.dtype == "float32")}


def radix_params(p: SortProblem, device=None, vec=None) -> dict:
    return {**key_params(p), "PAIRS": int(p.pairs)}


def onesweep_params(p: SortProblem, device=None, vec=None) -> dict:
    """Rung 4 as measured on the H200 (runs 89a652 to 4e5762, one process a problem), with 4-word
    look-backs and tiles by block index, at the fastest spill-free point: uint32 keys 16 a thread at
    64 registers (4 blocks an SM), every other round ranked by __match_any_sync and the rest by
    ballots (274.8 GB/s, 92.1% of CUB at 2^28; ballots alone 81.0%, match_any alone 63.2%); float
    keys 8 at 64 registers (175.8; 12 and 16 spill there); pairs 16 in blocks of 256 at 80 registers
    (3 blocks an SM), ranked by ballots, each value read with its key and staged beside it as one
    8-byte word (STAGED 2; run afc1b6_pairs_words: 2^24 0.690 ms = 119.5% of torch.sort, 2^28 10.71
    ms = 110.2%, against 0.838 / 12.75 ms for 12 a thread at ptxas's 104 registers with the keys
    and values staged in two rounds - STAGED 1 at 80 registers spills). Float keys with values spill
    there (the key mapping's registers): 12 a thread at ptxas's 106, as staged (not measured apart;
    for uint32 keys that point ran 0.774 against 0.838 ms)."""
    if p.pairs and p.dtype == "float32":
        return {**radix_params(p), "BLOCK": 256, "ITEMS": 12, "REGS": 0, "MATCH": 1, "VALS": 1, "STAGED": 2}
    if p.pairs:
        return {**radix_params(p), "BLOCK": 256, "ITEMS": 16, "REGS": 80, "MATCH": 1, "VALS": 1, "STAGED": 2}
    return {**radix_params(p), "BLOCK": 256, "ITEMS": 8 if p.dtype == "float32" else 16, "REGS": 64, "MATCH": 2}


def skip_params(p: SortProblem, device=None, vec=None) -> dict:
    """Rung 5: rung 4's points, but uint32 pairs at ptxas's registers (107: 2 blocks an SM) - the
    choice of arrays costs rung 4's 80-register build 16 bytes of spills (and 12 a thread at 80
    fits). Rung 4 at that point (run afc1b6_pairs_words): 0.707 / 10.59 ms at 2^24 / 2^28 against
    0.690 / 10.71 at 80 registers. Rung 5 itself (run 134060_sort_bits_skip): 0.754 / 11.29 ms
    against rung 4's 0.703 / 10.94 on full-range pairs - more than the lost block an SM costs rung 4
    (docs/design/sort.md, rung 5)."""
    params = onesweep_params(p, device, vec)
    if p.pairs and p.dtype == "uint32":
        params["REGS"] = 0
    return params


def unsupported(rung, p: SortProblem) -> str | None:
    if p.pairs and rung.can(BITONIC):
        return "a bitonic network is not stable: key-value pairs need a stable sort (the radix rungs)"
    return None


# --- inputs, outputs, references ---------------------------------------------------------------

class Workspace:
    """Random keys over their whole range (floats: normal values of both signs, with a few -0.0,
    +0.0, infinities and NaNs of both signs among them), random uint32 values."""

    def __init__(self, p: SortProblem, seed: int):
        import cupy

        self.p = p
        rng = cupy.random.default_rng(seed)
        bits = rng.integers(0, 2**32, p.n, dtype=cupy.uint64).astype(cupy.uint32)
        if p.dtype == "float32":
            x = (rng.standard_normal(p.n, dtype=cupy.float32) * 1e3).view(cupy.uint32)
            special = cupy.asarray(np.array([0x80000000, 0, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001,
                                             0x7F800001], dtype=np.uint32))
            pick = bits % 64 == 0  # (1 in 64: the special values, and ties among them)
            x[pick] = special[(bits[pick] >> 8) % special.size]
            bits = x
        if p.bits < 32:
            bits &= cupy.uint32((1 << p.bits) - 1)
        self.keys = bits
        self.vals = rng.integers(0, 2**32, p.n, dtype=cupy.uint64).astype(cupy.uint32) if p.pairs else None
        self.out_keys = cupy.empty(p.n, dtype=cupy.uint32)
        self.out_vals = cupy.empty(p.n, dtype=cupy.uint32) if p.pairs else None

    def poison(self) -> None:
        self.out_keys.fill(0x7FC0DEAD if self.p.dtype == "float32" else 0xDEADBEEF)
        if self.out_vals is not None:
            self.out_vals.fill(0xDEADBEEF)

    def args(self) -> tuple:  # (each rung's runner launches with its own)
        return (self.keys, self.out_keys)

    @property
    def typed_keys(self):
        """The keys as their type (float32 or uint32): what a library call sorts."""
        import cupy

        return self.keys.view(cupy.float32) if self.p.dtype == "float32" else self.keys

    def _numbers(self, keys):
        import cupy

        return keys.view(cupy.float32).astype(cupy.float64) if self.p.dtype == "float32" else keys.astype(cupy.float64)

    def stable_order(self):
        """NumPy's stable order of the keys, computed on the GPU: CuPy's stable argsort (CUB radix) of
        numpy_order_keys - CuPy's own float sort orders NaNs by their sign bit and -0.0 before +0.0."""
        import cupy

        return cupy.argsort(numpy_order_keys(self.keys) if self.p.dtype == "float32" else self.keys)

    def expected(self):
        """The stable sort: the keys as numbers (±0 equal, NaN = NaN), then the values exactly."""
        import cupy

        order = self.stable_order()
        keys = self._numbers(self.keys[order])
        return cupy.concatenate([keys, self.vals[order].astype(cupy.float64)]) if self.p.pairs else keys

    def output(self):
        import cupy

        keys = self._numbers(self.out_keys)
        return cupy.concatenate([keys, self.out_vals.astype(cupy.float64)]) if self.p.pairs else keys


def numpy_order_keys(bits):
    """float32 bits (uint32, NumPy or CuPy) -> uint32 keys whose unsigned order is NumPy's sort order:
    negatives flipped, positives' sign bit set, -0.0 as +0.0, every NaN the largest key - the
    kernels' sort_key (kernels/include/simtlab_sort.cuh), element by element."""
    import cupy

    xp = cupy.get_array_module(bits)
    b = bits.astype(xp.uint32)
    nan = (b & xp.uint32(0x7FFFFFFF)) > xp.uint32(0x7F800000)
    b = xp.where(b == xp.uint32(0x80000000), xp.uint32(0), b)
    k = xp.where((b & xp.uint32(0x80000000)) != 0, ~b, b | xp.uint32(0x80000000))
    return xp.where(nan, xp.uint32(0xFFFFFFFF), k).astype(xp.uint32)


def workspace(p: SortProblem, seed: int) -> Workspace:
    return Workspace(p, seed)


def make_runner(inst, problem: SortProblem, ws: Workspace, device, vec, prepare):
    """Rungs 1-2: the keys copied into a power-of-two buffer padded with the largest key, the
    network, the first n copied out - all inside the timed call. Rung 3: 32 / BITS digits, three
    launches each, ping-ponging between a buffer and the output so the last pass lands in it."""
    import cupy

    p, params = problem, inst.params
    launch = inst.geometry(p, device)
    func = prepare(inst, launch, vec, device)
    block = (params["BLOCK"], 1, 1)
    if inst.rung.can(BITONIC):
        tile = 2 * params["BLOCK"]
        n2 = padded(p.n, tile)
        buf = cupy.empty(n2, dtype=cupy.uint32)
        grids = {0: (n2 // tile, 1, 1), 1: (-(-(n2 // 2) // params["BLOCK"]), 1, 1), 2: (n2 // tile, 1, 1)}
        steps = [(grids[phase], (buf, np.uint32(n2), np.int32(phase), np.uint32(k), np.uint32(j)))
                 for phase, k, j in bitonic_steps(n2, tile, inst.rung.can(MERGE_TAILS))]

        def run_bitonic():
            buf[p.n:].fill(PAD)
            buf[: p.n] = ws.keys
            for grid, args in steps:
                func(grid, block, args)
            ws.out_keys[...] = buf[: p.n]

        run_bitonic.keep = buf
        return run_bitonic
    if inst.rung.can(ONESWEEP):
        return _onesweep_runner(func, params, p, ws, block, skip=inst.rung.can(SKIP))
    bits = params["BITS"]
    radix, passes = radix_digits(params)
    t = tiles(params, p.n)
    hist = cupy.empty(radix * t, dtype=cupy.uint32)
    totals = cupy.empty(radix, dtype=cupy.uint32)
    routes, temps = pass_routes(ws, passes, cupy)
    steps = []
    for d, route in enumerate(routes):
        common = (*route, hist, totals, np.int32(p.n), np.int32(t), np.int32(d * bits))
        steps += [((t, 1, 1), (np.int32(0), *common)), ((radix, 1, 1), (np.int32(1), *common)),
                  ((t, 1, 1), (np.int32(2), *common))]

    def run_radix():
        for grid, args in steps:
            func(grid, block, args)

    run_radix.keep = (hist, totals, temps)
    return run_radix


def pass_routes(ws, passes: int, xp) -> tuple[list[tuple], tuple]:
    """The radix rungs' arrays, pass by pass - (keys in, keys out, values in, values out), a null
    pointer for values a keys-only sort does not have: the input first, then back and forth between
    a buffer and the output, so that the last pass lands in the output. Returns the routes and the
    buffers (allocated with `xp`: CuPy, or NumPy in a test)."""
    pairs = ws.vals is not None
    temps = (xp.empty(ws.keys.size, dtype=xp.uint32), xp.empty(ws.keys.size, dtype=xp.uint32) if pairs else None)
    null = np.uint64(0)
    src = (ws.keys, ws.vals if pairs else null)
    routes = []
    for d in range(passes):
        to_out = (passes - 1 - d) % 2 == 0
        dst = (ws.out_keys, ws.out_vals) if to_out else temps
        dst = (dst[0], dst[1] if pairs else null)
        routes.append((src[0], dst[0], src[1], dst[1]))
        src = dst
    return routes, temps


def _onesweep_runner(func, params, p: SortProblem, ws: Workspace, block, skip: bool = False):
    """Rungs 4-5: histogram and look-back words cleared on the caller's stream, the histogram
    launch, the scan of each digit's counts, then a pass a digit. Rung 4's passes ping-pong so the
    last lands in the output; rung 5's are each given the input, a buffer and the output and pick
    (from the notes the scan launch writes every run into `skipped`) what they read and write."""
    import cupy

    t = tiles(params, p.n)
    radix, passes = radix_digits(params)
    hist = cupy.empty(passes * radix, dtype=cupy.uint32)
    tickets = cupy.empty(passes, dtype=cupy.uint32)
    status = cupy.empty(radix * t, dtype=cupy.uint64)
    null = np.uint64(0)
    if skip:
        skipped = cupy.empty(passes, dtype=cupy.uint32)
        temps = (cupy.empty(p.n, dtype=cupy.uint32), cupy.empty(p.n, dtype=cupy.uint32) if ws.vals is not None else None)
        values = (ws.vals, temps[1], ws.out_vals) if ws.vals is not None else (null,) * 3
        state = (hist, status, tickets, skipped, np.int32(p.n), np.int32(t))
        routes = [(ws.keys, temps[0], ws.out_keys, *values)] * passes
        counting = routes[0]
    else:
        skipped = None
        state = (hist, status, tickets, np.int32(p.n), np.int32(t))
        routes, temps = pass_routes(ws, passes, cupy)
        counting = (ws.keys, null, null, null)
    steps = [((min(t, 1024), 1, 1), (np.int32(0), *counting, *state, np.int32(0))),
             ((passes, 1, 1), (np.int32(1), *counting, *state, np.int32(0)))]
    steps += [((t, 1, 1), (np.int32(2), *route, *state, np.int32(d))) for d, route in enumerate(routes)]

    def run_onesweep():
        stream = cupy.cuda.get_current_stream().ptr
        for buf in (hist, tickets, status):
            cupy.cuda.runtime.memsetAsync(buf.data.ptr, 0, buf.nbytes, stream)
        for grid, args in steps:
            func(grid, block, args)

    run_onesweep.keep = (hist, tickets, status, skipped, temps)
    return run_onesweep


def _cupy_sort(ws: Workspace):
    import cupy

    view = ws.typed_keys

    def run():
        ws.out_keys.view(view.dtype)[...] = cupy.sort(view)

    return run


def _cupy_argsort(ws: Workspace):
    import cupy

    view = ws.typed_keys

    def run():
        order = cupy.argsort(view)
        cupy.take(view, order, out=ws.out_keys.view(view.dtype))
        cupy.take(ws.vals, order, out=ws.out_vals)

    return run


def _torch_sort(ws: Workspace):
    import torch

    keys = torch.as_tensor(ws.keys.view(np.float32 if ws.p.dtype == "float32" else np.int32), device="cuda")

    def run():
        torch.sort(keys, stable=True)

    return run


def _device_copy(ws: Workspace):
    return device_copy(ws.p.bytes // 2)


def references() -> list[Reference]:
    """CuPy's calls, checked on uint32 keys; on float keys timed only (CuPy orders NaNs by their sign
    bit and -0.0 before +0.0, where NumPy puts every NaN last and keeps ±0 in input order)."""
    def uint(pairs):
        return lambda p: p.pairs == pairs and p.dtype == "uint32"

    def floats(pairs):
        return lambda p: p.pairs == pairs and p.dtype == "float32"

    return ([Reference("CuPy sort (CUB)", _cupy_sort, applies=uint(False)),
             Reference("CuPy sort (CUB; NaNs by sign)", _cupy_sort, verifiable=False, applies=floats(False)),
             Reference("CuPy argsort + take", _cupy_argsort, applies=uint(True)),
             Reference("CuPy argsort + take (NaNs by sign)", _cupy_argsort, verifiable=False, applies=floats(True)),
             Reference("device copy", _device_copy, verifiable=False)]
            + torch_reference("PyTorch sort (values and indices; uint32 keys as int32)", _torch_sort))


def bitonic_space(max_smem: int) -> Space:
    return Space({"BLOCK": (256, 512, 1024)})


def onesweep_static_smem(c) -> int:
    """Rung 4's static shared memory: a warp's count of each digit value (at least a pass's
    counts each, for the histogram launch), the tile's starts, (STAGED) the tile itself in digit
    order with each digit's start in it (STAGED 2 with pairs: 8 bytes a key, its value beside it),
    and (EARLY) the tile's counts."""
    radix, passes = radix_digits(c)
    tile, warps = c["BLOCK"] * c["ITEMS"], c["BLOCK"] // 32
    staged = radix + tile * (2 if c["STAGED"] == 2 and c.get("PAIRS", 1) else 1) if c["STAGED"] else 2
    return 4 * (max(warps, passes) * radix + radix + warps + 1 + staged + (radix if c["EARLY"] else 1))


def onesweep_space(max_smem: int) -> Space:
    return Space({"BLOCK": (256, 512), "ITEMS": (8, 12, 16, 20), "STAGED": (0, 1), "EARLY": (0, 1), "LOOK": (1, 4),
                  "MATCH": (0, 1, 2, 3), "ORDER": (0, 1), "REGS": (0, 64), "VALS": (0, 1), "BITS": (6, 7, 8)},
                 [("static shared memory within 48 KB", lambda c: onesweep_static_smem(c) <= SMEM_WITHOUT_OPT_IN)])


def radix_space(max_smem: int) -> Space:
    return Space({"BLOCK": (128, 256, 512), "ITEMS": (4, 8, 16), "BITS": (4, 5)},
                 [("a thread a digit; per-thread counts in static shared memory",
                   lambda c: (1 << c["BITS"]) <= c["BLOCK"] and 4 * (1 << c["BITS"]) * c["BLOCK"] <= 40 * 1024)])


# --- the public operators (simtlab.sort, simtlab.argsort) -------------------------------------------

SORT_TYPES = ("float32", "int32", "uint32")
KEY_MODE = {"float32": 1, "int32": 4, "uint32": 0}  # the FLOAT template argument's key bits (simtlab_sort.cuh)
DESCENDING = 2
IOTA = "iota"  # a constant 0, 1, ..., n-1 (argsort's values)


def _declare_sort(op: str):
    """Rung 5 (one-sweep radix, passes whose digit every key shares skipped on the device) over one
    row of keys, stable, ascending or descending, with 32-bit values (argsort: their positions, a
    constant made once per plan): its histogram, tickets and look-back words cleared on the
    caller's stream, then the histogram, the digits' scans and a launch a digit."""
    def declare(shapes, dtype, options, device, vec, build) -> Declared:
        shape = shapes[0]
        if len(shape) != 1:
            raise ValueError(f"simtlab.{op}: the radix sort takes one row of keys, got shape {shape}")
        n = shape[0]
        if n >= 2**31:
            raise ValueError(f"simtlab.{op}: {n} keys; the sort counts positions in 32 bits (at most 2^31 - 1)")
        pairs = op == "argsort" or (len(shapes) > 1 and shapes[1] is not None)
        if pairs and op == "sort" and shapes[1] != shape:
            raise ValueError(f"simtlab.sort: values have shape {shapes[1]} but keys {shape}")
        rung = FAMILY.rung(5)
        p = SortProblem(max(n, 1), "float32" if dtype == "float32" else "uint32", pairs)
        mode = KEY_MODE[dtype] | (DESCENDING if options.get("descending") else 0)
        params = rung.params(device.arch, {**skip_params(p, device), "FLOAT": mode})
        if params["REGS"] and build(rung, params).resources(None).spill_bytes:
            # (the measured register cap leaves no room for another key mode's extra instruction
            # - int32's sign flip, descending's inversion: ptxas's own count instead)
            params = {**params, "REGS": 0}
        t = tiles(params, p.n)
        radix, passes = radix_digits(params)
        values = (CONST, 0) if op == "argsort" else (IN, 1)
        null = np.int64(0)
        keys_route = ((IN, 0), (SCRATCH, 4), (OUT, 0))
        vals_route = (values, (SCRATCH, 5), (OUT, 1)) if pairs else (null, null, null)
        state = ((SCRATCH, 0), (SCRATCH, 1), (SCRATCH, 2), (SCRATCH, 3), np.int32(p.n), np.int32(t))
        block = (params["BLOCK"], 1, 1)
        route = (*keys_route, *vals_route, *state)
        steps = [Step(rung, params, Launch((min(t, 1024), 1, 1), block), (np.int32(0), *route, np.int32(0))),
                 Step(rung, params, Launch((passes, 1, 1), block), (np.int32(1), *route, np.int32(0)))]
        steps += [Step(rung, params, Launch((t, 1, 1), block), (np.int32(2), *route, np.int32(d)))
                  for d in range(passes)]
        # (hist, look-back words, tickets, skipped passes, the keys' and values' buffer: 32-bit words
        # as int32, a type every array library allocates and zeroes)
        scratch = (((passes * radix,), "int32"), ((radix * t,), "int64"), ((passes,), "int32"), ((passes,), "int32"),
                   ((p.n,), "int32"), ((p.n,) if pairs else (1,), "int32"))
        value_type = "int32" if op == "argsort" else dtype
        outputs = ((shape, dtype),) + (((shape, value_type),) if pairs else ())
        constants = (((p.n,), "int32", IOTA),) if op == "argsort" else ()
        order = "descending" if options.get("descending") else "ascending"
        return Declared(outputs, tuple(steps), f"{n} {dtype} keys{' with values' if pairs else ''}, {order}: "
                        f"{rung.id}, {passes} digit passes", scratch=scratch, constants=constants, cleared=(0, 1, 2),
                        align=4)

    return declare


OPERATORS = (Operator("sort", ("keys", "values"), SORT_TYPES, _declare_sort("sort"), frozenset({"values"})),
             Operator("argsort", ("keys",), SORT_TYPES, _declare_sort("argsort")))


# --- the family: its rungs, one per kernel file -------------------------------------------------

# Rungs 4-5: one kernel's template parameters (rung 5 calls rung 4's launch) and their defaults
ONESWEEP_PARAMS = ("BLOCK", "ITEMS", "FLOAT", "PAIRS", "STAGED", "EARLY", "LOOK", "MATCH", "ORDER", "REGS", "VALS", "BITS")
ONESWEEP_DEFAULTS = frozen({"BLOCK": 256, "ITEMS": 16, "FLOAT": 0, "PAIRS": 0, "STAGED": 1, "EARLY": 0, "LOOK": 4,
                            "MATCH": 2, "ORDER": 1, "REGS": 64, "VALS": 0, "BITS": 8})
# rung 5's own switch: GLOBAL 1 tells the compiler the arrays a pass picks are global memory (not yet
# measured; docs/design/sort.md, rung 5)
SKIP_PARAMS = (*ONESWEEP_PARAMS, "GLOBAL")
SKIP_DEFAULTS = frozen({**ONESWEEP_DEFAULTS, "GLOBAL": 0})


def _bitonic_bytes_rung2(params, p):
    return bitonic_bytes(params, p, merge_tails=True)


FAMILY = Family(
    name="sort",
    title="sort 32-bit keys (uint32, float32), optionally with uint32 values",
    ops=sys.modules[__name__],
    reference="CuPy sort / argsort (CUB radix sort), PyTorch sort, and a device copy of the bytes a sort moves",
    default_sizes=("16777216", "16777216:pairs", "268435456:float32", "268435456"),  # (the last: static reports)
    rungs=(
        Rung("sort", 1, "bitonic_shared", "sort/01_bitonic_shared.cu", "sort_bitonic_shared", ("BLOCK", "FLOAT"),
             frozen({"BLOCK": 1024, "FLOAT": 0}),
             "tiles sorted by a bitonic network in shared memory, then every merge step a pass over global memory",
             geometry_bitonic, size_defaults=key_params, capabilities=frozenset({BITONIC}), space=bitonic_space,
             traffic=bitonic_bytes, sass_expect=("LDS", "BAR")),
        Rung("sort", 2, "bitonic_merge", "sort/02_bitonic_merge.cu", "sort_bitonic_merge", ("BLOCK", "FLOAT"),
             frozen({"BLOCK": 1024, "FLOAT": 0}),
             "merge stages in global memory only while the distance spans tiles; the rest of each stage in "
             "shared memory, one launch",
             geometry_bitonic, size_defaults=key_params, capabilities=frozenset({BITONIC, MERGE_TAILS}),
             space=bitonic_space, traffic=_bitonic_bytes_rung2, sass_expect=("LDS", "BAR")),
        Rung("sort", 3, "radix_lsd", "sort/03_radix_lsd.cu", "sort_radix_lsd",
             ("BLOCK", "ITEMS", "BITS", "FLOAT", "PAIRS"), frozen({"BLOCK": 256, "ITEMS": 8, "BITS": 4, "FLOAT": 0,
                                                                   "PAIRS": 0}),
             "LSD radix, BITS a pass: tile histograms, a scan a digit, a stable scatter - three launches a digit",
             geometry_radix, size_defaults=radix_params, capabilities=frozenset({RADIX}), space=radix_space,
             sass_expect=("SHFL", "ATOMS")),
        Rung("sort", 4, "radix_onesweep", "sort/04_radix_onesweep.cu", "sort_radix_onesweep", ONESWEEP_PARAMS,
             ONESWEEP_DEFAULTS,
             "one-sweep radix: all digits counted in one read, then a pass a digit - warp ranks by ballots and match_any, "
             "tile offsets by decoupled look-back, the tile staged in digit order so its writes coalesce",
             geometry_radix, size_defaults=onesweep_params, capabilities=frozenset({ONESWEEP}), space=onesweep_space,
             traffic=onesweep_bytes, sass_expect=("VOTE", "ATOMG")),
        Rung("sort", 5, "radix_skip", "sort/05_radix_skip.cu", "sort_radix_skip", SKIP_PARAMS, SKIP_DEFAULTS,
             "one-sweep radix that skips the passes whose digit every key shares - noted by the scan launch, "
             "each pass choosing on the device what it reads and writes",
             geometry_radix, size_defaults=skip_params, capabilities=frozenset({ONESWEEP, SKIP}),
             space=onesweep_space, traffic=skip_bytes, sass_expect=("VOTE", "ATOMG")),
    ),
    operators=OPERATORS,
    metric="gbs",
    check_size="100003",
)
