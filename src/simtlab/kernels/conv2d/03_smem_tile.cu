// Rung 3 - shared-memory input tile with halo: the block loads its BX x BY
// outputs' input window, (BY+2R) x (BX+2R) pixels with zeros outside the image,
// cooperatively and once; every tap then comes from shared memory. Global
// loads per output drop from (2R+1)^2 to about (1+2R/BX)(1+2R/BY), and with the
// radius a template argument the tap loops unroll, their bounds checks gone
// (the halo already holds the zeros).
__constant__ float c_filter[15 * 15];

template <int BX, int BY, int R>
__global__ void __launch_bounds__(BX * BY)
conv2d_smem_tile(const float* __restrict__ in, float* __restrict__ out, int H, int W) {
  constexpr int D = 2 * R + 1, TW = BX + 2 * R, TH = BY + 2 * R;
  __shared__ float tile[TH][TW];
  const int x0 = blockIdx.x * BX - R, y0 = blockIdx.y * BY - R;
  for (int i = threadIdx.y * BX + threadIdx.x; i < TH * TW; i += BX * BY) {
    const int ty = i / TW, tx = i % TW, gy = y0 + ty, gx = x0 + tx;
    tile[ty][tx] = (gy >= 0 && gy < H && gx >= 0 && gx < W) ? in[(size_t)gy * W + gx] : 0.0f;
  }
  __syncthreads();
  const int x = blockIdx.x * BX + threadIdx.x, y = blockIdx.y * BY + threadIdx.y;
  if (x >= W || y >= H) return;
  float acc = 0.0f;
#pragma unroll
  for (int dy = 0; dy < D; ++dy)
#pragma unroll
    for (int dx = 0; dx < D; ++dx) acc = fmaf(tile[threadIdx.y + dy][threadIdx.x + dx], c_filter[dy * D + dx], acc);
  out[(size_t)y * W + x] = acc;
}
