// Rung 1 - bitonic sort, tiles in shared memory: the keys (padded with the largest key to a power
// of two) are cut into tiles of 2 x BLOCK; one launch sorts every tile through the whole bitonic
// network in shared memory (log2(tile) stages, a barrier a step), alternately ascending and
// descending, so that pairs of tiles form bitonic sequences. Every later step - each merge stage k
// and each distance j within it - is a launch over global memory: log2(n)^2 / 2 passes over the
// keys in all. Data-independent compare-exchanges, no atomics, not stable (keys only).
#include "simtlab_sort.cuh"

using simtlab::sort::sort_key;

// One compare-exchange step (stage k, distance j) over the whole array: a thread a pair.
template <int FLOAT>
__device__ __forceinline__ void bitonic_global_step(unsigned* __restrict__ keys, unsigned pairs, unsigned k,
                                                    unsigned j) {
  const unsigned p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= pairs) return;
  const unsigned lo = 2 * j * (p / j) + p % j, hi = lo + j;
  const unsigned a = keys[lo], b = keys[hi];
  if ((sort_key<FLOAT>(a) > sort_key<FLOAT>(b)) == ((lo & k) == 0)) {
    keys[lo] = b;
    keys[hi] = a;
  }
}

// A tile of 2 x BLOCK keys through stages k = 2 .. `last` of the network in shared memory (every
// distance j of each), in the direction the tile's place gives: (global index & k) == 0 is up.
template <int BLOCK, int FLOAT>
__device__ __forceinline__ void bitonic_tile(unsigned* __restrict__ keys, unsigned first_k, unsigned last_k,
                                             unsigned first_j) {
  __shared__ unsigned s[2 * BLOCK];
  const unsigned base = blockIdx.x * 2 * BLOCK;
  s[threadIdx.x] = keys[base + threadIdx.x];
  s[threadIdx.x + BLOCK] = keys[base + threadIdx.x + BLOCK];
  for (unsigned k = first_k; k <= last_k; k *= 2) {
    for (unsigned j = k == first_k ? first_j : k / 2; j > 0; j /= 2) {
      __syncthreads();
      const unsigned lo = 2 * j * (threadIdx.x / j) + threadIdx.x % j, hi = lo + j;
      const unsigned a = s[lo], b = s[hi];
      if ((sort_key<FLOAT>(a) > sort_key<FLOAT>(b)) == (((base + lo) & k) == 0)) {
        s[lo] = b;
        s[hi] = a;
      }
    }
  }
  __syncthreads();
  keys[base + threadIdx.x] = s[threadIdx.x];
  keys[base + threadIdx.x + BLOCK] = s[threadIdx.x + BLOCK];
}

// phase 0: sort every tile (grid: a block a tile); phase 1: step (k, j) in global memory (grid:
// a thread a pair of the n2 / 2).
template <int BLOCK, int FLOAT>
__global__ void __launch_bounds__(BLOCK) sort_bitonic_shared(unsigned* __restrict__ keys, unsigned n2, int phase,
                                                            unsigned k, unsigned j) {
  if (phase == 0) bitonic_tile<BLOCK, FLOAT>(keys, 2, 2 * BLOCK, 1);
  else bitonic_global_step<FLOAT>(keys, n2 / 2, k, j);
}
