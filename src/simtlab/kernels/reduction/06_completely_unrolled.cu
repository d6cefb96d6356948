// Rung 6 - completely unrolled with templates: the loop bound is the template
// constant BLOCK instead of blockDim.x, so every step of the tree is unrolled:
// no loop counter, no comparisons of the stride, and steps larger than the
// block vanish at compile time. Same memory traffic as rung 5, fewer instructions.
#include "simtlab_reduce.cuh"

template <int BLOCK, int OP>
__global__ void __launch_bounds__(BLOCK)
reduce_completely_unrolled(const float* __restrict__ in, float* __restrict__ out, long long n) {
  static_assert(BLOCK >= 64 && (BLOCK & (BLOCK - 1)) == 0, "a power of two of at least 64 threads");
  using R = simtlab::Reduce<OP>;
  __shared__ float s[BLOCK];
  const int tid = threadIdx.x;
  const long long i = (long long)blockIdx.x * (2 * BLOCK) + tid;
  float v = i < n ? in[i] : R::identity();
  if (i + BLOCK < n) v = R::apply(v, in[i + BLOCK]);
  s[tid] = v;
  __syncthreads();
#pragma unroll
  for (int stride = BLOCK / 2; stride > 32; stride >>= 1) {
    if (tid < stride) s[tid] = R::apply(s[tid], s[tid + stride]);
    __syncthreads();
  }
  if (tid < 32) {
    v = simtlab::warp_tail<OP>(s, tid);
    if (tid == 0) out[blockIdx.x] = v;
  }
}
