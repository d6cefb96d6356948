// The launch-overhead experiment (simtlab.host.graphs): chain_step is one tiny
// step (x = 1.0001 x + 1 over a small array), launched STEPS times in a row -
// one by one, or captured once into a CUDA graph and replayed; chain_fused does
// all STEPS in one launch, each thread looping in registers. Same operations in
// the same order, so all three leave bit-identical results.
extern "C" __global__ void __launch_bounds__(256) chain_step(float* __restrict__ x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = fmaf(x[i], 1.0001f, 1.0f);
}

extern "C" __global__ void __launch_bounds__(256) chain_fused(float* __restrict__ x, int n, int steps) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  for (int s = 0; s < steps; ++s) v = fmaf(v, 1.0001f, 1.0f);
  x[i] = v;
}
