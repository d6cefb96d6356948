// Rung 5 - one-sweep radix sort that skips the passes that move nothing: what changed from rung 4:
// the scan launch also asks, digit by digit, whether one value holds all n keys (then that pass
// would write every key back in the order it read them: a stable pass of a constant digit) and
// notes it; a pass so noted returns at once, and each pass that does move keys picks the arrays it
// reads and writes from the notes - the first reads the input, the last writes the output, the
// others alternate through one buffer - so nothing is decided on the host and the launches stay the
// same for any keys (a CUDA graph replays them). Where no pass moves keys (n = 1, all keys equal)
// the last launch copies the input. What it should buy: keys that span fewer bits than their type
// (indices, small counts, timestamps of one day) sort in the passes their bits need - 2^28 keys
// below 2^16 in two passes instead of four - and full-range keys at rung 4's speed. GLOBAL 1 tells
// the compiler those arrays are global memory, which it cannot see through shared memory.
#include "sort/04_radix_onesweep.cu"

// The arrays a launch was given by the block's first thread, in shared memory (keys in, keys out,
// values in, values out): read where they are used, so no register holds them across the ranking.
// A pointer read from shared memory has no known space: the passes address it generically (LD/ST)
// unless GLOBAL asserts it is global (LDG/STG; costs the 64-register keys build 12 bytes of spills).
template <int GLOBAL>
struct ChosenArrays {
  unsigned* const* at;
  __device__ __forceinline__ static unsigned* space(unsigned* p) {
    if constexpr (GLOBAL) __builtin_assume(__isGlobal(p));
    return p;
  }
  __device__ __forceinline__ const unsigned* keys_in() const { return space(at[0]); }
  __device__ __forceinline__ unsigned* keys_out() const { return space(at[1]); }
  __device__ __forceinline__ const unsigned* vals_in() const { return space(at[2]); }
  __device__ __forceinline__ unsigned* vals_out() const { return space(at[3]); }
};

template <int BLOCK, int ITEMS, int FLOAT, int PAIRS, int STAGED, int EARLY, int LOOK, int MATCH, int ORDER, int REGS,
          int VALS, int BITS = 8, int GLOBAL = 0>
__global__ void __launch_bounds__(BLOCK, MinBlocks<BLOCK, REGS>::value) sort_radix_skip(
    int phase, const unsigned* __restrict__ keys_in, unsigned* __restrict__ keys_tmp, unsigned* __restrict__ keys_out,
    const unsigned* __restrict__ vals_in, unsigned* __restrict__ vals_tmp, unsigned* __restrict__ vals_out,
    unsigned* __restrict__ hist, unsigned long long* __restrict__ status, unsigned* __restrict__ tickets,
    unsigned* __restrict__ skip, int n, int tiles, int pass) {
  constexpr int RADIX = Digits<BITS>::RADIX, PASSES = Digits<BITS>::PASSES, TILE = BLOCK * ITEMS;
  if (phase == 1) {  // block p, before it scans digit p's counts: does one value hold every key?
    const unsigned count = threadIdx.x < RADIX ? hist[blockIdx.x * RADIX + threadIdx.x] : 0u;
    const int all = __syncthreads_or(count == (unsigned)n);
    if (threadIdx.x == 0) skip[blockIdx.x] = all;
  }
  bool first = true, to_out = true;
  if (phase == 2) {
    int moving = 0, before = 0;  // passes that move keys, and those of them before this one
#pragma unroll
    for (int p = 0; p < PASSES; ++p) {
      const bool moves = !skip[p];
      moving += moves;
      before += moves && p < pass;
    }
    if (skip[pass]) {
      if (moving == 0 && pass == PASSES - 1) {  // no pass moved a key: the output is the input
        const long long end = min((long long)n, ((long long)blockIdx.x + 1) * TILE);
        for (long long i = (long long)blockIdx.x * TILE + threadIdx.x; i < end; i += BLOCK) {
          keys_out[i] = keys_in[i];
          if (PAIRS) vals_out[i] = vals_in[i];
        }
      }
      return;
    }
    // the j-th moving pass (j = before) reads the input (j = 0) or what the one before it wrote, and
    // writes the output where an even number of moving passes follow it, else the buffer
    first = before == 0, to_out = (moving - 1 - before) % 2 == 0;
  }
  // (seen by every thread after the launch's first barrier, before any array is touched; one
  // instantiation for every phase, as each holds its own shared arrays)
  __shared__ unsigned* chosen[4];
  if (threadIdx.x == 0) {
    chosen[0] = const_cast<unsigned*>(first ? keys_in : to_out ? keys_tmp : keys_out);
    chosen[1] = to_out ? keys_out : keys_tmp;
    chosen[2] = const_cast<unsigned*>(first ? vals_in : to_out ? vals_tmp : vals_out);
    chosen[3] = to_out ? vals_out : vals_tmp;
  }
  onesweep_launch<BLOCK, ITEMS, FLOAT, PAIRS, STAGED, EARLY, LOOK, MATCH, ORDER, REGS, VALS, BITS>(
      phase, ChosenArrays<GLOBAL>{chosen}, hist, status, tickets, n, tiles, pass);
}
