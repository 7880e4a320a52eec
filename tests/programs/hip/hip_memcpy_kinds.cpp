// Copies of every kind, by the runtime's and the driver-style entry points.
#include <string.h>

#include <vector>

#include "hip_check.h"

int main() {
  const size_t n = 1 << 20;
  std::vector<unsigned char> a(n), b(n, 0), c(n, 0);
  for (size_t i = 0; i < n; ++i) a[i] = static_cast<unsigned char>(i * 7 + 3);
  void *d1, *d2;
  CHECK(hipMalloc(&d1, n));
  CHECK(hipMalloc(&d2, n));
  CHECK(hipMemcpy(d1, a.data(), n, hipMemcpyHostToDevice));
  CHECK(hipMemcpy(d2, d1, n, hipMemcpyDeviceToDevice));
  CHECK(hipMemcpy(b.data(), d2, n, hipMemcpyDeviceToHost));
  EXPECT(memcmp(a.data(), b.data(), n) == 0);
  // hipMemcpyDefault infers the direction from the addresses.
  memset(b.data(), 0, n);
  CHECK(hipMemcpy(d2, a.data() + 1, n - 1, hipMemcpyDefault));
  CHECK(hipMemcpy(b.data(), d2, n - 1, hipMemcpyDefault));
  EXPECT(memcmp(a.data() + 1, b.data(), n - 1) == 0);
  CHECK(hipMemcpy(c.data(), a.data(), n, hipMemcpyHostToHost));
  EXPECT(memcmp(a.data(), c.data(), n) == 0);
  // The driver-style copies.
  memset(b.data(), 0, n);
  CHECK(hipMemcpyHtoD(d1, a.data() + 100, 4096));
  CHECK(hipMemcpyDtoD(static_cast<char*>(d2) + 8, d1, 4096));
  CHECK(hipMemcpyDtoH(b.data(), static_cast<char*>(d2) + 8, 4096));
  EXPECT(memcmp(a.data() + 100, b.data(), 4096) == 0);
  // Zero bytes is nothing; a bad direction is refused.
  CHECK(hipMemcpy(d1, a.data(), 0, hipMemcpyHostToDevice));
  EXPECT_ERROR(hipMemcpy(d1, a.data(), 16, static_cast<hipMemcpyKind>(17)),
               hipErrorInvalidMemcpyDirection);
  EXPECT(hipGetLastError() == hipErrorInvalidMemcpyDirection);
  EXPECT(hipGetLastError() == hipSuccess);
  // A copy past the end of an allocation fails and leaves the program running.
  EXPECT(hipMemcpy(b.data(), d1, n + 4096, hipMemcpyDeviceToHost) != hipSuccess);
  CHECK(hipFree(d1));
  CHECK(hipFree(d2));
  CHECK(hipFree(nullptr));
  puts("hip_memcpy_kinds: ok");
  return 0;
}
