// Rung 4 - reduce then scan: the first launch only sums each tile (ITEMS elements a thread, a
// warp reduction by shuffles; nothing written but the totals), the totals are scanned, and the
// second launch scans each tile as rung 3 does with its carry already added. The data is read
// twice and written once - 12 bytes an element instead of rung 3's 16.
#include "scan/03_warp_shuffle.cu"

template <int DT, int BLOCK, int ITEMS>
__global__ void __launch_bounds__(BLOCK)
scan_reduce_then_scan(const typename simtlab::scan::Elem<DT>::T* __restrict__ x, typename simtlab::scan::Elem<DT>::T* out,
                      typename simtlab::scan::Elem<DT>::T* sums, const typename simtlab::scan::Elem<DT>::T* carry,
                      long long n, int phase) {
  using T = typename simtlab::scan::Elem<DT>::T;
  using V = typename simtlab::scan::Elem<DT>::V;
  if (phase == 0) {  // the scan, with the tiles before this one already summed into carry
    const T carry_in = carry != nullptr && blockIdx.x > 0 ? carry[blockIdx.x - 1] : T(0);
    simtlab::scan::tile_scan<DT, BLOCK, ITEMS>(x, out, n, carry_in);
    return;
  }
  // phase 2: the tile's total only
  __shared__ T warp_sums[BLOCK / 32];
  const long long base = ((long long)blockIdx.x * BLOCK + threadIdx.x) * ITEMS;
  T sum = T(0);
  if (ITEMS % 4 == 0 && base + ITEMS <= n && (reinterpret_cast<size_t>(x) & 15) == 0) {
#pragma unroll
    for (int q = 0; q < ITEMS / 4; ++q) {
      const V w = reinterpret_cast<const V*>(x + base)[q];
      sum += (w.x + w.y) + (w.z + w.w);
    }
  } else {
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) sum += base + j < n ? x[base + j] : T(0);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(~0u, sum, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_sums[warp] = sum;
  __syncthreads();
  if (warp == 0) {
    T w = lane < BLOCK / 32 ? warp_sums[lane] : T(0);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) w += __shfl_xor_sync(~0u, w, o);
    if (lane == 0) sums[blockIdx.x] = w;
  }
}
