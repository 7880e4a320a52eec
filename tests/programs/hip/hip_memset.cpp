// Memsets of 8, 16 and 32-bit values, synchronous and on a stream, and of a pitched 2D region.
#include <vector>

#include "hip_check.h"

int main() {
  const size_t n = 65536;
  void* d;
  CHECK(hipMalloc(&d, n * 4));
  std::vector<unsigned char> h8(n * 4);
  CHECK(hipMemset(d, 0xab, n * 4));
  CHECK(hipMemcpy(h8.data(), d, n * 4, hipMemcpyDeviceToHost));
  for (unsigned char v : h8) EXPECT(v == 0xab);

  CHECK(hipMemsetD32(d, 0x12345678, n));
  std::vector<unsigned> h32(n);
  CHECK(hipMemcpy(h32.data(), d, n * 4, hipMemcpyDeviceToHost));
  for (unsigned v : h32) EXPECT(v == 0x12345678u);

  CHECK(hipMemsetD16(d, 0xbeef, 2 * n));
  std::vector<unsigned short> h16(2 * n);
  CHECK(hipMemcpy(h16.data(), d, n * 4, hipMemcpyDeviceToHost));
  for (unsigned short v : h16) EXPECT(v == 0xbeef);

  CHECK(hipMemsetD8(d, 0x5a, 100));
  CHECK(hipMemcpy(h8.data(), d, 102, hipMemcpyDeviceToHost));
  for (int i = 0; i < 100; ++i) EXPECT(h8[i] == 0x5a);
  EXPECT(h8[100] == 0xef && h8[101] == 0xbe);  // beyond the memset: untouched

  hipStream_t s;
  CHECK(hipStreamCreate(&s));
  CHECK(hipMemsetAsync(d, 0x11, n, s));
  CHECK(hipMemsetD32Async(static_cast<char*>(d) + n, 7, n / 4, s));
  CHECK(hipMemsetD16Async(static_cast<char*>(d) + 2 * n, 9, n / 2, s));
  CHECK(hipMemsetD8Async(static_cast<char*>(d) + 3 * n, 0x22, n, s));
  CHECK(hipMemcpyAsync(h8.data(), d, n * 4, hipMemcpyDeviceToHost, s));
  CHECK(hipStreamSynchronize(s));
  for (size_t i = 0; i < n; ++i) EXPECT(h8[i] == 0x11);
  for (size_t i = n; i < 2 * n; i += 4) EXPECT(h8[i] == 7 && h8[i + 1] == 0);
  for (size_t i = 2 * n; i < 3 * n; i += 2) EXPECT(h8[i] == 9 && h8[i + 1] == 0);
  for (size_t i = 3 * n; i < 4 * n; ++i) EXPECT(h8[i] == 0x22);
  CHECK(hipStreamDestroy(s));

  // 2D: only `width` bytes of each of `height` rows are set.
  void* p;
  size_t pitch = 0;
  const size_t width = 100, height = 16;
  CHECK(hipMallocPitch(&p, &pitch, width, height));
  EXPECT(pitch >= width);
  CHECK(hipMemset(p, 0, pitch * height));
  CHECK(hipMemset2D(p, pitch, 0x7f, width - 10, height));
  std::vector<unsigned char> rows(pitch * height);
  CHECK(hipMemcpy(rows.data(), p, pitch * height, hipMemcpyDeviceToHost));
  for (size_t r = 0; r < height; ++r) {
    for (size_t c = 0; c < pitch; ++c) EXPECT(rows[r * pitch + c] == (c < width - 10 ? 0x7f : 0));
  }
  CHECK(hipFree(p));
  CHECK(hipFree(d));
  puts("hip_memset: ok");
  return 0;
}
