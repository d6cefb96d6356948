// Rung 4 - 128-bit accesses: each thread reads four consecutive floats of an
// input row with one LDG.128 and writes four consecutive floats of an output
// row with one STG.128, gathering them from a tile column. 32x32 tile, 8x32
// threads, padded rows (stride 33: with the four-element offsets the tile
// reads and writes still hit 32 different banks). A quarter of the memory
// instructions of rung 3. VEC=false (rows or columns not a multiple of 4, or
// unaligned rows) moves the same elements one at a time, bounds-checked.
template <int TILE, bool VEC>
__global__ void __launch_bounds__(TILE * TILE / 4)
transpose_vectorized(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  __shared__ float tile[TILE][TILE + 1];
  const int bx = blockIdx.x * TILE, by = blockIdx.y * TILE;
  const int tx = threadIdx.x % (TILE / 4), ty = threadIdx.x / (TILE / 4);  // 4-wide column group, row
  {
    const int r = by + ty, c = bx + 4 * tx;
    if (VEC) {
      if (r < rows && c < cols) {
        const float4 v = __ldg(reinterpret_cast<const float4*>(in + (size_t)r * cols + c));
        tile[ty][4 * tx + 0] = v.x;
        tile[ty][4 * tx + 1] = v.y;
        tile[ty][4 * tx + 2] = v.z;
        tile[ty][4 * tx + 3] = v.w;
      }
    } else if (r < rows) {
#pragma unroll
      for (int k = 0; k < 4; ++k)
        if (c + k < cols) tile[ty][4 * tx + k] = in[(size_t)r * cols + c + k];
    }
  }
  __syncthreads();
  const int r = bx + ty, c = by + 4 * tx;  // output row (an input column) and its first output column
  if (r >= cols) return;
  if (VEC) {
    if (c < rows)
      *reinterpret_cast<float4*>(out + (size_t)r * rows + c) =
          make_float4(tile[4 * tx + 0][ty], tile[4 * tx + 1][ty], tile[4 * tx + 2][ty], tile[4 * tx + 3][ty]);
  } else {
#pragma unroll
    for (int k = 0; k < 4; ++k)
      if (c + k < rows) out[(size_t)r * rows + c + k] = tile[4 * tx + k][ty];
  }
}
