// Rung 2 - branch-free: the two sides differ only in their coefficients, so
// select the data, not the code: each lane points at its parity's coefficient
// set in shared memory (the same layout as rung 1) and every lane runs the same
// single Horner loop. No divergence, half the instructions of rung 1; a warp's
// coefficient loads now touch two addresses, which the one-chunk offset
// between the sets keeps in different banks (one wavefront, like a broadcast).
template <int BLOCK, int DEGREE>
__global__ void __launch_bounds__(BLOCK)
branch_free(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ coef, long long n) {
  constexpr int ODD = DEGREE + 4;
  __shared__ __align__(16) float c[ODD + DEGREE];
  for (int k = threadIdx.x; k < DEGREE; k += BLOCK) {
    c[k] = coef[k];
    c[ODD + k] = coef[DEGREE + k];
  }
  __syncthreads();
  const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  const float* cc = c + (i & 1) * ODD;
  float acc = cc[DEGREE - 1];
#pragma unroll
  for (int k = DEGREE - 2; k >= 0; --k) acc = fmaf(acc, v, cc[k]);
  y[i] = acc;
}
