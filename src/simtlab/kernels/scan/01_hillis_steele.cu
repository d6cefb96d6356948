// Rung 1 - Hillis-Steele: a block scans its BLOCK elements in shared memory in log2(BLOCK) steps,
// each thread adding the element `offset` places back (double-buffered, a barrier a step). A
// second launch adds each tile's carry: the tiles' totals, scanned by the same kernel. Simple
// and parallel, but n log2(BLOCK) adds and log2(BLOCK) barriers a tile: the baseline.
#include "simtlab_scan.cuh"

template <int DT, int BLOCK, int ITEMS>
__global__ void __launch_bounds__(BLOCK)
scan_hillis_steele(const typename simtlab::scan::Elem<DT>::T* __restrict__ x, typename simtlab::scan::Elem<DT>::T* out,
                   typename simtlab::scan::Elem<DT>::T* sums, const typename simtlab::scan::Elem<DT>::T* carry,
                   long long n, int phase) {
  using T = typename simtlab::scan::Elem<DT>::T;
  static_assert(ITEMS == 1, "one element a thread");
  if (phase == 1) {
    simtlab::scan::add_carry(out, carry, n, BLOCK);
    return;
  }
  __shared__ T buf[2][BLOCK];
  const int t = threadIdx.x;
  const long long i = (long long)blockIdx.x * BLOCK + t;
  buf[0][t] = i < n ? x[i] : T(0);
  __syncthreads();
  int cur = 0;
  for (int offset = 1; offset < BLOCK; offset *= 2) {
    const T v = buf[cur][t];
    buf[cur ^ 1][t] = t >= offset ? v + buf[cur][t - offset] : v;
    cur ^= 1;
    __syncthreads();
  }
  if (i < n) out[i] = buf[cur][t];
  if (sums != nullptr && t == BLOCK - 1) sums[blockIdx.x] = buf[cur][t];
}
