// Device limits and device-side features that depend on them: cudaDeviceGetLimit/SetLimit for the
// stack, printf FIFO and malloc heap sizes; in-kernel malloc/free (per-thread blocks, and a block
// allocated by one kernel and freed by a later one); a recursive __device__ function.
#include "rt_check.h"

#include <vector>

__device__ int* g_saved;

__device__ __noinline__ int Fib(int k) { return k < 2 ? k : Fib(k - 1) + Fib(k - 2); }

__global__ void Recurse(int* out) { out[threadIdx.x] = Fib(threadIdx.x % 16); }

__global__ void PerThreadMalloc(long long* out, int* failures) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int count = 8 + t % 24;
  int* p = static_cast<int*>(malloc(count * sizeof(int)));
  if (p == nullptr) {
    atomicAdd(failures, 1);
    out[t] = -1;
    return;
  }
  for (int k = 0; k < count; ++k) p[k] = t * k;
  long long sum = 0;
  for (int k = 0; k < count; ++k) sum += p[k];
  free(p);
  out[t] = sum;
}

__global__ void AllocAndKeep(int n) {
  if (threadIdx.x != 0) return;
  g_saved = static_cast<int*>(malloc(n * sizeof(int)));
  if (g_saved)
    for (int k = 0; k < n; ++k) g_saved[k] = k * 5;
}

__global__ void UseAndFree(int n, long long* out) {
  if (threadIdx.x != 0) return;
  if (g_saved == nullptr) {
    *out = -1;
    return;
  }
  long long sum = 0;
  for (int k = 0; k < n; ++k) sum += g_saved[k];
  free(g_saved);
  g_saved = nullptr;
  *out = sum;
}

int main() {
  size_t v = 0;
  CHECK(cudaDeviceGetLimit(&v, cudaLimitStackSize));
  EXPECT(v > 0, "stack size %zu", v);
  CHECK(cudaDeviceSetLimit(cudaLimitStackSize, 4096));
  CHECK(cudaDeviceGetLimit(&v, cudaLimitStackSize));
  EXPECT(v >= 4096, "stack size %zu after setting 4096", v);
  CHECK(cudaDeviceGetLimit(&v, cudaLimitPrintfFifoSize));
  EXPECT(v > 0, "printf FIFO size %zu", v);
  CHECK(cudaDeviceSetLimit(cudaLimitPrintfFifoSize, 2 << 20));
  CHECK(cudaDeviceGetLimit(&v, cudaLimitPrintfFifoSize));
  EXPECT(v >= (2u << 20), "printf FIFO size %zu after setting 2 MiB", v);
  CHECK(cudaDeviceGetLimit(&v, cudaLimitMallocHeapSize));
  EXPECT(v > 0, "malloc heap size %zu", v);
  CHECK(cudaDeviceSetLimit(cudaLimitMallocHeapSize, 16 << 20));
  CHECK(cudaDeviceGetLimit(&v, cudaLimitMallocHeapSize));
  EXPECT(v >= (16u << 20), "malloc heap size %zu after setting 16 MiB", v);

  // Recursion.
  int* dfib = nullptr;
  CHECK(cudaMalloc(&dfib, 64 * sizeof(int)));
  Recurse<<<1, 64>>>(dfib);
  CHECK_SYNC();
  int fib[64];
  CHECK(cudaMemcpy(fib, dfib, sizeof fib, cudaMemcpyDeviceToHost));
  int want_fib[16] = {0, 1};
  for (int k = 2; k < 16; ++k) want_fib[k] = want_fib[k - 1] + want_fib[k - 2];
  for (int t = 0; t < 64; ++t) EXPECT(fib[t] == want_fib[t % 16], "Fib(%d) = %d", t % 16, fib[t]);

  // In-kernel malloc/free.
  const int threads = 512;
  long long* dout = nullptr;
  int* dfail = nullptr;
  CHECK(cudaMalloc(&dout, threads * sizeof(long long)));
  CHECK(cudaMalloc(&dfail, sizeof(int)));
  CHECK(cudaMemset(dfail, 0, sizeof(int)));
  PerThreadMalloc<<<threads / 128, 128>>>(dout, dfail);
  CHECK_SYNC();
  std::vector<long long> out(threads);
  int failures = -1;
  CHECK(cudaMemcpy(out.data(), dout, threads * sizeof(long long), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(&failures, dfail, sizeof failures, cudaMemcpyDeviceToHost));
  EXPECT(failures == 0, "%d in-kernel mallocs failed", failures);
  for (int t = 0; t < threads; ++t) {
    long long count = 8 + t % 24;
    long long want = (long long)t * count * (count - 1) / 2;
    EXPECT(out[t] == want, "thread %d: sum %lld, want %lld", t, out[t], want);
  }
  const int n = 10000;
  AllocAndKeep<<<1, 32>>>(n);
  CHECK_LAUNCH();
  UseAndFree<<<1, 32>>>(n, dout);
  CHECK_SYNC();
  long long kept = 0;
  CHECK(cudaMemcpy(&kept, dout, sizeof kept, cudaMemcpyDeviceToHost));
  EXPECT(kept == 5LL * n * (n - 1) / 2, "heap block across launches: sum %lld", kept);

  CHECK(cudaFree(dfib));
  CHECK(cudaFree(dout));
  CHECK(cudaFree(dfail));
  printf("rt_device_limits: OK\n");
  return 0;
}
