// Rung 2 - branch-free: the two sides differ only in their coefficients, so
// select the data, not the code: each lane points at its parity's coefficient
// set and every lane runs the same single Horner loop. No divergence, half the
// FMAs of rung 1; the loads of the coefficients become two addresses per warp.
template <int BLOCK, int DEGREE>
__global__ void __launch_bounds__(BLOCK)
branch_free(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ coef, long long n) {
  const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  const float* c = coef + (i & 1) * DEGREE;
  float acc = c[DEGREE - 1];
#pragma unroll
  for (int k = DEGREE - 2; k >= 0; --k) acc = fmaf(acc, v, c[k]);
  y[i] = acc;
}
