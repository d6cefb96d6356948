// Rung 7 - several elements per thread: a grid sized to fill the GPU once
// walks the whole array with a grid-stride loop, each thread folding many
// elements into a register before the (rung 6) block tree. Far fewer blocks,
// trees and partials; the loop keeps loads in flight. Brent's theorem: do the
// O(n) work sequentially per thread, the O(log n) tree once per block.
#include "simtlab_reduce.cuh"

template <int BLOCK, int OP>
__global__ void __launch_bounds__(BLOCK)
reduce_multiple_per_thread(const float* __restrict__ in, float* __restrict__ out, long long n) {
  static_assert(BLOCK >= 64 && (BLOCK & (BLOCK - 1)) == 0, "a power of two of at least 64 threads");
  using R = simtlab::Reduce<OP>;
  __shared__ float s[BLOCK];
  const int tid = threadIdx.x;
  const long long stride = (long long)gridDim.x * BLOCK;
  float v = R::identity();
  for (long long i = (long long)blockIdx.x * BLOCK + tid; i < n; i += stride) v = R::apply(v, in[i]);
  s[tid] = v;
  __syncthreads();
#pragma unroll
  for (int st = BLOCK / 2; st > 32; st >>= 1) {
    if (tid < st) s[tid] = R::apply(s[tid], s[tid + st]);
    __syncthreads();
  }
  if (tid < 32) {
    v = simtlab::warp_tail<OP>(s, tid);
    if (tid == 0) out[blockIdx.x] = v;
  }
}
