// Rung 3 - LSD radix sort: what changed from rung 2: no compare-exchange network. The keys are
// sorted BITS bits at a time, least significant digit first, each digit by three launches: every
// tile counts its digits (a histogram per tile, digit-major), a block per digit scans that digit's
// counts across the tiles, and every tile scatters its keys to digit start + the tiles before +
// its rank within the tile. Ranks follow the keys' order (each thread ranks its ITEMS consecutive
// keys in turn after a block-wide scan of per-thread counts), so every pass is stable - and so the
// sort, key-value pairs included. What it should buy: 32 / BITS passes of three reads and a
// write instead of ~log2(n)^2 / 2 passes; its cost: scattered writes, and three launches a digit.
#include "simtlab_sort.cuh"

using simtlab::sort::block_exclusive_scan;
using simtlab::sort::sort_key;

// phase 0: tile histograms (grid: a block a tile); 1: each digit's counts scanned across the tiles
// (grid: a block a digit), its total to totals[d]; 2: the scatter (a block a tile).
template <int BLOCK, int ITEMS, int BITS, int FLOAT, int PAIRS>
__global__ void __launch_bounds__(BLOCK) sort_radix_lsd(int phase, const unsigned* __restrict__ keys_in,
                                                       unsigned* __restrict__ keys_out,
                                                       const unsigned* __restrict__ vals_in,
                                                       unsigned* __restrict__ vals_out, unsigned* __restrict__ hist,
                                                       unsigned* __restrict__ totals, int n, int tiles, int shift) {
  constexpr int RADIX = 1 << BITS, TILE = BLOCK * ITEMS;
  static_assert(RADIX <= BLOCK, "a thread per digit");
  __shared__ unsigned counts[RADIX * BLOCK];  // phase 2: digit-major per-thread counts; phase 0: RADIX of them
  __shared__ unsigned warp_sums[BLOCK / 32];
  __shared__ unsigned digit_base[RADIX];
  const int t = threadIdx.x;
  if (phase == 1) {  // block d: exclusive scan of hist[d * tiles .. + tiles), the row's total to totals[d]
    unsigned* row = hist + (long long)blockIdx.x * tiles;
    unsigned carry = 0;
    for (int start = 0; start < tiles; start += TILE) {
      unsigned v[ITEMS], sum = 0;
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        const int at = start + t * ITEMS + i;
        v[i] = at < tiles ? row[at] : 0u;
        sum += v[i];
      }
      unsigned chunk;
      unsigned excl = carry + block_exclusive_scan<BLOCK>(sum, warp_sums, chunk);
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        const int at = start + t * ITEMS + i;
        if (at < tiles) row[at] = excl;
        excl += v[i];
      }
      carry += chunk;
      __syncthreads();  // (warp_sums is reused by the next chunk)
    }
    if (t == 0) totals[blockIdx.x] = carry;
    return;
  }
  const long long base = (long long)blockIdx.x * TILE + (long long)t * ITEMS;  // this thread's ITEMS keys
  unsigned key[ITEMS], digit[ITEMS];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const bool in = base + i < n;
    key[i] = in ? keys_in[base + i] : 0u;
    digit[i] = in ? (sort_key<FLOAT>(key[i]) >> shift) & (RADIX - 1) : RADIX;  // (RADIX: past the end)
  }
  if (phase == 0) {
    if (t < RADIX) counts[t] = 0;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
      if (digit[i] < RADIX) atomicAdd(&counts[digit[i]], 1u);
    __syncthreads();
    if (t < RADIX) hist[(long long)t * tiles + blockIdx.x] = counts[t];
    return;
  }
  // phase 2. Where each digit's keys of this tile start in the output: the digits before it
  // (all tiles) plus this digit's keys in the tiles before this one.
  if (t < RADIX) {
    unsigned before = 0;
    for (int d = 0; d < t; ++d) before += totals[d];
    digit_base[t] = before + hist[(long long)t * tiles + blockIdx.x];
  }
  // This thread's count of each digit (its own column of `counts`), and each key's rank among its
  // own keys of that digit.
#pragma unroll
  for (int d = 0; d < RADIX; ++d) counts[d * BLOCK + t] = 0;
  unsigned rank[ITEMS];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i)
    if (digit[i] < RADIX) rank[i] = counts[digit[i] * BLOCK + t]++;
  __syncthreads();
  // Scan the counts digit-major: counts[d * BLOCK + t] becomes the tile-local position of thread
  // t's first key of digit d (each thread scans RADIX consecutive entries, then across threads).
  unsigned mine[RADIX], sum = 0;
#pragma unroll
  for (int i = 0; i < RADIX; ++i) {
    mine[i] = counts[t * RADIX + i];
    sum += mine[i];
  }
  unsigned total;
  unsigned excl = block_exclusive_scan<BLOCK>(sum, warp_sums, total);
#pragma unroll
  for (int i = 0; i < RADIX; ++i) {
    counts[t * RADIX + i] = excl;
    excl += mine[i];
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    if (digit[i] < RADIX) {
      const unsigned d = digit[i];
      const unsigned at = digit_base[d] + counts[d * BLOCK + t] - counts[d * BLOCK] + rank[i];
      keys_out[at] = key[i];
      if (PAIRS) vals_out[at] = vals_in[base + i];
    }
  }
}
