// Rung 1 - if/else chain: particles move one step, x = p + v*dt, and reflect
// off the walls of [lo, hi]: if below, mirror at lo and flip v; else if above,
// mirror at hi and flip v. A particle's side depends on its data, so lanes of
// a warp disagree. out holds the new positions, then the new velocities.
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK)
boundary_if_else(const float* __restrict__ p, const float* __restrict__ v, float* __restrict__ out, float lo, float hi,
                 float dt, long long n) {
  const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
  if (i >= n) return;
  float x = fmaf(v[i], dt, p[i]), u = v[i];
  if (x < lo) {
    x = 2.0f * lo - x;
    u = -u;
  } else if (x > hi) {
    x = 2.0f * hi - x;
    u = -u;
  }
  out[i] = x;
  out[n + i] = u;
}
