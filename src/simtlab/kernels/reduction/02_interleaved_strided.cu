// Rung 2 - interleaved addressing, strided index: the working threads are now
// the first BLOCK/(2s) ones (index = 2*s*tid), so whole warps stay busy or idle
// together - no divergence until fewer than 32 threads work. But neighbouring
// threads touch shared words 2s apart: for s = 1 two lanes share a bank, for
// s = 16 sixteen do (bank conflicts replace divergence).
#include "simtlab_reduce.cuh"

template <int BLOCK, int OP>
__global__ void __launch_bounds__(BLOCK)
reduce_interleaved_strided(const float* __restrict__ in, float* __restrict__ out, long long n) {
  __shared__ float s[BLOCK];
  const int tid = threadIdx.x;
  const long long i = (long long)blockIdx.x * BLOCK + tid;
  s[tid] = i < n ? in[i] : simtlab::Reduce<OP>::identity();
  __syncthreads();
  for (int stride = 1; stride < (int)blockDim.x; stride *= 2) {
    const int index = 2 * stride * tid;
    if (index < (int)blockDim.x) s[index] = simtlab::Reduce<OP>::apply(s[index], s[index + stride]);
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = s[0];
}
