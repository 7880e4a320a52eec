// Device variables registered by the compiler: hipMemcpyToSymbol / FromSymbol, their addresses
// and sizes, and kernels that read and write them.
#include "hip_check.h"

__device__ int g_counter;
__constant__ float g_coefficients[4];
__device__ float g_table[256];

__global__ void Apply(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = g_coefficients[0] + g_coefficients[1] * g_table[i % 256];
    atomicAdd(&g_counter, 1);
  }
}

int main() {
  const float coefficients[4] = {1.0f, 2.0f, 0.0f, 0.0f};
  float table[256];
  for (int i = 0; i < 256; ++i) table[i] = static_cast<float>(i);
  int zero = 0;
  // The first use of a symbol loads the program's device code.
  CHECK_CODE(hipMemcpyToSymbol(HIP_SYMBOL(g_counter), &zero, sizeof zero));
  CHECK(hipMemcpyToSymbol(HIP_SYMBOL(g_coefficients), coefficients, sizeof coefficients));
  CHECK(hipMemcpyToSymbol(HIP_SYMBOL(g_table), table, sizeof table));
  size_t size = 0;
  CHECK(hipGetSymbolSize(&size, HIP_SYMBOL(g_table)));
  EXPECT(size == sizeof table);
  void* address = nullptr;
  CHECK(hipGetSymbolAddress(&address, HIP_SYMBOL(g_table)));
  EXPECT(address != nullptr);
  float back[256];
  CHECK(hipMemcpyFromSymbol(back, HIP_SYMBOL(g_table), sizeof back));
  for (int i = 0; i < 256; ++i) EXPECT(back[i] == table[i]);
  // Past the end of the variable.
  EXPECT_ERROR(hipMemcpyToSymbol(HIP_SYMBOL(g_table), table, sizeof table, 4),
               hipErrorInvalidValue);
  (void)hipGetLastError();
  const int n = 1000;
  float* out;
  CHECK(hipMalloc(&out, n * sizeof(float)));
  Apply<<<(n + 127) / 128, 128>>>(out, n);
  CHECK_LAUNCH("Apply");
  int counter = 0;
  CHECK(hipMemcpyFromSymbol(&counter, HIP_SYMBOL(g_counter), sizeof counter));
  EXPECT(counter == n);
  float host[n];
  CHECK(hipMemcpy(host, out, sizeof host, hipMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) EXPECT(host[i] == 1.0f + 2.0f * (i % 256));
  CHECK(hipFree(out));
  puts("hip_symbols: ok");
  return 0;
}
