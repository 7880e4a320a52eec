// Kernels for hip_module_launch, built into a code object with `hipcc --genco`.
#include <hip/hip_runtime.h>

__device__ float bias = 0.0f;

extern "C" __global__ void fill(float* out, float value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}

extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i] + bias;
}
