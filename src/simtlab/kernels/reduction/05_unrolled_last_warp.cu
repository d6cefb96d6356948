// Rung 5 - unrolled last warp: when 32 or fewer threads remain, they are one
// warp, which needs no block-wide barrier: the last six steps run inside
// warp 0 with __syncwarp() (cheap) instead of __syncthreads() and without
// the loop's index test. Saves six block barriers per block.
#include "simtlab_reduce.cuh"

template <int BLOCK, int OP>
__global__ void __launch_bounds__(BLOCK)
reduce_unrolled_last_warp(const float* __restrict__ in, float* __restrict__ out, long long n) {
  static_assert(BLOCK >= 64, "the warp tail reads 64 values");
  using R = simtlab::Reduce<OP>;
  __shared__ float s[BLOCK];
  const int tid = threadIdx.x;
  const long long i = (long long)blockIdx.x * (2 * BLOCK) + tid;
  float v = i < n ? in[i] : R::identity();
  if (i + BLOCK < n) v = R::apply(v, in[i + BLOCK]);
  s[tid] = v;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 32; stride >>= 1) {
    if (tid < stride) s[tid] = R::apply(s[tid], s[tid + stride]);
    __syncthreads();
  }
  if (tid < 32) {
    v = simtlab::warp_tail<OP>(s, tid);
    if (tid == 0) out[blockIdx.x] = v;
  }
}
