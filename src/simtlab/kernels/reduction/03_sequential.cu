// Rung 3 - sequential addressing: step s pairs s[tid] with s[tid + s] for
// tid < s, s halving from BLOCK/2. Active threads are contiguous (no
// divergence while s >= 32) and a warp reads 32 consecutive words (no bank
// conflicts). Still: half the threads idle from the first step on.
#include "simtlab_reduce.cuh"

template <int BLOCK, int OP>
__global__ void __launch_bounds__(BLOCK)
reduce_sequential(const float* __restrict__ in, float* __restrict__ out, long long n) {
  __shared__ float s[BLOCK];
  const int tid = threadIdx.x;
  const long long i = (long long)blockIdx.x * BLOCK + tid;
  s[tid] = i < n ? in[i] : simtlab::Reduce<OP>::identity();
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (tid < stride) s[tid] = simtlab::Reduce<OP>::apply(s[tid], s[tid + stride]);
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = s[0];
}
