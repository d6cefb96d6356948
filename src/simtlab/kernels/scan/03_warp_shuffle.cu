// Rung 3 - warp shuffle: ITEMS elements a thread in registers (16-byte loads where aligned), a
// sequential scan of them, then a warp scan of the threads' totals by __shfl_up_sync (no shared
// memory, no barrier), one value a warp through shared memory and a scan of those by the first
// warp: two barriers a tile instead of one a step. The carry still takes a second launch.
#include "simtlab_scan.cuh"

namespace simtlab {
namespace scan {

// The tile's inclusive scan (plus `carry_in`) into out; returns the tile's total to thread BLOCK-1.
template <int DT, int BLOCK, int ITEMS>
__device__ __forceinline__ typename Elem<DT>::T tile_scan(const typename Elem<DT>::T* __restrict__ x,
                                                          typename Elem<DT>::T* out, long long n,
                                                          typename Elem<DT>::T carry_in) {
  using T = typename Elem<DT>::T;
  static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "whole warps, at most 32 of them");
  __shared__ T warp_sums[BLOCK / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long base = ((long long)blockIdx.x * BLOCK + threadIdx.x) * ITEMS;
  const bool vec = ITEMS % 4 == 0 && base + ITEMS <= n && ((reinterpret_cast<size_t>(x) | reinterpret_cast<size_t>(out)) & 15) == 0;
  T v[ITEMS];
  const T excl = scan_thread_and_warp<DT, ITEMS>(x, base, n, vec, v, warp_sums, lane, warp);
  if (warp == 0) {
    const T w = warp_inclusive_scan(lane < BLOCK / 32 ? warp_sums[lane] : T(0), lane);
    if (lane < BLOCK / 32) warp_sums[lane] = w;
  }
  __syncthreads();
  add_prefix_and_store<DT, ITEMS>(out, base, n, vec, v, carry_in + (warp > 0 ? warp_sums[warp - 1] : T(0)) + excl);
  return warp_sums[BLOCK / 32 - 1];
}

}  // namespace scan
}  // namespace simtlab

template <int DT, int BLOCK, int ITEMS>
__global__ void __launch_bounds__(BLOCK)
scan_warp_shuffle(const typename simtlab::scan::Elem<DT>::T* __restrict__ x, typename simtlab::scan::Elem<DT>::T* out,
                  typename simtlab::scan::Elem<DT>::T* sums, const typename simtlab::scan::Elem<DT>::T* carry,
                  long long n, int phase) {
  using T = typename simtlab::scan::Elem<DT>::T;
  if (phase == 1) {
    simtlab::scan::add_carry(out, carry, n, BLOCK * ITEMS);
    return;
  }
  const T total = simtlab::scan::tile_scan<DT, BLOCK, ITEMS>(x, out, n, T(0));
  if (sums != nullptr && threadIdx.x == 0) sums[blockIdx.x] = total;
}
