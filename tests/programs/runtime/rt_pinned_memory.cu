// Pinned host memory: cudaMallocHost and cudaHostAlloc (default, portable, write-combined) hold
// data through synchronous and asynchronous copies and a kernel; cudaHostGetFlags reports the
// flags; cudaPointerGetAttributes sees host memory; cudaFreeHost releases it.
#include "rt_check.h"

#include <cstring>

__global__ void Square(const int* in, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * in[i] - i;
}

static void RoundTrip(int* host_in, int* host_out, int n, cudaStream_t s, const char* what) {
  for (int i = 0; i < n; ++i) host_in[i] = (i % 1000) - 500;
  memset(host_out, 0, n * sizeof(int));
  int *din = nullptr, *dout = nullptr;
  CHECK(cudaMalloc(&din, n * sizeof(int)));
  CHECK(cudaMalloc(&dout, n * sizeof(int)));
  CHECK(cudaMemcpyAsync(din, host_in, n * sizeof(int), cudaMemcpyHostToDevice, s));
  Square<<<GridFor(n, 128), 128, 0, s>>>(din, dout, n);
  CHECK_LAUNCH();
  CHECK(cudaMemcpyAsync(host_out, dout, n * sizeof(int), cudaMemcpyDeviceToHost, s));
  CHECK(cudaStreamSynchronize(s));
  for (int i = 0; i < n; ++i) {
    int v = (i % 1000) - 500;
    EXPECT(host_out[i] == v * v - i, "%s: out[%d] = %d, want %d", what, i, host_out[i], v * v - i);
  }
  // The same through synchronous copies.
  memset(host_out, 0, n * sizeof(int));
  CHECK(cudaMemcpy(host_out, din, n * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) EXPECT(host_out[i] == host_in[i], "%s: sync copy [%d]", what, i);
  CHECK(cudaFree(din));
  CHECK(cudaFree(dout));
}

static void ExpectHostPointer(const void* p, const char* what) {
  cudaPointerAttributes attr;
  CHECK(cudaPointerGetAttributes(&attr, p));
  EXPECT(attr.type == cudaMemoryTypeHost, "%s: pointer type %d", what, (int)attr.type);
  EXPECT(attr.hostPointer == p, "%s: hostPointer %p, want %p", what, attr.hostPointer, p);
}

int main() {
  const int n = 50000;
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));

  int *a = nullptr, *b = nullptr;
  CHECK(cudaMallocHost(&a, n * sizeof(int)));
  CHECK(cudaMallocHost(&b, n * sizeof(int)));
  ExpectHostPointer(a, "cudaMallocHost");
  RoundTrip(a, b, n, s, "cudaMallocHost");

  int *c = nullptr, *d = nullptr;
  CHECK(cudaHostAlloc(&c, n * sizeof(int), cudaHostAllocDefault));
  CHECK(cudaHostAlloc(&d, n * sizeof(int), cudaHostAllocPortable));
  unsigned flags = 0;
  CHECK(cudaHostGetFlags(&flags, d));
  EXPECT(flags & cudaHostAllocPortable, "portable allocation has flags 0x%x", flags);
  ExpectHostPointer(c, "cudaHostAlloc default");
  ExpectHostPointer(d, "cudaHostAlloc portable");
  RoundTrip(c, d, n, s, "cudaHostAlloc");
  // A pointer inside the allocation is host memory too.
  cudaPointerAttributes attr;
  CHECK(cudaPointerGetAttributes(&attr, d + 1000));
  EXPECT(attr.type == cudaMemoryTypeHost, "interior pointer type %d", (int)attr.type);

  // Write-combined memory is only written by the host, then copied to the device.
  int* wc = nullptr;
  CHECK(cudaHostAlloc(&wc, n * sizeof(int), cudaHostAllocWriteCombined));
  CHECK(cudaHostGetFlags(&flags, wc));
  EXPECT(flags & cudaHostAllocWriteCombined, "write-combined allocation has flags 0x%x", flags);
  RoundTrip(wc, a, n, s, "write-combined");

  // Mixing pinned and pageable memory in one sequence.
  int* pageable = new int[n];
  int* dev = nullptr;
  CHECK(cudaMalloc(&dev, n * sizeof(int)));
  for (int i = 0; i < n; ++i) a[i] = i ^ 0x5555;
  CHECK(cudaMemcpyAsync(dev, a, n * sizeof(int), cudaMemcpyHostToDevice, s));
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaMemcpy(pageable, dev, n * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) EXPECT(pageable[i] == (i ^ 0x5555), "pageable [%d]", i);
  delete[] pageable;
  CHECK(cudaFree(dev));

  CHECK(cudaFreeHost(a));
  CHECK(cudaFreeHost(b));
  CHECK(cudaFreeHost(c));
  CHECK(cudaFreeHost(d));
  CHECK(cudaFreeHost(wc));
  CHECK(cudaStreamDestroy(s));
  printf("rt_pinned_memory: OK\n");
  return 0;
}
