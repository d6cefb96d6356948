// Rung 9 - vectorized, single pass: rung 8 with 128-bit loads (four elements
// per LDG.128, a scalar tail for n % 4) and no second launch: each block
// writes its partial, and the last block to finish (an atomic ticket after a
// __threadfence) reduces the partials in index order - deterministic, the
// same result on every run - and resets the ticket for the next launch.
// VEC=false (input not 16-byte aligned) loads scalars.
#include "simtlab_reduce.cuh"

template <int BLOCK, int OP, bool VEC>
__global__ void __launch_bounds__(BLOCK)
reduce_vectorized_single_pass(const float* __restrict__ in, float* __restrict__ partials,
                              unsigned* __restrict__ ticket, float* __restrict__ out, long long n) {
  using R = simtlab::Reduce<OP>;
  __shared__ float warp_vals[BLOCK / 32];
  __shared__ bool last_block;
  const int tid = threadIdx.x;
  const long long stride = (long long)gridDim.x * BLOCK;
  const long long first = (long long)blockIdx.x * BLOCK + tid;
  float v = R::identity();
  long long done = 0;
  if (VEC) {
    const long long groups = n / 4;
    const float4* in4 = reinterpret_cast<const float4*>(in);
    for (long long q = first; q < groups; q += stride) {
      const float4 a = __ldg(in4 + q);
      v = R::apply(v, R::apply(R::apply(a.x, a.y), R::apply(a.z, a.w)));
    }
    done = 4 * groups;
  }
  for (long long i = done + first; i < n; i += stride) v = R::apply(v, in[i]);
  v = simtlab::block_reduce<BLOCK, OP>(v, warp_vals);
  if (tid == 0) {
    partials[blockIdx.x] = v;
    __threadfence();  // the partial is visible device-wide before the ticket counts it
    last_block = atomicAdd(ticket, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last_block) return;
  float w = R::identity();
  for (int i = tid; i < (int)gridDim.x; i += BLOCK) w = R::apply(w, __ldcg(partials + i));  // L2, not a stale L1
  w = simtlab::block_reduce<BLOCK, OP>(w, warp_vals);
  if (tid == 0) {
    out[0] = w;
    *ticket = 0u;
  }
}
