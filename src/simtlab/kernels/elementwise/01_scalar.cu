// Rung 1 - scalar: z[i] = x[i] + y[i], one thread per element, one 4-byte load
// per operand. Coalesced (a warp touches 128 consecutive bytes per array), but
// every thread carries full index arithmetic for a single element and keeps
// only two loads in flight. The baseline for memory-bound kernels.
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK)
vadd_scalar(const float* __restrict__ x, const float* __restrict__ y, float* __restrict__ z, long long n) {
  const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) z[i] = x[i] + y[i];
}
