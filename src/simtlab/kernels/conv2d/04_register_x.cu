// Rung 4 - four outputs per thread along x, reusing registers: for each filter
// row a thread reads its 4+2R input window from shared memory once (as 16-byte
// LDS.128 chunks) and feeds 4(2R+1) FMAs from registers, instead of one shared
// load per FMA as in rung 3; it stores its four outputs with one STG.128 where
// the row allows. The block covers (4*BX) x BY outputs; the tile rows are
// padded to a multiple of four floats so every window chunk is aligned.
__constant__ float c_filter[15 * 15];

template <int BX, int BY, int R>
__global__ void __launch_bounds__(BX * BY)
conv2d_register_x(const float* __restrict__ in, float* __restrict__ out, int H, int W) {
  constexpr int TX = 4, D = 2 * R + 1;
  constexpr int NC = (TX + 2 * R + 3) / 4;        // float4 chunks per window row
  constexpr int TW = BX * TX + 4 * NC;            // covers every chunk a thread reads (>= BX*TX + 2R)
  constexpr int TH = BY + 2 * R;
  __shared__ __align__(16) float tile[TH][TW];
  const int x0 = blockIdx.x * BX * TX - R, y0 = blockIdx.y * BY - R;
  for (int i = threadIdx.y * BX + threadIdx.x; i < TH * TW; i += BX * BY) {
    const int ty = i / TW, tx = i % TW, gy = y0 + ty, gx = x0 + tx;
    tile[ty][tx] = (gy >= 0 && gy < H && gx >= 0 && gx < W) ? in[(size_t)gy * W + gx] : 0.0f;
  }
  __syncthreads();
  const int x = blockIdx.x * BX * TX + threadIdx.x * TX, y = blockIdx.y * BY + threadIdx.y;
  if (x >= W || y >= H) return;
  float acc[TX] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int dy = 0; dy < D; ++dy) {
    float v[4 * NC];
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      const float4 q = *reinterpret_cast<const float4*>(&tile[threadIdx.y + dy][threadIdx.x * TX + 4 * c]);
      v[4 * c] = q.x;
      v[4 * c + 1] = q.y;
      v[4 * c + 2] = q.z;
      v[4 * c + 3] = q.w;
    }
#pragma unroll
    for (int dx = 0; dx < D; ++dx) {
      const float f = c_filter[dy * D + dx];
#pragma unroll
      for (int j = 0; j < TX; ++j) acc[j] = fmaf(v[j + dx], f, acc[j]);
    }
  }
  float* o = out + (size_t)y * W + x;
  if (x + TX <= W && W % 4 == 0 && reinterpret_cast<size_t>(out) % 16 == 0) {
    *reinterpret_cast<float4*>(o) = make_float4(acc[0], acc[1], acc[2], acc[3]);
  } else {
#pragma unroll
    for (int j = 0; j < TX; ++j)
      if (x + j < W) o[j] = acc[j];
  }
}
