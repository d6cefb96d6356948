// Rung 7 - the tile fill handed to the copy engine (Hopper, sm_90). Nsight
// Compute on rung 6 at 8192^2, radius 3: 83% of issue slots busy with DRAM at
// 59% - issue-bound, and about a seventh of the instructions are the cp.async
// fill (an address, a bounds test and a copy per 16 bytes, per thread). Here
// one thread asks the tensor memory accelerator (TMA) for the whole haloed
// tile with one instruction: a box of the image described by a tensor map,
// written into shared memory and counted on an mbarrier the block waits on.
// The copy engine also writes the zeros outside the image (negative or
// past-the-end coordinates), so the borders need no code at all. Everything
// else - double-buffered tiles down a column strip, one barrier a tile, the
// TY x TX patch per thread with filter taps from constant memory - is rung 6.
// Rows must be 16-byte multiples for a tensor map: other widths run on a
// zero-padded copy (timed), as the tensor-core rungs do.
#include "simtlab_conv.cuh"
#include "simtlab_hopper.cuh"


template <int BX, int BY, int TX, int TY, int R, int NT>
__global__ void __launch_bounds__(BX * BY)
conv2d_tma(const void* __restrict__ map, float* __restrict__ out, int H, int W) {
  using G = simtlab::ConvWindow<R, TX>;
  constexpr int PAD = G::PAD, TW = BX * TX + 2 * PAD, ROWS = BY * TY, TH = ROWS + 2 * R;
  constexpr int STAGE = (TH * TW * 4 + 127) / 128 * 128;  // bytes; TMA writes 128-byte-aligned boxes
  static_assert(TW <= 256 && TH <= 256, "a TMA box has at most 256 elements a dimension");
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((128 - (simtlab::smem_u32addr(smem_raw) & 127)) & 127);
  simtlab::u64* bar = reinterpret_cast<simtlab::u64*>(smem + 2 * STAGE);

  const int tid = threadIdx.y * BX + threadIdx.x;
  const int strip = blockIdx.x * BX * TX, row0 = blockIdx.y * NT * ROWS;
  const int ntiles = min(NT, (H - row0 + ROWS - 1) / ROWS);
  if (tid == 0) {
    simtlab::mbar_init(&bar[0], 1);
    simtlab::mbar_init(&bar[1], 1);
    simtlab::mbar_init_fence();
    simtlab::tensormap_acquire(map);
  }
  __syncthreads();
  auto issue = [&](int t) {  // one thread: tile t's box (halo included, zeros outside) into stage t & 1
    simtlab::mbar_arrive_expect_tx(&bar[t & 1], TH * TW * 4);
    simtlab::tma_load_2d(smem + (t & 1) * STAGE, map, &bar[t & 1], strip - PAD, row0 + t * ROWS - R);
  };
  if (tid == 0) issue(0);

  const int x = strip + threadIdx.x * TX;
  const bool vec_out = x + TX <= W && W % 4 == 0 && reinterpret_cast<size_t>(out) % 16 == 0;
  for (int t = 0; t < ntiles; ++t) {
    simtlab::mbar_wait(&bar[t & 1], (t >> 1) & 1);  // tile t has landed
    __syncthreads();                                // every thread is done with tile t-1's stage
    if (tid == 0 && t + 1 < ntiles) issue(t + 1);   // into it: lands while tile t computes
    const float* tile = reinterpret_cast<const float*>(smem + (t & 1) * STAGE) + threadIdx.y * TY * TW +
                        threadIdx.x * TX + G::SKIP;
    float acc[TY][TX];
    simtlab::conv_patch<TX, TY, R, TW, G::OFF, G::NC>(tile, acc, c_filter);
    const int ybase = row0 + t * ROWS + threadIdx.y * TY;
    if (x < W) simtlab::conv_store<TX, TY>(out, acc, x, ybase, H, W, vec_out);
  }
}
