// Rung 1 - even/odd branch: y[i] = p_even(x[i]) for even i, p_odd(x[i]) for odd
// i, each a DEGREE-term polynomial (Horner, DEGREE FMAs) with its coefficients
// staged once per block in shared memory (even set at 0, odd set one 16-byte
// chunk past the end of it, so the two sets sit in different banks).
// Neighbouring lanes take different sides of the branch, so every warp runs
// both loops one after the other with half its lanes masked off: the divergent
// kernel issues twice the instructions it needs, and with the operands in
// shared memory and registers nothing else hides that.
template <int BLOCK, int DEGREE>
__global__ void __launch_bounds__(BLOCK)
branch_even_odd(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ coef, long long n) {
  constexpr int ODD = DEGREE + 4;  // offset of the odd coefficients in shared memory
  __shared__ __align__(16) float c[ODD + DEGREE];
  for (int k = threadIdx.x; k < DEGREE; k += BLOCK) {
    c[k] = coef[k];
    c[ODD + k] = coef[DEGREE + k];
  }
  __syncthreads();
  const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  float acc;
  if (i & 1) {
    acc = c[ODD + DEGREE - 1];
#pragma unroll
    for (int k = DEGREE - 2; k >= 0; --k) acc = fmaf(acc, v, c[ODD + k]);
  } else {
    acc = c[DEGREE - 1];
#pragma unroll
    for (int k = DEGREE - 2; k >= 0; --k) acc = fmaf(acc, v, c[k]);
  }
  y[i] = acc;
}
