// The transpose ladder's ceiling (a reference, not a rung): a plain copy with
// exactly the transposes' access shape - 32x32 tiles, 32x8 threads, four rows
// per thread, coalesced reads and writes - so the gap between a transpose and
// this kernel is what the transposition itself costs.
template <int TILE, int ROWS>
__global__ void __launch_bounds__(TILE * ROWS)
tile_copy(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  const int c = blockIdx.x * TILE + threadIdx.x;
  const int r0 = blockIdx.y * TILE + threadIdx.y;
  if (c >= cols) return;
#pragma unroll
  for (int j = 0; j < TILE; j += ROWS) {
    const int r = r0 + j;
    if (r < rows) out[(size_t)r * cols + c] = in[(size_t)r * cols + c];
  }
}
