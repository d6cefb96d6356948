// Rung 4 - one-sweep radix sort: what changed from rung 3: one launch reads the keys once and counts
// every digit (BITS bits each, 8 by default: 4 passes); then each digit is one launch that reads and
// writes every key once. Tiles are taken in order; a warp ranks its keys a round at a time (a ballot
// a digit bit finds the lanes with its digit, the lowest of them advances the warp's count), and a
// tile learns where its keys of each digit go by decoupled look-back: thread d publishes the tile's
// count of digit d and adds up its predecessors' until it meets an inclusive prefix. What it should
// buy: 32 / BITS passes of one read and one write instead of rung 3's two reads and a write, no scans.
// STAGED 1: the tile's keys (then its values; STAGED 2: a key and its value as one 8-byte word) are
// first placed in shared memory in digit order and written out from there - consecutive threads
// write consecutive places of a digit's run, filling whole sectors instead of one key a sector.
// Options measured against (Nsight Compute: the MIO pipe 77% busy on the ranking): MATCH 0 ranks by
// __match_any_sync (k >= 2: every k-th round), ORDER 0 takes tiles by an atomic ticket, LOOK 1 reads
// one look-back word at a time, EARLY 1 publishes the tile's counts first; BITS below 8 trades
// ballots a pass for passes (wider digits need more threads, and per-warp counts, than a block has).
#include "simtlab_sort.cuh"

using simtlab::sort::block_exclusive_scan;
using simtlab::sort::sort_key;

// A look-back word: flag in the high half (0 = not ready, 2p + 1 = pass p's count, 2p + 2 = pass p's
// inclusive prefix: an older pass's word reads as not ready, so the words are cleared once a run).
__device__ __forceinline__ unsigned long long lookback_word(unsigned flag, unsigned value) {
  return ((unsigned long long)flag << 32) | value;
}

// Decoupled look-back for digit t of tile `tile`, whose own count is published in `word`: the keys
// of digit t in the tiles before it, walking back until an inclusive prefix; then this tile's
// inclusive prefix is published. LOOK predecessors' words are read at once (one wait for all of
// them), then taken nearest first; a word read before it was ready is read again.
template <int LOOK, int RADIX>
__device__ __forceinline__ unsigned look_back(unsigned long long* status, unsigned long long* word, unsigned tile,
                                              int t, int pass, unsigned count) {
  const unsigned ready = 2 * pass + 1, inclusive = 2 * pass + 2;
  unsigned before = 0;
  if (tile == 0) return 0;
  for (long long j = (long long)tile - 1;; j -= LOOK) {
    unsigned long long w[LOOK];
#pragma unroll
    for (int u = 0; u < LOOK; ++u)  // (tile 0's word is always inclusive: no walk passes it)
      w[u] = j - u >= 0 ? *reinterpret_cast<volatile unsigned long long*>(status + (j - u) * RADIX + t)
                        : lookback_word(inclusive, 0);
#pragma unroll
    for (int u = 0; u < LOOK; ++u) {
      while ((unsigned)(w[u] >> 32) < ready)
        w[u] = *reinterpret_cast<volatile unsigned long long*>(status + (j - u) * RADIX + t);
      before += (unsigned)w[u];
      if ((unsigned)(w[u] >> 32) == inclusive) {
        atomicExch(word, lookback_word(inclusive, before + count));
        return before;
      }
    }
  }
}

// The lanes of the warp whose `digit` (0 to 2^BITS; 2^BITS: past the end) equals this lane's:
// __match_any_sync (`ballots` false: an op of the MIO pipe), or a ballot a bit - BITS, and one more
// in a tile with keys past the end - each keeping the lanes that agree with this one on it (ALU work).
template <int BITS>
__device__ __forceinline__ unsigned digit_peers(unsigned digit, bool partial, bool ballots) {
  if (!ballots) return __match_any_sync(0xffffffffu, digit);
  unsigned peers = 0xffffffffu;
#pragma unroll
  for (int b = 0; b < BITS; ++b) {
    const bool bit = (digit >> b) & 1;
    const unsigned votes = __ballot_sync(0xffffffffu, bit);
    peers &= bit ? votes : ~votes;
  }
  if (partial) {
    const bool end = digit >> BITS;
    const unsigned votes = __ballot_sync(0xffffffffu, end);
    peers &= end ? votes : ~votes;
  }
  return peers;
}

// REGS: the registers a thread is held to, as the blocks an SM they must allow (__launch_bounds__;
// 0 leaves them to ptxas, which put one build at 80 or 102-116 as its code changed: 3 or 2 blocks
// of 256 an SM; 64 gives 4).
template <int BLOCK, int REGS>
struct MinBlocks {
  static constexpr int value = REGS && 65536 / (BLOCK * REGS) > 1 ? 65536 / (BLOCK * REGS) : 1;
};

// A digit of BITS bits: the values it takes, and the passes 32-bit keys need (the last digit may
// be narrower).
template <int BITS>
struct Digits {
  static constexpr int RADIX = 1 << BITS, PASSES = (32 + BITS - 1) / BITS;
};

// The arrays a launch reads and writes (keys, and values for pairs): here the ones it is given.
struct GivenArrays {
  const unsigned* __restrict__ ki;
  unsigned* __restrict__ ko;
  const unsigned* __restrict__ vi;
  unsigned* __restrict__ vo;
  __device__ __forceinline__ const unsigned* keys_in() const { return ki; }
  __device__ __forceinline__ unsigned* keys_out() const { return ko; }
  __device__ __forceinline__ const unsigned* vals_in() const { return vi; }
  __device__ __forceinline__ unsigned* vals_out() const { return vo; }
};

// One launch of the sort (phase 0 counts, 1 scans the counts, 2 is digit pass `pass`): the kernel
// below, and rung 5's, whose arrays are chosen on the device (asked where they are used, so no
// register holds a pointer across the ranking).
template <int BLOCK, int ITEMS, int FLOAT, int PAIRS, int STAGED, int EARLY, int LOOK, int MATCH, int ORDER, int REGS,
          int VALS, int BITS, class Arrays>
__device__ __forceinline__ void onesweep_launch(int phase, const Arrays& io, unsigned* __restrict__ hist,
                                                unsigned long long* __restrict__ status, unsigned* __restrict__ tickets,
                                                int n, int tiles, int pass) {
  static_assert(BITS >= 1 && BITS <= 8, "BITS: 1 to 8 bits a digit (a thread a digit, a warp's count of each)");
  constexpr int RADIX = Digits<BITS>::RADIX, MASK = RADIX - 1, PASSES = Digits<BITS>::PASSES, WARPS = BLOCK / 32,
                TILE = BLOCK * ITEMS, COUNTS = (WARPS > PASSES ? WARPS : PASSES) * RADIX;
  static_assert(BLOCK >= RADIX && BLOCK % 32 == 0, "a thread per digit");
  __shared__ unsigned counts[COUNTS];  // phase 0: every digit's counts; phase 2: a warp's counts
  __shared__ unsigned tile_start[RADIX];      // where the tile's keys of each digit start in the output
  __shared__ unsigned warp_sums[WARPS];
  __shared__ unsigned ticket;
  __shared__ unsigned local_start[STAGED ? RADIX : 1];  // STAGED: where each digit's keys start in the tile
  // STAGED: the tile in digit order (keys, then values; STAGED 2 with pairs: a key and its value as one word)
  __shared__ __align__(8) unsigned staged[STAGED ? (STAGED == 2 && PAIRS ? 2 * TILE : TILE) : 1];
  __shared__ unsigned early[EARLY ? RADIX : 1];          // EARLY: the tile's digit counts, before ranking
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  if (phase == 0) {
    for (int i = t; i < PASSES * RADIX; i += BLOCK) counts[i] = 0;
    __syncthreads();
    auto count = [&](unsigned bits) {
      const unsigned k = sort_key<FLOAT>(bits);
#pragma unroll
      for (int p = 0; p < PASSES; ++p) atomicAdd(&counts[p * RADIX + ((k >> (BITS * p)) & MASK)], 1u);
    };
    // 16-byte groups, HIST_LOADS of them loaded before any is counted: the loads stay in flight
    // together (one key a thread at a time left this launch waiting on memory: 845 us at 2^28).
    constexpr int HIST_LOADS = 4;
    const long long stride = (long long)gridDim.x * BLOCK, first = (long long)blockIdx.x * BLOCK + t;
    const unsigned* keys_in = io.keys_in();
    const bool vec = ((size_t)keys_in & 15) == 0;
    const long long groups = vec ? n / 4 : 0;
    for (long long g = first; g < groups; g += HIST_LOADS * stride) {
      uint4 q[HIST_LOADS];
#pragma unroll
      for (int u = 0; u < HIST_LOADS; ++u)
        if (g + u * stride < groups) q[u] = reinterpret_cast<const uint4*>(keys_in)[g + u * stride];
#pragma unroll
      for (int u = 0; u < HIST_LOADS; ++u)
        if (g + u * stride < groups) count(q[u].x), count(q[u].y), count(q[u].z), count(q[u].w);
    }
    for (long long i = 4 * groups + first; i < n; i += stride) count(keys_in[i]);  // (the rest, or all unaligned)
    __syncthreads();
    for (int i = t; i < PASSES * RADIX; i += BLOCK)
      if (counts[i]) atomicAdd(&hist[i], counts[i]);
    return;
  }
  if (phase == 1) {  // block p: exclusive scan of digit p's RADIX counts
    unsigned total;
    const unsigned v = t < RADIX ? hist[blockIdx.x * RADIX + t] : 0u;
    const unsigned excl = block_exclusive_scan<BLOCK>(v, warp_sums, total);
    if (t < RADIX) hist[blockIdx.x * RADIX + t] = excl;
    return;
  }
  static_assert(STAGED >= 0 && STAGED <= 2, "STAGED: 0 scattered writes, 1 the tile staged in digit order, 2 ... "
                                            "with a key and its value as one word");
  static_assert(LOOK >= 1 && LOOK <= 16 && MATCH >= 0 && MATCH <= 4 && (ORDER == 0 || ORDER == 1) && (VALS == 0 || VALS == 1),
                "LOOK: predecessors read at once; MATCH: 0 match_any, 1 ballots, k >= 2 match_any every k-th round; "
                "ORDER: 0 a ticket, 1 the block index; VALS: 0 values read when placed, 1 with their keys");
  if (ORDER == 0 && t == 0) ticket = atomicAdd(&tickets[pass], 1u);
  for (int i = t; i < WARPS * RADIX; i += BLOCK) counts[i] = 0;
  if (EARLY && t < RADIX) early[t] = 0;
  __syncthreads();
  const unsigned tile = ORDER ? blockIdx.x : ticket;
  const bool partial = (long long)(tile + 1) * TILE > n;  // (keys past the end: a ninth ballot)
  // This warp's 32 x ITEMS keys, item i of lane l at i * 32 + l: a round of the warp reads one line.
  const long long base = (long long)tile * TILE + (long long)warp * 32 * ITEMS + lane;
  // key i's digit (RADIX: past the end) in the low 9 bits of slot[i], its rank among the warp's keys
  // of that digit above them once ranked: one register a key instead of two (16 keys a thread fit
  // in 64 registers without spilling)
  unsigned key[ITEMS], slot[ITEMS];
  // VALS 1 (pairs): each key's value read with it, held in registers until it is placed; VALS 0
  // reads the values only when they are placed, after the keys have gone out
  unsigned val[PAIRS && VALS ? ITEMS : 1];
  auto value = [&](int i) { return PAIRS && VALS ? val[i] : io.vals_in()[base + i * 32]; };
  auto digit = [&](int i) { return slot[i] & 511u; };
  auto rank = [&](int i) { return slot[i] >> 9; };
  const int shift = BITS * pass;
  unsigned* mine = counts + warp * RADIX;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const long long at = base + i * 32;
    key[i] = at < n ? io.keys_in()[at] : 0u;
    if constexpr (PAIRS && VALS) val[i] = at < n ? io.vals_in()[at] : 0u;
    slot[i] = at < n ? (sort_key<FLOAT>(key[i]) >> shift) & MASK : RADIX;
  }
  if constexpr (EARLY) {  // the tile's counts published now; ranking gives the same totals later
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
      if (digit(i) < RADIX) atomicAdd(&early[digit(i)], 1u);
    __syncthreads();
    if (t < RADIX)
      atomicExch(status + (long long)tile * RADIX + t, lookback_word(tile == 0 ? 2 * pass + 2 : 2 * pass + 1, early[t]));
  }
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {  // rounds in key order: the ranks are stable
    // (MATCH k >= 2: every k-th round by __match_any_sync, so the MIO and ALU pipes share the ranking)
    const unsigned d = digit(i);
    const unsigned peers = digit_peers<BITS>(d, partial, MATCH == 1 || (MATCH >= 2 && i % MATCH != 0));
    const int leader = __ffs(peers) - 1;
    unsigned before = 0;
    if (lane == leader && d < RADIX) {
      before = mine[d];
      mine[d] = before + __popc(peers);
    }
    slot[i] = d | (__shfl_sync(0xffffffffu, before, leader) + __popc(peers & ((1u << lane) - 1))) << 9;
    __syncwarp();
  }
  __syncthreads();
  if (t < RADIX) {
    unsigned count = 0;  // the warps' counts of digit t turned into each warp's start within the tile
    for (int w = 0; w < WARPS; ++w) {
      const unsigned c = counts[w * RADIX + t];
      counts[w * RADIX + t] = count;
      count += c;
    }
    unsigned long long* word = status + (long long)tile * RADIX + t;
    if (!EARLY) atomicExch(word, lookback_word(tile == 0 ? 2 * pass + 2 : 2 * pass + 1, count));  // published first
    if constexpr (STAGED) tile_start[t] = count;  // (kept for the scan below, which needs the whole block)
    else tile_start[t] = hist[pass * RADIX + t] + look_back<LOOK, RADIX>(status, word, tile, t, pass, count);
  }
  if constexpr (STAGED) {
    __syncthreads();
    unsigned total;
    const unsigned count = t < RADIX ? tile_start[t] : 0u;
    const unsigned excl = block_exclusive_scan<BLOCK>(count, warp_sums, total);
    if (t < RADIX) {
      local_start[t] = excl;
      tile_start[t] = hist[pass * RADIX + t] + look_back<LOOK, RADIX>(status, status + (long long)tile * RADIX + t, tile, t, pass, count);
    }
  }
  __syncthreads();
  if constexpr (!STAGED) {
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      if (digit(i) < RADIX) {
        const unsigned at = tile_start[digit(i)] + mine[digit(i)] + rank(i);
        io.keys_out()[at] = key[i];
        if (PAIRS) io.vals_out()[at] = value(i);
      }
    }
  } else if constexpr (STAGED == 2 && PAIRS) {
    // a key and its value staged as one 8-byte word: one trip through shared memory and one barrier
    // for both, and no output places kept in registers between a keys' and a values' round
    const long long left = n - (long long)tile * TILE;
    const int size = left < TILE ? (int)left : TILE;
    uint2* words = reinterpret_cast<uint2*>(staged);
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
      if (digit(i) < RADIX) words[local_start[digit(i)] + mine[digit(i)] + rank(i)] = make_uint2(key[i], value(i));
    __syncthreads();
#pragma unroll
    for (int m = 0; m < ITEMS; ++m) {
      const int j = t + m * BLOCK;
      if (j < size) {
        const uint2 w = words[j];
        const unsigned d = (sort_key<FLOAT>(w.x) >> shift) & MASK, at = tile_start[d] + (j - local_start[d]);
        io.keys_out()[at] = w.x;
        io.vals_out()[at] = w.y;
      }
    }
  } else {
    const long long left = n - (long long)tile * TILE;
    const int size = left < TILE ? (int)left : TILE;  // keys in this tile
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
      if (digit(i) < RADIX) staged[local_start[digit(i)] + mine[digit(i)] + rank(i)] = key[i];
    __syncthreads();
    unsigned out[ITEMS];  // where place t + m * BLOCK of the tile goes (kept for the values)
#pragma unroll
    for (int m = 0; m < ITEMS; ++m) {
      const int j = t + m * BLOCK;
      if (j < size) {
        const unsigned k = staged[j], d = (sort_key<FLOAT>(k) >> shift) & MASK;
        out[m] = tile_start[d] + (j - local_start[d]);
        io.keys_out()[out[m]] = k;
      }
    }
    if (PAIRS) {
      __syncthreads();  // every key read out of `staged` before the values take it
#pragma unroll
      for (int i = 0; i < ITEMS; ++i)
        if (digit(i) < RADIX) staged[local_start[digit(i)] + mine[digit(i)] + rank(i)] = value(i);
      __syncthreads();
#pragma unroll
      for (int m = 0; m < ITEMS; ++m)
        if (t + m * BLOCK < size) io.vals_out()[out[m]] = staged[t + m * BLOCK];
    }
  }
}

template <int BLOCK, int ITEMS, int FLOAT, int PAIRS, int STAGED, int EARLY, int LOOK, int MATCH, int ORDER, int REGS,
          int VALS, int BITS = 8>
__global__ void __launch_bounds__(BLOCK, MinBlocks<BLOCK, REGS>::value) sort_radix_onesweep(
    int phase, const unsigned* __restrict__ keys_in, unsigned* __restrict__ keys_out,
    const unsigned* __restrict__ vals_in, unsigned* __restrict__ vals_out, unsigned* __restrict__ hist,
    unsigned long long* __restrict__ status, unsigned* __restrict__ tickets, int n, int tiles, int pass) {
  onesweep_launch<BLOCK, ITEMS, FLOAT, PAIRS, STAGED, EARLY, LOOK, MATCH, ORDER, REGS, VALS, BITS>(
      phase, GivenArrays{keys_in, keys_out, vals_in, vals_out}, hist, status, tickets, n, tiles, pass);
}
