// Rung 2 - shared-memory tile: a 32x32 tile is read row-wise (coalesced) into
// shared memory and written out row-wise too (coalesced), the transposition
// happening in shared memory. But the write phase reads a COLUMN of the tile:
// 32 words 32 floats apart, all in one bank - a 32-way bank conflict.
template <int TILE, int ROWS>
__global__ void __launch_bounds__(TILE * ROWS)
transpose_shared_tile(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  __shared__ float tile[TILE][TILE];
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
    const int r = bx + ty + j, c = by + tx;  // output row r (an input column), output column c
    if (r < cols && c < rows) out[(size_t)r * rows + c] = tile[tx][ty + j];
  }
}
