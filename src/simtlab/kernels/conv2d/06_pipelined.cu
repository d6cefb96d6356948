// Rung 6 - the tile fill made asynchronous and cheap. Rung 5 is FMA-bound
// on paper but runs at ~40% of the FFMA rate: every block first loads its
// haloed tile (one scalar LDG, an index split and four bounds tests per
// element), waits at a barrier, and only then computes, so an SM alternates
// between loading and computing. Here a block walks NT tiles down a column
// strip and copies tile t+1 into the other half of a double-buffered shared
// tile with cp.async while it computes tile t (one barrier a tile): the copies bypass registers
// and their latency hides behind a whole tile of FMAs. The tile's left edge
// is rounded down to 16 bytes so a row is filled by 16-byte copies (a chunk
// is wholly inside or wholly outside the image when W % 4 == 0; outside it is
// zero-filled); other widths or unaligned images fill with 4-byte copies.
// Compute is rung 5's patch per thread, TY x TX (TX a multiple of 4: wider
// patches read fewer window columns per output), each window row as aligned
// LDS.128 chunks.
#include "simtlab_async.cuh"
#include "simtlab_conv.cuh"

template <int BX, int BY, int TX, int TY, int R, int NT>
__global__ void __launch_bounds__(BX * BY)
conv2d_pipelined(const float* __restrict__ in, float* __restrict__ out, int H, int W) {
  using G = simtlab::ConvWindow<R, TX>;
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
        simtlab::cp_async16(dst + ty * TW + 4 * c, in_img ? in + (size_t)gy * W + gx : in, in_img);
      }
    } else {
      for (int i = tid; i < TH * TW; i += BX * BY) {
        const int ty = i / TW, c = i - ty * TW, gy = gy0 + ty, gx = xa + c;
        const bool in_img = gy >= 0 && gy < H && gx >= 0 && gx < W;
        simtlab::cp_async4(dst + i, in_img ? in + (size_t)gy * W + gx : in, in_img);
      }
    }
    simtlab::cp_async_commit();
  };

  const int x = strip + threadIdx.x * TX;
  const bool vec_out = x + TX <= W && W % 4 == 0 && reinterpret_cast<size_t>(out) % 16 == 0;
  fill(0);
  for (int t = 0; t < ntiles; ++t) {
    simtlab::cp_async_wait<0>();  // tile t (issued a whole tile of compute ago) is in, for this thread
    __syncthreads();              // ... and every thread's; and all are done with tile t-1's stage
    if (t + 1 < ntiles) fill(t + 1);  // into tile t-1's stage: lands while tile t computes
    const float* tile = tiles + (t & 1) * STAGE + threadIdx.y * TY * TW + threadIdx.x * TX + G::SKIP;
    float acc[TY][TX];
    simtlab::conv_patch<TX, TY, R, TW, G::OFF, G::NC>(tile, acc);
    const int ybase = row0 + t * ROWS + threadIdx.y * TY;
    if (x < W) simtlab::conv_store<TX, TY>(out, acc, x, ybase, H, W, vec_out);
  }
}
