// Rung 5 - single pass with decoupled look-back: each block takes the next tile in launch order
// (an atomic counter, so a tile's predecessors are always running or done), scans it in registers
// as rung 3 does, publishes its total, and a warp reads its 32 nearest predecessors' published
// words at once - totals (keep walking) up to the nearest inclusive prefix (stop) - then publishes
// its own prefix and writes.
// Value and flag share one 64-bit word (simtlab_scan.cuh's look_back). The data is read once and
// written once: 8 bytes an element, what a copy moves.
#include "simtlab_scan.cuh"

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
  const T prefix = tile_and_warp_prefix<BLOCK>(warp_sums, block_prefix, status, tile, lane, warp);
  add_prefix_and_store<DT, ITEMS>(out, base, n, vec, v, prefix + excl);
}
