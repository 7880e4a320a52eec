// Module variables of every kind a program's device code holds, for module_variables_test.
namespace space {
__device__ int in_namespace[4];
}
__device__ unsigned long long total;
__device__ float initialised[3] = {1.0f, 2.0f, 3.0f};
static __device__ int file_local;
__constant__ double coefficients[8];
extern "C" {
__device__ int plain_c;
}

extern "C" __global__ void touch(int* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = space::in_namespace[i % 4] + file_local + plain_c +
             static_cast<int>(initialised[i % 3]) + static_cast<int>(coefficients[i % 8]);
    atomicAdd(&total, 1ull);
    file_local = i;
  }
}
