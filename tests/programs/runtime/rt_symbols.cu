// __constant__ and __device__ symbols: static initializers are visible, cudaMemcpyToSymbol /
// FromSymbol (whole, at offsets, async, device-to-device), cudaGetSymbolAddress and
// cudaGetSymbolSize, and kernels reading constants and updating device globals.
#include "rt_check.h"

#include <vector>

__constant__ float kCoeffs[16];
__constant__ int kOffsets[4] = {10, 20, 30, 40};
__device__ int g_counter;
__device__ int g_initialized = 1234;
__device__ unsigned g_table[256];
__device__ double g_pair[2] = {1.5, -2.25};

// out[i] = sum_k kCoeffs[k] * x[i]^k  (Horner) + kOffsets[i % 4]
__global__ void Polynomial(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc = 0.0f;
  for (int k = 15; k >= 0; --k) acc = acc * x[i] + kCoeffs[k];
  out[i] = acc + (float)kOffsets[i % 4];
  atomicAdd(&g_counter, 1);
}

__global__ void FillTable(unsigned* table) {
  int i = threadIdx.x;
  table[i] = table[i] * 3u + (unsigned)g_initialized;
}

__global__ void ScalePair(double f) {
  if (threadIdx.x < 2) g_pair[threadIdx.x] *= f;
}

int main() {
  // Initial values, before anything is written.
  int init = 0;
  CHECK(cudaMemcpyFromSymbol(&init, g_initialized, sizeof init));
  EXPECT(init == 1234, "g_initialized = %d, want 1234", init);
  int offs[4] = {0};
  CHECK(cudaMemcpyFromSymbol(offs, kOffsets, sizeof offs));
  EXPECT(offs[0] == 10 && offs[1] == 20 && offs[2] == 30 && offs[3] == 40, "kOffsets %d %d %d %d",
         offs[0], offs[1], offs[2], offs[3]);

  // Constants: whole array, then the upper half at an offset.
  float coeffs[16];
  for (int k = 0; k < 16; ++k) coeffs[k] = 1.0f / (float)(k + 1);
  CHECK(cudaMemcpyToSymbol(kCoeffs, coeffs, 8 * sizeof(float)));
  CHECK(cudaMemcpyToSymbol(kCoeffs, coeffs + 8, 8 * sizeof(float), 8 * sizeof(float)));
  float check[16] = {0};
  CHECK(cudaMemcpyFromSymbol(check, kCoeffs, sizeof check));
  for (int k = 0; k < 16; ++k) EXPECT(check[k] == coeffs[k], "kCoeffs[%d] = %g", k, check[k]);
  const int zero = 0;
  CHECK(cudaMemcpyToSymbol(g_counter, &zero, sizeof zero));

  const int n = 2000;
  std::vector<float> x(n), out(n);
  for (int i = 0; i < n; ++i) x[i] = (float)(i % 100) / 100.0f - 0.5f;
  float *dx = nullptr, *dout = nullptr;
  CHECK(cudaMalloc(&dx, n * sizeof(float)));
  CHECK(cudaMalloc(&dout, n * sizeof(float)));
  CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  Polynomial<<<GridFor(n, 128), 128>>>(dx, dout, n);
  CHECK_SYNC();
  CHECK(cudaMemcpy(out.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    float acc = 0.0f;
    for (int k = 15; k >= 0; --k) acc = acc * x[i] + coeffs[k];
    float want = acc + (float)offs[i % 4];
    EXPECT(Near(out[i], want, 1e-5, 1e-5), "poly[%d] = %.9g, want %.9g", i, out[i], want);
  }
  int counter = -1;
  CHECK(cudaMemcpyFromSymbol(&counter, g_counter, sizeof counter));
  EXPECT(counter == n, "g_counter = %d, want %d", counter, n);

  // Symbol address and size; the address works as an ordinary device pointer.
  size_t size = 0;
  CHECK(cudaGetSymbolSize(&size, g_table));
  EXPECT(size == 256 * sizeof(unsigned), "g_table size %zu", size);
  unsigned* table = nullptr;
  CHECK(cudaGetSymbolAddress((void**)&table, g_table));
  EXPECT(table != nullptr, "null symbol address");
  std::vector<unsigned> ht(256), back(256);
  for (int i = 0; i < 256; ++i) ht[i] = 1000u * i;
  CHECK(cudaMemcpy(table, ht.data(), 256 * sizeof(unsigned), cudaMemcpyHostToDevice));
  FillTable<<<1, 256>>>(table);
  CHECK_SYNC();
  CHECK(cudaMemcpyFromSymbol(back.data(), g_table, 256 * sizeof(unsigned)));
  for (int i = 0; i < 256; ++i)
    EXPECT(back[i] == 3000u * i + 1234u, "g_table[%d] = %u", i, back[i]);
  // Read through the address, at an offset, with cudaMemcpyFromSymbol's offset argument.
  unsigned tail[4] = {0};
  CHECK(cudaMemcpyFromSymbol(tail, g_table, sizeof tail, 252 * sizeof(unsigned)));
  for (int i = 0; i < 4; ++i) EXPECT(tail[i] == 3000u * (252 + i) + 1234u, "tail[%d]", i);

  // Async symbol copies on a stream, and a device-to-device copy into a symbol.
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  ScalePair<<<1, 32, 0, s>>>(4.0);
  CHECK_LAUNCH();
  double pair[2] = {0, 0};
  CHECK(cudaMemcpyFromSymbolAsync(pair, g_pair, sizeof pair, 0, cudaMemcpyDeviceToHost, s));
  CHECK(cudaStreamSynchronize(s));
  EXPECT(pair[0] == 6.0 && pair[1] == -9.0, "g_pair = %g %g", pair[0], pair[1]);
  int* dval = nullptr;
  const int seven = 7;
  CHECK(cudaMalloc(&dval, sizeof(int)));
  CHECK(cudaMemcpyAsync(dval, &seven, sizeof seven, cudaMemcpyHostToDevice, s));
  CHECK(cudaMemcpyToSymbolAsync(g_initialized, dval, sizeof(int), 0, cudaMemcpyDeviceToDevice, s));
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaMemcpyFromSymbol(&init, g_initialized, sizeof init));
  EXPECT(init == 7, "g_initialized after D2D = %d", init);

  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(dval));
  CHECK(cudaFree(dx));
  CHECK(cudaFree(dout));
  printf("rt_symbols: OK\n");
  return 0;
}
