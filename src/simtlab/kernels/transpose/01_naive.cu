// Rung 1 - naive: out[c][r] = in[r][c] straight from global memory. Reads are
// coalesced (threadIdx.x walks a row of the input), but the writes of a warp
// land in 32 different rows of the output, one 32-byte sector each: 8x the
// bytes of a coalesced write go over the bus.
template <int TILE, int ROWS>
__global__ void __launch_bounds__(TILE * ROWS)
transpose_naive(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  const int c = blockIdx.x * TILE + threadIdx.x;
  const int r0 = blockIdx.y * TILE + threadIdx.y;
  if (c >= cols) return;
#pragma unroll
  for (int j = 0; j < TILE; j += ROWS) {
    const int r = r0 + j;
    if (r < rows) out[(size_t)c * rows + r] = in[(size_t)r * cols + c];
  }
}
