// Rung 2 - select: the same reflection written as data selects (which wall,
// whether to mirror) with no control flow at all. Short branches like rung 1's
// are usually predicated by the compiler already; the SASS report shows
// whether rung 1 really branched, and the timing whether it mattered - in a
// memory-bound kernel a few extra issue slots per element are free.
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK)
boundary_select(const float* __restrict__ p, const float* __restrict__ v, float* __restrict__ out, float lo, float hi,
                float dt, long long n) {
  const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
  if (i >= n) return;
  const float u = v[i];
  const float x = fmaf(u, dt, p[i]);
  const bool below = x < lo, outside = below || x > hi;
  const float wall = below ? lo : hi;
  out[i] = outside ? 2.0f * wall - x : x;
  out[n + i] = outside ? -u : u;
}
