// Rung 8 - the filter as an argument: what changed from rung 6: the taps come in as a pointer and
// each block copies them once into shared memory (every thread then reads the same tap at once: a
// broadcast, as from constant memory), and a batch of images goes through the grid's z. Rungs 2-7
// read their module's __constant__ filter, which one host copy fills: two calls with different
// filters on two streams would race for it, so a library call cannot use it.
// What it should buy: rung 6's walk with no module state - the cost is a shared load per tap where
// rung 6's FMAs read the tap straight from the constant bank.
#include "simtlab_conv.cuh"

template <int BX, int BY, int TX, int TY, int R, int NT>
__global__ void __launch_bounds__(BX * BY)
conv2d_filter_arg(const float* __restrict__ in, const float* __restrict__ filt, float* __restrict__ out, int H,
                  int W) {
  constexpr int TAPS = (2 * R + 1) * (2 * R + 1);
  __shared__ float taps[TAPS];
  for (int i = threadIdx.y * BX + threadIdx.x; i < TAPS; i += BX * BY) taps[i] = __ldg(filt + i);
  // (the walk's first barrier publishes them before any tile computes)
  const size_t image = (size_t)blockIdx.z * H * W;
  simtlab::conv_pipelined<BX, BY, TX, TY, R, NT>(in + image, out + image, H, W, taps);
}
