// Rung 4 - the row in registers, 128-bit accesses, __expf, and the launch
// shape chosen by row length: rows of up to 1024 floats get one warp each
// (WARP_ROWS, several rows per block, reductions entirely in shuffles); longer
// rows get a block each. Every thread keeps VPT float4 of its row in registers
// between the statistics and the output, so the matrix is read once and
// written once - the least traffic softmax can have - and __expf (one MUFU.EX2
// and a multiply) replaces expf's longer, more accurate sequence. VEC=false
// (rows not a multiple of 4, unaligned) loads the same elements one by one.
// DT 1 keeps bf16 in memory: the same kernel with 8-byte accesses, half the bytes.
#include "simtlab_io.cuh"
#include "simtlab_reduce.cuh"

template <int DT, int BLOCK, int VPT, int WARP_ROWS, bool VEC>
__global__ void __launch_bounds__(BLOCK)
softmax_vectorized(const typename simtlab::Io<DT>::T* __restrict__ x, typename simtlab::Io<DT>::T* __restrict__ y,
                   int rows, int cols) {
  using Io = simtlab::Io<DT>;
  const simtlab::RowShare<BLOCK, WARP_ROWS> share;
  __shared__ float warp_vals[32];
  const int row = share.row;
  if (share.idle(rows)) return;
  const float NEG = -__int_as_float(0x7f800000);
  const typename Io::T* xr = x + (size_t)row * cols;
  float4 v[VPT];
  float m = NEG;
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    v[j] = simtlab::load_group<DT, VEC>(xr, share.col(j), cols, NEG);
    m = fmaxf(m, fmaxf(fmaxf(v[j].x, v[j].y), fmaxf(v[j].z, v[j].w)));
  }
  m = WARP_ROWS ? simtlab::warp_allreduce<1>(m) : simtlab::block_allreduce<BLOCK, 1>(m, warp_vals);
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < VPT; ++j) {  // masked elements are -inf: exp gives 0
    v[j].x = __expf(v[j].x - m);
    v[j].y = __expf(v[j].y - m);
    v[j].z = __expf(v[j].z - m);
    v[j].w = __expf(v[j].w - m);
    s += (v[j].x + v[j].y) + (v[j].z + v[j].w);
  }
  s = WARP_ROWS ? simtlab::warp_allreduce<0>(s) : simtlab::block_allreduce<BLOCK, 0>(s, warp_vals);
  const float inv = 1.0f / s;
  typename Io::T* yr = y + (size_t)row * cols;
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    const int c = share.col(j);
    const float4 o = make_float4(v[j].x * inv, v[j].y * inv, v[j].z * inv, v[j].w * inv);
    if (VEC) {
      if (c < cols) Io::store4(yr + c, o);
    } else {
      if (c + 0 < cols) Io::store(yr + c + 0, o.x);
      if (c + 1 < cols) Io::store(yr + c + 1, o.y);
      if (c + 2 < cols) Io::store(yr + c + 2, o.z);
      if (c + 3 < cols) Io::store(yr + c + 3, o.w);
    }
  }
}
