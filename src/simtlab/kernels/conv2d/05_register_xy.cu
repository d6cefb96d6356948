// Rung 5 - register blocking along y too: each thread computes a TY x 4 patch
// of outputs. Rung 4 read every window row of its four outputs from shared
// memory 2R+1 times (once per output row it feeds, across threads); here a
// thread walks the TY+2R input rows of its patch once, reads each row's
// 4+2R window as LDS.128 chunks, and adds it into every output row it touches
// (filter row dy = input row - output row). Per thread: (TY+2R)*ceil((4+2R)/4)
// shared loads for TY*4*(2R+1)^2 FMAs, each FMA's filter tap a constant-bank
// operand: the kernel turns from shared-load-bound into FMA-bound, near the
// fp32 peak. The block covers (4*BX) x (TY*BY) outputs.
#include "simtlab_conv.cuh"

template <int BX, int BY, int TY, int R>
__global__ void __launch_bounds__(BX * BY)
conv2d_register_xy(const float* __restrict__ in, float* __restrict__ out, int H, int W) {
  constexpr int TX = 4;
  constexpr int NC = (TX + 2 * R + 3) / 4;  // float4 chunks per window row
  constexpr int TW = BX * TX + 4 * NC;      // covers every chunk a thread reads (>= BX*TX + 2R)
  constexpr int TH = BY * TY + 2 * R;
  __shared__ __align__(16) float tile[TH][TW];
  const int x0 = blockIdx.x * BX * TX - R, y0 = blockIdx.y * BY * TY - R;
  for (int i = threadIdx.y * BX + threadIdx.x; i < TH * TW; i += BX * BY) {
    const int ty = i / TW, tx = i % TW, gy = y0 + ty, gx = x0 + tx;
    tile[ty][tx] = (gy >= 0 && gy < H && gx >= 0 && gx < W) ? __ldg(in + (size_t)gy * W + gx) : 0.0f;
  }
  __syncthreads();
  const int x = blockIdx.x * BX * TX + threadIdx.x * TX, ybase = blockIdx.y * BY * TY + threadIdx.y * TY;
  if (x >= W || ybase >= H) return;
  float acc[TY][TX];
  simtlab::conv_patch<TX, TY, R, TW, 0, NC>(&tile[threadIdx.y * TY][threadIdx.x * TX], acc, c_filter);
  const bool vec = x + TX <= W && W % 4 == 0 && reinterpret_cast<size_t>(out) % 16 == 0;
  simtlab::conv_store<TX, TY>(out, acc, x, ybase, H, W, vec);
}
