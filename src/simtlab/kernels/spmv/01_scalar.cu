// Rung 1 - CSR, one thread a row: y = alpha * A x + beta * y. The baseline every GPU SpMV
// starts from. A thread walks its row's nonzeros alone, so a warp's loads of vals and cols are
// 32 rows apart (a sector each, uncoalesced), and a warp waits for its longest row: short
// rows leave lanes idle, one long row stalls 31 others. x is gathered through the read-only
// cache. y is read only where beta != 0 (as BLAS does: a poisoned y must not leak in).
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) spmv_scalar(int n, const int* __restrict__ row_ptr,
                                                     const int* __restrict__ cols, const float* __restrict__ vals,
                                                     const float* __restrict__ x, float alpha, float beta,
                                                     float* __restrict__ y) {
  const int r = blockIdx.x * BLOCK + threadIdx.x;
  if (r >= n) return;
  float sum = 0.0f;
  for (int k = row_ptr[r], end = row_ptr[r + 1]; k < end; ++k) sum += vals[k] * __ldg(x + cols[k]);
  y[r] = alpha * sum + (beta != 0.0f ? beta * y[r] : 0.0f);
}
