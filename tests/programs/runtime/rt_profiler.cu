// cudaProfilerStart and cudaProfilerStop succeed around real work, as on a GPU with no profiler
// attached (hashcat and NVIDIA's matrixMul and asyncAPI samples call them and stop on failure).
#include <cuda_profiler_api.h>

#include "rt_check.h"

__global__ void Twice(int* v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] *= 2;
}

int main() {
  const int n = 1000;
  int host[n];
  for (int i = 0; i < n; ++i) host[i] = i;
  int* dev = nullptr;
  CHECK(cudaMalloc(&dev, sizeof host));
  CHECK(cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice));
  CHECK(cudaProfilerStart());
  Twice<<<(n + 127) / 128, 128>>>(dev, n);
  CHECK_SYNC();
  CHECK(cudaProfilerStop());
  CHECK(cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    if (host[i] != 2 * i) {
      fprintf(stderr, "element %d: %d\n", i, host[i]);
      return 1;
    }
  }
  CHECK(cudaFree(dev));
  printf("rt_profiler: OK\n");
  return 0;
}
