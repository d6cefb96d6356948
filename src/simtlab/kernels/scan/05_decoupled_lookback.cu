// Rung 5 - single pass with decoupled look-back: each block takes the next tile in launch order
// (an atomic counter, so a tile's predecessors are always running or done), scans it in registers
// as rung 3 does, publishes its total, and a warp reads its 32 nearest predecessors' published
// words at once - totals (keep walking) up to the nearest inclusive prefix (stop) - then publishes
// its own prefix and writes.
// Value and flag share one 64-bit word, so a reader never sees one without the other. The data
// is read once and written once: 8 bytes an element, what a copy moves.
#include "simtlab_scan.cuh"

namespace simtlab {
namespace scan {

enum : unsigned { NOT_READY = 0, AGGREGATE = 1, PREFIX = 2 };

__device__ __forceinline__ unsigned bits_of(float v) { return __float_as_uint(v); }
__device__ __forceinline__ unsigned bits_of(int v) { return (unsigned)v; }
__device__ __forceinline__ void from_bits(unsigned b, float& v) { v = __uint_as_float(b); }
__device__ __forceinline__ void from_bits(unsigned b, int& v) { v = (int)b; }

template <typename T>
__device__ __forceinline__ unsigned long long pack(unsigned flag, T value) {
  return ((unsigned long long)flag << 32) | bits_of(value);
}

template <typename T>
__device__ __forceinline__ T unpack(unsigned long long word) {
  T value;
  from_bits((unsigned)word, value);
  return value;
}

}  // namespace scan
}  // namespace simtlab

template <int DT, int BLOCK, int ITEMS>
__global__ void __launch_bounds__(BLOCK)
scan_decoupled_lookback(const typename simtlab::scan::Elem<DT>::T* __restrict__ x, typename simtlab::scan::Elem<DT>::T* out,
                        unsigned long long* status, unsigned* counter, long long n) {
  using T = typename simtlab::scan::Elem<DT>::T;
  using namespace simtlab::scan;
  static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "whole warps, at most 32 of them");
  __shared__ T warp_sums[BLOCK / 32];
  __shared__ T block_prefix;
  __shared__ unsigned tile_shared;
  if (threadIdx.x == 0) tile_shared = atomicAdd(counter, 1u);
  __syncthreads();
  const unsigned tile = tile_shared;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long base = ((long long)tile * BLOCK + threadIdx.x) * ITEMS;
  const bool vec = ITEMS % 4 == 0 && base + ITEMS <= n && ((reinterpret_cast<size_t>(x) | reinterpret_cast<size_t>(out)) & 15) == 0;
  T v[ITEMS];
  const T excl = scan_thread_and_warp<DT, ITEMS>(x, base, n, vec, v, warp_sums, lane, warp);
  if (warp == 0) {
    const T w = warp_inclusive_scan(lane < BLOCK / 32 ? warp_sums[lane] : T(0), lane);
    if (lane < BLOCK / 32) warp_sums[lane] = w;
    const T total = __shfl_sync(~0u, w, BLOCK / 32 - 1);
    if (tile == 0) {
      if (lane == 0) {
        atomicExch(&status[0], pack(PREFIX, total));
        block_prefix = T(0);
      }
    } else {  // publish this tile's total, then look back 32 predecessors at a time
      if (lane == 0) atomicExch(&status[tile], pack(AGGREGATE, total));
      T before = T(0);
      for (long long last = (long long)tile - 1;; last -= 32) {
        const long long j = last - lane;  // lane 0 the nearest predecessor
        unsigned long long word = j >= 0 ? *reinterpret_cast<volatile unsigned long long*>(&status[j])
                                         : pack(PREFIX, T(0));  // (before tile 0: a prefix of nothing)
        while (__any_sync(~0u, (word >> 32) == NOT_READY)) {
          if ((word >> 32) == NOT_READY) word = *reinterpret_cast<volatile unsigned long long*>(&status[j]);
        }
        const unsigned prefixes = __ballot_sync(~0u, (word >> 32) == PREFIX);
        const int stop = prefixes ? __ffs(prefixes) - 1 : 31;  // the nearest inclusive prefix ends the walk
        T part = lane <= stop ? unpack<T>(word) : T(0);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) part += __shfl_xor_sync(~0u, part, o);
        before += part;
        if (prefixes) break;
      }
      if (lane == 0) {
        atomicExch(&status[tile], pack(PREFIX, before + total));
        block_prefix = before;
      }
    }
  }
  __syncthreads();
  add_prefix_and_store<DT, ITEMS>(out, base, n, vec, v, block_prefix + (warp > 0 ? warp_sums[warp - 1] : T(0)) + excl);
}
