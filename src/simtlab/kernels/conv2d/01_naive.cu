// Rung 1 - naive 2D convolution: one thread per output pixel, 2D thread blocks
// over the 2D image, the (2R+1)^2 filter read from global memory next to the
// input. Neighbouring threads re-read almost the same input window and every
// thread re-reads the whole filter: (2R+1)^2 input and filter loads per output,
// served by L1/L2 rather than DRAM, so the load instructions, not the
// bandwidth, set the speed. "Same" output size, zeros outside the image.
template <int BX, int BY>
__global__ void __launch_bounds__(BX * BY)
conv2d_naive(const float* __restrict__ in, const float* __restrict__ filt, float* __restrict__ out, int H, int W,
             int R) {
  const int x = blockIdx.x * BX + threadIdx.x, y = blockIdx.y * BY + threadIdx.y;
  if (x >= W || y >= H) return;
  const int D = 2 * R + 1;
  float acc = 0.0f;
  for (int dy = -R; dy <= R; ++dy) {
    const int yy = y + dy;
    if (yy < 0 || yy >= H) continue;
    for (int dx = -R; dx <= R; ++dx) {
      const int xx = x + dx;
      if (xx < 0 || xx >= W) continue;
      acc = fmaf(in[(size_t)yy * W + xx], filt[(dy + R) * D + dx + R], acc);
    }
  }
  out[(size_t)y * W + x] = acc;
}
