// Rung 11 - fp32 on the tensor cores: 3xTF32 (sm_90a). What changed from rung 10:
//  * the tensor cores multiply TF32 (10 mantissa bits): each operand x is split into big = tf32(x)
//    and small = tf32(x - big), rounded to nearest; a*b = big*big + big*small + small*big (the
//    dropped term lies ~2^-22 below). A pre-pass makes the parts, B's transposed to K-major as wgmma's
//    tf32 form reads both: 12 bytes moved an input element, in 16-byte pieces;
//  * the main loop is rung 6 of the tensor-core ladder (gemm_tc_wgmma_cluster, with SPLIT)
//    walking K three times, the small products first; alpha and beta in its epilogue;
//  * the tensor cores round each k-step into their sums with a bias: after each window (SPLIT
//    slices of big x big, 16 of the small passes) the sums move into a second set of registers,
//    rounded to nearest, and start afresh - the error stops growing with K (128x128 tiles);
//  * values below 2^-100 would keep subnormal small parts (flushed): the split notes them and a
//    rescaling pass scales the rows of A and columns of B they fill by a power of two, undone in
//    the epilogue; a last round of tiles at most a quarter full is cut into chunks of K (SK 1).
//  Should buy: errors under SGEMM's at ~2x its speed; Inf and NaN as in SGEMM. docs/design/gemm.md.
#include "gemm_tc/06_wgmma_cluster.cu"
#include "simtlab_tf32.cuh"

using simtlab::note_tiny;
using simtlab::split_tf32;

constexpr int SPLIT_UNROLL = 4;  // A's 4-wide groups a thread loads before it splits any

// Four consecutive floats from p, zeros past the first `avail`: one 16-byte load where the row
// allows it (`vec`: 16-byte aligned rows), else one load a float.
__device__ __forceinline__ float4 load_group(const float* p, int avail, bool vec) {
  if (vec && avail >= 4) return *reinterpret_cast<const float4*>(p);
  float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (avail > 0) v.x = p[0];
  if (avail > 1) v.y = p[1];
  if (avail > 2) v.z = p[2];
  if (avail > 3) v.w = p[3];
  return v;
}

// A (rows x cols, row-major, leading dimension lda) -> big and small (rows x ld, ld a multiple of
// 4), zero past cols; without `small` (AREG 1: the main loop splits A itself) A only noted, or
// copied whole into `big` where the call's A cannot be read by TMA (not on a 16-byte boundary).
// A thread takes 4-wide groups (one 16-byte load, two 16-byte stores where A's rows allow it)
// walking rows x ld/4 with a stride of the `blocks` blocks that do this, UNROLL groups loaded
// before any is split; the row and column step without a division a group.
__device__ __forceinline__ void split_rows(const float* __restrict__ A, int rows, int cols, int lda, int ld,
                                           float* __restrict__ big, float* __restrict__ small, int* tiny, int block,
                                           int blocks) {
  const int q = ld / 4;
  const long long n = (long long)rows * q, stride = (long long)blocks * blockDim.x;
  const bool vec = lda % 4 == 0 && ((size_t)A & 15) == 0;  // (the whole call: a uniform branch)
  const long long first = (long long)block * blockDim.x + threadIdx.x;
  int r = (int)(first / q), g = (int)(first % q);
  const int step_r = (int)(stride / q), step_g = (int)(stride % q);
  for (long long i = first; i < n; i += SPLIT_UNROLL * stride) {
    float4 v[SPLIT_UNROLL];
    int rr[SPLIT_UNROLL], gg[SPLIT_UNROLL];
#pragma unroll
    for (int u = 0; u < SPLIT_UNROLL; ++u) {
      rr[u] = r, gg[u] = g;
      v[u] = i + u * stride < n ? load_group(A + (size_t)r * lda + 4 * g, cols - 4 * g, vec)
                                : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      r += step_r, g += step_g;
      if (g >= q) g -= q, ++r;
    }
#pragma unroll
    for (int u = 0; u < SPLIT_UNROLL; ++u) {
      if (i + u * stride >= n) break;
      const size_t at = (size_t)rr[u] * ld + 4 * gg[u];
      if (small != nullptr) {
        float4 hi, lo;
        split_tf32(v[u].x, hi.x, lo.x), split_tf32(v[u].y, hi.y, lo.y);
        split_tf32(v[u].z, hi.z, lo.z), split_tf32(v[u].w, hi.w, lo.w);
        *reinterpret_cast<float4*>(big + at) = hi;
        *reinterpret_cast<float4*>(small + at) = lo;
      } else if (big != nullptr) {
        *reinterpret_cast<float4*>(big + at) = v[u];
      }
      note_tiny(v[u], tiny);
      if (small == nullptr) simtlab::note_special(v[u], tiny);
    }
  }
}

// B (K x N, row-major, leading dimension ldb) -> B^T's big and small parts (N x ld, K contiguous,
// ld a multiple of 4), zero past K, one 64x64 tile (k0, n0) through shared memory (one padding
// column); `permute` (AREG 1): each 32-deep slice's rows in simtlab::slice_row_of's order. Each
// thread loads four 16-byte pieces of B's rows (all in flight at once) and stores four 16-byte
// pieces of each part's rows: whole lines, a quarter of the instructions of a float a thread.
constexpr int SPLIT_TILE = 64;

__device__ __forceinline__ void split_transposed_tile(const float* __restrict__ B, int K, int N, int ldb, int ld,
                                                      float* __restrict__ big, float* __restrict__ small, int* tiny,
                                                      int k0, int n0, bool permute,
                                                      float (&tile)[SPLIT_TILE][SPLIT_TILE + 1]) {
  const int g = threadIdx.x % 16, row = threadIdx.x / 16;
  const bool vec = ldb % 4 == 0 && ((size_t)B & 15) == 0;
  float4 v[4];
#pragma unroll
  for (int p = 0; p < 4; ++p) {  // rows row, row + 16, ... of the tile; columns 4g..4g+3 (zeros outside B)
    const int k = k0 + row + 16 * p, n = n0 + 4 * g;
    v[p] = k < K ? load_group(B + (size_t)k * ldb + n, N - n, vec) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    float* t = &tile[row + 16 * p][4 * g];
    t[0] = v[p].x, t[1] = v[p].y, t[2] = v[p].z, t[3] = v[p].w;
    note_tiny(v[p], tiny);
  }
  __syncthreads();
#pragma unroll
  for (int p = 0; p < 4; ++p) {  // B^T rows n0 + row + 16p, k values 4g..4g+3 of the tile
    const int nl = row + 16 * p, n = n0 + nl, k = k0 + 4 * g;
    if (n < N && k < ld) {
      float4 hi, lo;
      auto k_row = [&](int i) { return permute ? simtlab::slice_row_of(4 * g + i) : 4 * g + i; };
      split_tf32(tile[k_row(0)][nl], hi.x, lo.x), split_tf32(tile[k_row(1)][nl], hi.y, lo.y);
      split_tf32(tile[k_row(2)][nl], hi.z, lo.z), split_tf32(tile[k_row(3)][nl], hi.w, lo.w);
      *reinterpret_cast<float4*>(big + (size_t)n * ld + k) = hi;
      *reinterpret_cast<float4*>(small + (size_t)n * ld + k) = lo;
    }
  }
}

// The pre-pass in one launch: blocks [0, a_blocks) split A's rows, the rest one 64x64 tile of B
// each (tiles_n tiles across N) - no boundary between the two halves for the GPU to drain.
extern "C" __global__ void __launch_bounds__(256) gemm_split_tf32(
    const float* __restrict__ A, int M, int K, int lda, const float* __restrict__ B, int N, int ldb, int ld,
    float* __restrict__ a_big, float* __restrict__ a_small, float* __restrict__ b_big, float* __restrict__ b_small,
    int* __restrict__ tiny, int a_blocks, int tiles_n, int permute) {
  __shared__ float tile[SPLIT_TILE][SPLIT_TILE + 1];
  if ((int)blockIdx.x < a_blocks) {
    split_rows(A, M, K, lda, ld, a_big, a_small, tiny, blockIdx.x, a_blocks);
  } else {
    const int t = blockIdx.x - a_blocks;
    split_transposed_tile(B, K, N, ldb, ld, b_big, b_small, tiny, (t / tiles_n) * SPLIT_TILE,
                          (t % tiles_n) * SPLIT_TILE, permute != 0, tile);
  }
}

// Where the split saw tiny values (scale[0] & 1; else every block returns at once): each row of A
// and column of B that holds nothing above simtlab::TINY is scaled (simtlab_tf32.cuh) and split
// again; scale[1 + r] and scale[1 + M + n] receive the exponents (0: unscaled) for the epilogue.
// Blocks of y 0 take rows of A (a block a row, read twice from L2), of y 1 strips of 32 columns of
// B (a column a lane). AREG 1 (no a_small): A's exponents only, which the main loop applies as it
// splits; B's rows laid out as the split laid them (`permute`). Rare inputs: written for clarity.
extern "C" __global__ void __launch_bounds__(256) gemm_split_tf32_rescale(
    const float* __restrict__ A, int M, int K, int lda, const float* __restrict__ B, int N, int ldb, int ld,
    float* __restrict__ a_big, float* __restrict__ a_small, float* __restrict__ b_big, float* __restrict__ b_small,
    int* __restrict__ scale, int permute) {
  if ((scale[0] & 1) == 0) return;
  __shared__ float red[8];
  __shared__ float col_max[8][32];
  float hi, lo;
  if (blockIdx.y == 0) {
    for (int r = blockIdx.x; r < M; r += gridDim.x) {
      const float* a = A + (size_t)r * lda;
      const int e = simtlab::row_exponent(a, K, red);
      if (threadIdx.x == 0) scale[1 + r] = e;
      for (int k = threadIdx.x; a_small != nullptr && k < K; k += blockDim.x) {
        split_tf32(ldexpf(a[k], -e), hi, lo);
        a_big[(size_t)r * ld + k] = hi, a_small[(size_t)r * ld + k] = lo;
      }
    }
  } else {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int n0 = 32 * blockIdx.x; n0 < N; n0 += 32 * gridDim.x) {
      const int n = n0 + lane, e = simtlab::column_exponent(B, K, N, ldb, n, col_max);
      if (n < N) {
        if (warp == 0) scale[1 + M + n] = e;
        for (int k = warp; k < K; k += 8) {
          split_tf32(ldexpf(B[(size_t)k * ldb + n], -e), hi, lo);
          const int at = permute ? simtlab::slice_position_of(k) : k;
          b_big[(size_t)n * ld + at] = hi, b_small[(size_t)n * ld + at] = lo;
        }
      }
    }
  }
}
