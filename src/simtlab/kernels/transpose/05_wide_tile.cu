// Rung 5 - more bytes in flight per thread: a TILE x TILE tile (64x64 by
// default) moved by THREADS threads, each issuing TILE*TILE/(4*THREADS)
// independent LDG.128 before its first shared store, and writing 256-byte
// output row segments. Rung 4 keeps one 16-byte load per thread in flight; at
// H200 bandwidth and latency that is too little to cover the DRAM pipe, so the
// wider tile should close most of the gap to the device copy.
// Lanes map to 4 rows x 8 float4 (128 bytes per row) so both shared phases are
// conflict-free with a one-float pad: bank = (row + 4*c4 + k) mod 32 takes 32
// distinct values across a warp. VEC=false moves single elements (rows or
// columns not a multiple of 4, or unaligned rows), bounds-checked.
template <int TILE, int THREADS, bool VEC>
__global__ void __launch_bounds__(THREADS)
transpose_wide_tile(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  static_assert(TILE % 32 == 0, "TILE must be a multiple of 32 (one warp covers 8 float4 of 4 rows)");
  static_assert((TILE * TILE / 4) % THREADS == 0 && THREADS % 32 == 0, "THREADS must divide the tile's float4 count");
  constexpr int SEGS = TILE / 32;                     // 128-byte segments per tile row
  constexpr int PER = TILE * TILE / (4 * THREADS);    // float4 per thread
  __shared__ float tile[TILE][TILE + 1];
  const int bx = blockIdx.x * TILE, by = blockIdx.y * TILE;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

  // (row, first column) inside the tile of this thread's j-th float4
  auto slot = [&](int j, int& r, int& c) {
    const int w = warp + j * (THREADS / 32);
    r = (w / SEGS) * 4 + lane / 8;
    c = ((w % SEGS) * 8 + lane % 8) * 4;
  };

  float4 v[PER];
#pragma unroll
  for (int j = 0; j < PER; ++j) {  // every load issued before the first shared store
    int r, c;
    slot(j, r, c);
    const int gr = by + r, gc = bx + c;
    if (VEC) {
      v[j] = (gr < rows && gc < cols) ? __ldg(reinterpret_cast<const float4*>(in + (size_t)gr * cols + gc))
                                      : make_float4(0.f, 0.f, 0.f, 0.f);
    } else {
      const float* p = in + (size_t)gr * cols + gc;
      const bool row_ok = gr < rows;
      v[j].x = (row_ok && gc + 0 < cols) ? __ldg(p + 0) : 0.f;
      v[j].y = (row_ok && gc + 1 < cols) ? __ldg(p + 1) : 0.f;
      v[j].z = (row_ok && gc + 2 < cols) ? __ldg(p + 2) : 0.f;
      v[j].w = (row_ok && gc + 3 < cols) ? __ldg(p + 3) : 0.f;
    }
  }
#pragma unroll
  for (int j = 0; j < PER; ++j) {
    int r, c;
    slot(j, r, c);
    tile[r][c + 0] = v[j].x;
    tile[r][c + 1] = v[j].y;
    tile[r][c + 2] = v[j].z;
    tile[r][c + 3] = v[j].w;
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < PER; ++j) {
    int r, c;
    slot(j, r, c);  // r: output row inside the tile (an input column), c: its first output column
    const int gr = bx + r, gc = by + c;
    if (gr >= cols) continue;
    float* p = out + (size_t)gr * rows + gc;
    if (VEC) {
      if (gc < rows) *reinterpret_cast<float4*>(p) = make_float4(tile[c][r], tile[c + 1][r], tile[c + 2][r], tile[c + 3][r]);
    } else {
#pragma unroll
      for (int k = 0; k < 4; ++k)
        if (gc + k < rows) p[k] = tile[c + k][r];
    }
  }
}
