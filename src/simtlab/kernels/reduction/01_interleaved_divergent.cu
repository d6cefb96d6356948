// Rung 1 - interleaved addressing, divergent: each block loads BLOCK elements
// into shared memory and halves them in log2(BLOCK) steps; at step s only the
// threads with tid % (2s) == 0 add. Within every warp half the lanes, then a
// quarter, ... sit idle through the add while the others work (divergence),
// and the modulo is slow. Output: one partial per block (launched again on the
// partials until one value is left). Loops run to blockDim.x, a run-time
// value, as a generic kernel would (rung 6 makes the size a constant).
#include "simtlab_reduce.cuh"

template <int BLOCK, int OP>
__global__ void __launch_bounds__(BLOCK)
reduce_interleaved_divergent(const float* __restrict__ in, float* __restrict__ out, long long n) {
  __shared__ float s[BLOCK];
  const int tid = threadIdx.x;
  const long long i = (long long)blockIdx.x * BLOCK + tid;
  s[tid] = i < n ? in[i] : simtlab::Reduce<OP>::identity();
  __syncthreads();
  for (int stride = 1; stride < (int)blockDim.x; stride *= 2) {
    if (tid % (2 * stride) == 0) s[tid] = simtlab::Reduce<OP>::apply(s[tid], s[tid + stride]);
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = s[0];
}
