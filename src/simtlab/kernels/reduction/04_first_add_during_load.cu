// Rung 4 - first add during the load: each block covers 2*BLOCK elements and
// every thread adds two of them on the way into shared memory, so no thread
// idles in the first step and half as many blocks are launched.
#include "simtlab_reduce.cuh"

template <int BLOCK, int OP>
__global__ void __launch_bounds__(BLOCK)
reduce_first_add(const float* __restrict__ in, float* __restrict__ out, long long n) {
  using R = simtlab::Reduce<OP>;
  __shared__ float s[BLOCK];
  const int tid = threadIdx.x;
  const long long i = (long long)blockIdx.x * (2 * BLOCK) + tid;
  float v = i < n ? in[i] : R::identity();
  if (i + BLOCK < n) v = R::apply(v, in[i + BLOCK]);
  s[tid] = v;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (tid < stride) s[tid] = R::apply(s[tid], s[tid + stride]);
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = s[0];
}
