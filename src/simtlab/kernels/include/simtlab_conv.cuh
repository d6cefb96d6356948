// The register patch of the conv2d rungs 5-7: a thread's TY x TX outputs from a shared tile
// (rows of TW floats), each window row read once as aligned LDS.128 chunks and added into every
// output row it touches (filter row dy = input row - output row), the taps from constant memory
// (c_filter, rungs 5-7) or from shared memory where a call passes the filter (rung 8).
#pragma once
#include "simtlab_async.cuh"

__constant__ float c_filter[15 * 15];  // the filter, (2R+1)^2 taps row by row; set by the host

namespace simtlab {

// Where a thread's window sits in a tile whose left halo is rounded up to 16 bytes: PAD halo
// columns each side; the window starts SKIP floats (whole chunks) after the thread's first column,
// OFF floats into that chunk, and spans NC LDS.128 chunks a row.
template <int R, int TX>
struct ConvWindow {
  static constexpr int PAD = 4 * ((R + 3) / 4);
  static constexpr int SKIP = (PAD - R) / 4 * 4;
  static constexpr int OFF = (PAD - R) % 4;
  static constexpr int NC = (OFF + TX + 2 * R + 3) / 4;
  static_assert(TX % 4 == 0 && SKIP + 4 * NC <= 2 * PAD + TX, "a window's chunks stay inside the tile row");
};

// tile: the thread's first chunk (the window starts OFF floats into it); NC chunks per row; taps:
// the filter row by row (every thread reads the same tap at once: a broadcast).
template <int TX, int TY, int R, int TW, int OFF, int NC>
__device__ __forceinline__ void conv_patch(const float* tile, float (&acc)[TY][TX], const float* taps) {
  constexpr int D = 2 * R + 1;
#pragma unroll
  for (int j = 0; j < TY; ++j)
#pragma unroll
    for (int k = 0; k < TX; ++k) acc[j][k] = 0.0f;
#pragma unroll
  for (int r = 0; r < TY + 2 * R; ++r) {  // input row r of the patch's window
    float v[4 * NC];
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      const float4 q = *reinterpret_cast<const float4*>(tile + r * TW + 4 * c);
      v[4 * c] = q.x;
      v[4 * c + 1] = q.y;
      v[4 * c + 2] = q.z;
      v[4 * c + 3] = q.w;
    }
#pragma unroll
    for (int j = 0; j < TY; ++j) {  // output rows this input row feeds: filter row dy = r - j
      const int dy = r - j;
      if (dy < 0 || dy >= D) continue;  // resolved at compile time
#pragma unroll
      for (int dx = 0; dx < D; ++dx) {
        const float f = taps[dy * D + dx];
#pragma unroll
        for (int k = 0; k < TX; ++k) acc[j][k] = fmaf(v[OFF + k + dx], f, acc[j][k]);
      }
    }
  }
}

// The patch's rows ybase.. at columns x.. (x < W): float4 stores where the row allows them.
template <int TX, int TY>
__device__ __forceinline__ void conv_store(float* out, const float (&acc)[TY][TX], int x, int ybase, int H, int W,
                                           bool vec_out) {
#pragma unroll
  for (int j = 0; j < TY; ++j) {
    const int y = ybase + j;
    if (y >= H) break;
    float* o = out + (size_t)y * W + x;
    if (vec_out) {
#pragma unroll
      for (int k = 0; k < TX; k += 4)
        *reinterpret_cast<float4*>(o + k) = make_float4(acc[j][k], acc[j][k + 1], acc[j][k + 2], acc[j][k + 3]);
    } else {
#pragma unroll
      for (int k = 0; k < TX; ++k)
        if (x + k < W) o[k] = acc[j][k];
    }
  }
}

// Rung 6's walk (rung 8's too): a block's NT tiles down its column strip, tile t+1 copied by
// cp.async into the other half of a double-buffered tile while tile t computes, one barrier a tile
// (the first one also publishes whatever the caller staged in shared memory before it: rung 8's taps).
template <int BX, int BY, int TX, int TY, int R, int NT>
__device__ __forceinline__ void conv_pipelined(const float* __restrict__ in, float* __restrict__ out, int H, int W,
                                               const float* taps) {
  using G = ConvWindow<R, TX>;
  constexpr int TW = BX * TX + 2 * G::PAD;  // floats per tile row (a multiple of 4)
  constexpr int TWV = TW / 4;
  constexpr int ROWS = BY * TY;             // output rows per tile
  constexpr int TH = ROWS + 2 * R;
  constexpr int STAGE = TH * TW;
  extern __shared__ float4 smem4[];
  float* tiles = reinterpret_cast<float*>(smem4);

  const int tid = threadIdx.y * BX + threadIdx.x;
  const int strip = blockIdx.x * BX * TX;   // first output column of the block
  const int xa = strip - G::PAD;            // tile column 0, in image columns
  const int row0 = blockIdx.y * NT * ROWS;  // first output row of the block
  const int ntiles = min(NT, (H - row0 + ROWS - 1) / ROWS);
  const bool vec = (W % 4 == 0) && (reinterpret_cast<size_t>(in) % 16 == 0);

  auto fill = [&](int t) {  // tile t (output rows row0 + t*ROWS ...) into stage t & 1
    float* dst = tiles + (t & 1) * STAGE;
    const int gy0 = row0 + t * ROWS - R;
    if (vec) {
      for (int i = tid; i < TH * TWV; i += BX * BY) {
        const int ty = i / TWV, c = i - ty * TWV, gy = gy0 + ty, gx = xa + 4 * c;
        const bool in_img = gy >= 0 && gy < H && gx >= 0 && gx < W;
        cp_async16(dst + ty * TW + 4 * c, in_img ? in + (size_t)gy * W + gx : in, in_img);
      }
    } else {
      for (int i = tid; i < TH * TW; i += BX * BY) {
        const int ty = i / TW, c = i - ty * TW, gy = gy0 + ty, gx = xa + c;
        const bool in_img = gy >= 0 && gy < H && gx >= 0 && gx < W;
        cp_async4(dst + i, in_img ? in + (size_t)gy * W + gx : in, in_img);
      }
    }
    cp_async_commit();
  };

  const int x = strip + threadIdx.x * TX;
  const bool vec_out = x + TX <= W && W % 4 == 0 && reinterpret_cast<size_t>(out) % 16 == 0;
  fill(0);
  for (int t = 0; t < ntiles; ++t) {
    cp_async_wait<0>();  // tile t (issued a whole tile of compute ago) is in, for this thread
    __syncthreads();              // ... and every thread's; and all are done with tile t-1's stage
    if (t + 1 < ntiles) fill(t + 1);  // into tile t-1's stage: lands while tile t computes
    const float* tile = tiles + (t & 1) * STAGE + threadIdx.y * TY * TW + threadIdx.x * TX + G::SKIP;
    float acc[TY][TX];
    conv_patch<TX, TY, R, TW, G::OFF, G::NC>(tile, acc, taps);
    const int ybase = row0 + t * ROWS + threadIdx.y * TY;
    if (x < W) conv_store<TX, TY>(out, acc, x, ybase, H, W, vec_out);
  }
}

}  // namespace simtlab
