// Memsets of 8, 16 and 32-bit elements (sync and async) and device-to-device copies.
#include <cstdint>
#include <cstring>

#include "check.h"

int main() {
  InitContext();
  const size_t n = 4096;
  CUdeviceptr a, b;
  CHECK(cuMemAlloc(&a, n * 4));
  CHECK(cuMemAlloc(&b, n * 4));
  std::vector<uint8_t> host(n * 4);

  CHECK(cuMemsetD8(a, 0xAB, n * 4));
  CHECK(cuMemcpyDtoH(host.data(), a, n * 4));
  for (size_t i = 0; i < n * 4; ++i) EXPECT_TRUE(host[i] == 0xAB);

  CHECK(cuMemsetD16(a, 0x1234, n * 2));
  CHECK(cuMemcpyDtoH(host.data(), a, n * 4));
  for (size_t i = 0; i < n * 2; ++i) {
    uint16_t v;
    memcpy(&v, &host[i * 2], 2);
    EXPECT_TRUE(v == 0x1234);
  }

  CUstream s;
  CHECK(cuStreamCreate(&s, 0));
  CHECK(cuMemsetD32Async(a, 0xDEADBEEF, n, s));
  CHECK(cuMemsetD8Async(b, 0, n * 4, s));
  // Copy the middle half of a into b, device to device.
  CHECK(cuMemcpyDtoDAsync(b + n, a + n, n * 2, s));
  CHECK(cuStreamSynchronize(s));
  std::vector<uint32_t> words(n);
  CHECK(cuMemcpyDtoH(words.data(), b, n * 4));
  for (size_t i = 0; i < n; ++i) {
    uint32_t expect = (i >= n / 4 && i < 3 * n / 4) ? 0xDEADBEEF : 0;
    if (words[i] != expect) {
      fprintf(stderr, "word %zu: %08x != %08x\n", i, words[i], expect);
      return 1;
    }
  }
  CHECK(cuMemcpyDtoD(a, b, n * 4));
  CHECK(cuMemsetD8(b, 7, 1));
  CHECK(cuMemcpyDtoH(words.data(), a, n * 4));
  EXPECT_TRUE(words[n / 2] == 0xDEADBEEF && words[0] == 0);

  // A copy or memset that runs past the allocation is refused and moves nothing.
  EXPECT_TRUE(cuMemsetD8(a, 1, n * 4 + 1) == CUDA_ERROR_INVALID_VALUE);
  EXPECT_TRUE(cuMemcpyHtoD(a + 8, host.data(), n * 4) == CUDA_ERROR_INVALID_VALUE);
  EXPECT_TRUE(cuMemFree(a + 4) == CUDA_ERROR_INVALID_VALUE);
  CHECK(cuMemcpyDtoH(words.data(), a, 8));
  EXPECT_TRUE(words[0] == 0);

  size_t free_before, total;
  CHECK(cuMemGetInfo(&free_before, &total));
  EXPECT_TRUE(free_before <= total && total > 0);
  CHECK(cuMemFree(a));
  CHECK(cuMemFree(b));
  size_t free_after;
  CHECK(cuMemGetInfo(&free_after, &total));
  EXPECT_TRUE(free_after >= free_before + n * 8);
  CHECK(cuStreamDestroy(s));
  printf("memset_copy: OK\n");
  return 0;
}
