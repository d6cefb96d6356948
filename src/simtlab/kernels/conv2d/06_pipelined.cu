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
#include "simtlab_conv.cuh"

template <int BX, int BY, int TX, int TY, int R, int NT>
__global__ void __launch_bounds__(BX * BY)
conv2d_pipelined(const float* __restrict__ in, float* __restrict__ out, int H, int W) {
  simtlab::conv_pipelined<BX, BY, TX, TY, R, NT>(in, out, H, W, c_filter);
}
