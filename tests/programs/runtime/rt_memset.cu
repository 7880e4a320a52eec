// cudaMemset and cudaMemsetAsync: whole buffers, unaligned sub-ranges, only the low byte of the
// value is used, and a kernel sees the bytes the memset wrote.
#include "rt_check.h"

#include <vector>

// Counts the bytes of p[0..n) equal to `value` into *count.
__global__ void CountBytes(const unsigned char* p, size_t n, unsigned char value, int* count) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n && p[i] == value) atomicAdd(count, 1);
}

int main() {
  const size_t n = 60001;
  unsigned char* d = nullptr;
  int* count = nullptr;
  CHECK(cudaMalloc(&d, n));
  CHECK(cudaMalloc(&count, sizeof(int)));
  std::vector<unsigned char> h(n), want(n);

  CHECK(cudaMemset(d, 0xAB, n));
  for (size_t i = 0; i < n; ++i) want[i] = 0xAB;
  // Sub-ranges at odd offsets and lengths; the value's high bits are ignored.
  CHECK(cudaMemset(d + 1, 0x1FF, 17));
  for (size_t i = 1; i < 18; ++i) want[i] = 0xFF;
  CHECK(cudaMemset(d + 4097, 0, 30001));
  for (size_t i = 4097; i < 34098; ++i) want[i] = 0;
  CHECK(cudaMemset(d + n - 3, 0x7, 3));
  for (size_t i = n - 3; i < n; ++i) want[i] = 0x7;
  CHECK(cudaMemcpy(h.data(), d, n, cudaMemcpyDeviceToHost));
  ExpectEqualArrays("memset", h.data(), want.data(), n);

  // A kernel sees the memset bytes.
  CHECK(cudaMemset(count, 0, sizeof(int)));
  CountBytes<<<GridFor(n, 256), 256>>>(d, n, 0xAB, count);
  CHECK_LAUNCH();
  int got = -1;
  CHECK(cudaMemcpy(&got, count, sizeof got, cudaMemcpyDeviceToHost));
  int expected = 0;
  for (size_t i = 0; i < n; ++i) expected += want[i] == 0xAB;
  EXPECT(got == expected, "kernel counted %d bytes of 0xAB, expected %d", got, expected);

  // Async memsets on a stream, ordered with a copy on the same stream.
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  CHECK(cudaMemsetAsync(d, 0x5A, n, s));
  CHECK(cudaMemsetAsync(d + 1000, 0xC3, 1000, s));
  unsigned char* pinned = nullptr;
  CHECK(cudaMallocHost(&pinned, n));
  CHECK(cudaMemcpyAsync(pinned, d, n, cudaMemcpyDeviceToHost, s));
  CHECK(cudaStreamSynchronize(s));
  for (size_t i = 0; i < n; ++i) {
    unsigned char w = (i >= 1000 && i < 2000) ? 0xC3 : 0x5A;
    EXPECT(pinned[i] == w, "async memset byte %zu = 0x%x, want 0x%x", i, pinned[i], w);
  }
  // A memset of a 32-bit buffer to zero, read as integers.
  int* ints = nullptr;
  CHECK(cudaMalloc(&ints, 1024 * sizeof(int)));
  CHECK(cudaMemsetAsync(ints, 0xFF, 1024 * sizeof(int), s));
  std::vector<int> hi(1024, 0);
  CHECK(cudaMemcpyAsync(hi.data(), ints, 1024 * sizeof(int), cudaMemcpyDeviceToHost, s));
  CHECK(cudaStreamSynchronize(s));
  for (int i = 0; i < 1024; ++i) EXPECT(hi[i] == -1, "int %d = %d", i, hi[i]);

  CHECK(cudaFreeHost(pinned));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(ints));
  CHECK(cudaFree(count));
  CHECK(cudaFree(d));
  printf("rt_memset: OK\n");
  return 0;
}
