// cudaDeviceReset followed by new work: allocations, streams, events and kernels work again after
// each of two resets, and a __device__ variable is back at its static initializer (the module is
// loaded afresh into the new context).
#include "rt_check.h"

#include <vector>

__device__ int g_value = 7;

__global__ void Bump(int by) {
  if (blockIdx.x == 0 && threadIdx.x == 0) g_value += by;
}

__global__ void Fill(int* p, int n, int base) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = base + i + g_value;
}

static void Work(int generation) {
  int v = -1;
  CHECK(cudaMemcpyFromSymbol(&v, g_value, sizeof v));
  EXPECT(v == 7, "generation %d: g_value starts at %d, want 7", generation, v);
  Bump<<<1, 32>>>(generation + 1);
  CHECK_SYNC();
  CHECK(cudaMemcpyFromSymbol(&v, g_value, sizeof v));
  EXPECT(v == 8 + generation, "generation %d: g_value %d after Bump", generation, v);

  const int n = 3000;
  int* d = nullptr;
  CHECK(cudaMalloc(&d, n * sizeof(int)));
  cudaStream_t s;
  cudaEvent_t e;
  CHECK(cudaStreamCreate(&s));
  CHECK(cudaEventCreate(&e));
  Fill<<<GridFor(n, 256), 256, 0, s>>>(d, n, generation * 100000);
  CHECK_LAUNCH();
  CHECK(cudaEventRecord(e, s));
  CHECK(cudaEventSynchronize(e));
  std::vector<int> h(n);
  CHECK(cudaMemcpy(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    int want = generation * 100000 + i + 8 + generation;
    EXPECT(h[i] == want, "generation %d: p[%d] = %d, want %d", generation, i, h[i], want);
  }
  // Deliberately leave d, s and e alive: the reset must clean them up.
}

int main() {
  Work(0);
  CHECK(cudaDeviceReset());
  Work(1);
  CHECK(cudaDeviceReset());
  Work(2);
  // Device queries still work after a reset.
  cudaDeviceProp p;
  CHECK(cudaGetDeviceProperties(&p, 0));
  EXPECT(p.name[0] != '\0', "empty device name after reset");
  size_t free_bytes = 0, total_bytes = 0;
  CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  EXPECT(free_bytes > 0 && free_bytes <= total_bytes, "memory info %zu / %zu", free_bytes,
         total_bytes);
  CHECK(cudaDeviceReset());
  printf("rt_device_reset: OK\n");
  return 0;
}
