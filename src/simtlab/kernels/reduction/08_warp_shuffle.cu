// Rung 8 - warp shuffles: each warp reduces its 32 values in registers with
// __shfl_down_sync (5 steps, no shared memory, no barrier); only one value
// per warp goes through shared memory, and warp 0 finishes with shuffles
// again. One __syncthreads per block instead of log2(BLOCK).
#include "simtlab_reduce.cuh"

template <int BLOCK, int OP>
__global__ void __launch_bounds__(BLOCK)
reduce_warp_shuffle(const float* __restrict__ in, float* __restrict__ out, long long n) {
  using R = simtlab::Reduce<OP>;
  __shared__ float warp_vals[BLOCK / 32];
  const long long stride = (long long)gridDim.x * BLOCK;
  float v = R::identity();
  for (long long i = (long long)blockIdx.x * BLOCK + threadIdx.x; i < n; i += stride) v = R::apply(v, in[i]);
  v = simtlab::block_reduce<BLOCK, OP>(v, warp_vals);  // shuffles in each warp, then in warp 0
  if (threadIdx.x == 0) out[blockIdx.x] = v;
}
