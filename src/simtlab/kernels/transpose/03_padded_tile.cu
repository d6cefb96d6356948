// Rung 3 - padded tile [32][33]: one extra float per row shifts each row by
// one bank, so the 32 words of a tile column fall in 32 different banks. Same
// instructions as rung 2; the column reads go from 32 wavefronts to 1.
template <int TILE, int ROWS>
__global__ void __launch_bounds__(TILE * ROWS)
transpose_padded_tile(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  __shared__ float tile[TILE][TILE + 1];
  const int bx = blockIdx.x * TILE, by = blockIdx.y * TILE;
  const int tx = threadIdx.x, ty = threadIdx.y;
#pragma unroll
  for (int j = 0; j < TILE; j += ROWS) {
    const int r = by + ty + j, c = bx + tx;
    if (r < rows && c < cols) tile[ty + j][tx] = in[(size_t)r * cols + c];
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < TILE; j += ROWS) {
    const int r = bx + ty + j, c = by + tx;
    if (r < cols && c < rows) out[(size_t)r * rows + c] = tile[tx][ty + j];
  }
}
