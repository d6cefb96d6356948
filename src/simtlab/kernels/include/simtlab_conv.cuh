// The register patch of the conv2d rungs 5-7: a thread's TY x TX outputs from a shared tile
// (rows of TW floats), each window row read once as aligned LDS.128 chunks and added into every
// output row it touches (filter row dy = input row - output row), the taps from constant memory.
#pragma once

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

// tile: the thread's first chunk (the window starts OFF floats into it); NC chunks per row.
template <int TX, int TY, int R, int TW, int OFF, int NC>
__device__ __forceinline__ void conv_patch(const float* tile, float (&acc)[TY][TX]) {
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
        const float f = c_filter[dy * D + dx];
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

}  // namespace simtlab
