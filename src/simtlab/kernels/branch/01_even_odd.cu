// Rung 1 - even/odd branch: y[i] = p_even(x[i]) for even i, p_odd(x[i]) for odd
// i, each a DEGREE-term polynomial (Horner, DEGREE FMAs). Neighbouring lanes
// take different sides of the branch, so every warp runs both loops one after
// the other with half its lanes masked off: the divergent kernel does twice the
// arithmetic it needs (compute-bound at DEGREE = 64, so it shows in the time).
template <int BLOCK, int DEGREE>
__global__ void __launch_bounds__(BLOCK)
branch_even_odd(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ coef, long long n) {
  const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  float acc;
  if (i & 1) {
    const float* c = coef + DEGREE;  // odd polynomial
    acc = c[DEGREE - 1];
#pragma unroll
    for (int k = DEGREE - 2; k >= 0; --k) acc = fmaf(acc, v, c[k]);
  } else {
    const float* c = coef;  // even polynomial
    acc = c[DEGREE - 1];
#pragma unroll
    for (int k = DEGREE - 2; k >= 0; --k) acc = fmaf(acc, v, c[k]);
  }
  y[i] = acc;
}
