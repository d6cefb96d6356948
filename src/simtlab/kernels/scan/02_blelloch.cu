// Rung 2 - Blelloch: work-efficient. A block loads two elements a thread and sweeps a balanced
// tree up (partial sums) and down (exclusive prefixes): about 2n adds instead of n log2(n), and
// half the threads for twice the elements. Tree indices 2^k apart would hit one shared-memory
// bank; a word of padding every 32 (index + index/32) spreads them over all banks.
#include "simtlab_scan.cuh"

template <int DT, int BLOCK, int ITEMS>
__global__ void __launch_bounds__(BLOCK)
scan_blelloch(const typename simtlab::scan::Elem<DT>::T* __restrict__ x, typename simtlab::scan::Elem<DT>::T* out,
              typename simtlab::scan::Elem<DT>::T* sums, const typename simtlab::scan::Elem<DT>::T* carry,
              long long n, int phase) {
  using T = typename simtlab::scan::Elem<DT>::T;
  static_assert(ITEMS == 2, "two elements a thread");
  constexpr int N = 2 * BLOCK;
  if (phase == 1) {
    simtlab::scan::add_carry(out, carry, n, N);
    return;
  }
  __shared__ T s[N + N / 32];
  auto pad = [](int k) { return k + (k >> 5); };
  const int t = threadIdx.x;
  const long long base = (long long)blockIdx.x * N;
  const T a = base + t < n ? x[base + t] : T(0);
  const T b = base + t + BLOCK < n ? x[base + t + BLOCK] : T(0);
  s[pad(t)] = a;
  s[pad(t + BLOCK)] = b;
  int offset = 1;
  for (int d = N >> 1; d > 0; d >>= 1) {  // up-sweep: partial sums at the tree's right children
    __syncthreads();
    if (t < d) s[pad(offset * (2 * t + 2) - 1)] += s[pad(offset * (2 * t + 1) - 1)];
    offset *= 2;
  }
  T total = T(0);
  if (t == 0) {  // (the same thread wrote the root last)
    total = s[pad(N - 1)];
    s[pad(N - 1)] = T(0);
  }
  for (int d = 1; d < N; d *= 2) {  // down-sweep: exclusive prefixes
    offset >>= 1;
    __syncthreads();
    if (t < d) {
      const int l = pad(offset * (2 * t + 1) - 1), r = pad(offset * (2 * t + 2) - 1);
      const T left = s[l];
      s[l] = s[r];
      s[r] += left;
    }
  }
  __syncthreads();
  if (base + t < n) out[base + t] = s[pad(t)] + a;
  if (base + t + BLOCK < n) out[base + t + BLOCK] = s[pad(t + BLOCK)] + b;
  if (sums != nullptr && t == 0) sums[blockIdx.x] = total;
}
