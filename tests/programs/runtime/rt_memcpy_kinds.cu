// Every cudaMemcpy kind: HostToDevice, DeviceToHost, DeviceToDevice (whole and at offsets),
// HostToHost, and cudaMemcpyDefault in all four directions; sizes from 1 byte to a few MiB.
#include "rt_check.h"

#include <cstdint>
#include <cstring>
#include <vector>

__global__ void AddOne(unsigned* p, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1;
}

static void Fill(std::vector<unsigned char>& v, unsigned seed) {
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = (unsigned char)((i * 131 + seed * 7 + (i >> 9)) & 0xff);
}

int main() {
  const size_t sizes[] = {1, 3, 4096, 65537, 3 * 1024 * 1024 + 5};
  for (size_t n : sizes) {
    std::vector<unsigned char> src(n), back(n, 0), hh(n, 0);
    Fill(src, (unsigned)n);
    unsigned char *a = nullptr, *b = nullptr;
    CHECK(cudaMalloc(&a, n));
    CHECK(cudaMalloc(&b, n));
    CHECK(cudaMemcpy(a, src.data(), n, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice));
    CHECK(cudaMemcpy(back.data(), b, n, cudaMemcpyDeviceToHost));
    EXPECT(memcmp(back.data(), src.data(), n) == 0, "H->D->D->H round trip of %zu bytes", n);
    CHECK(cudaMemcpy(hh.data(), src.data(), n, cudaMemcpyHostToHost));
    EXPECT(memcmp(hh.data(), src.data(), n) == 0, "HostToHost of %zu bytes", n);

    // cudaMemcpyDefault infers each direction from the pointers.
    std::vector<unsigned char> src2(n), back2(n, 0), hh2(n, 0);
    Fill(src2, (unsigned)n + 99);
    CHECK(cudaMemcpy(a, src2.data(), n, cudaMemcpyDefault));
    CHECK(cudaMemcpy(b, a, n, cudaMemcpyDefault));
    CHECK(cudaMemcpy(back2.data(), b, n, cudaMemcpyDefault));
    EXPECT(memcmp(back2.data(), src2.data(), n) == 0, "Default round trip of %zu bytes", n);
    CHECK(cudaMemcpy(hh2.data(), back2.data(), n, cudaMemcpyDefault));
    EXPECT(memcmp(hh2.data(), src2.data(), n) == 0, "Default host to host of %zu bytes", n);
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
  }

  // Copies at offsets inside allocations, mixed with a kernel that changes the data.
  const size_t n = 10000;
  std::vector<unsigned> h(n), out(n, 0), want(n);
  for (size_t i = 0; i < n; ++i) h[i] = (unsigned)(i * 2654435761u);
  unsigned *d = nullptr, *e = nullptr;
  CHECK(cudaMalloc(&d, n * sizeof(unsigned)));
  CHECK(cudaMalloc(&e, n * sizeof(unsigned)));
  CHECK(cudaMemset(e, 0, n * sizeof(unsigned)));
  CHECK(cudaMemcpy(d, h.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice));
  AddOne<<<GridFor(n, 256), 256>>>(d, n);
  CHECK_LAUNCH();
  // e[100 .. 100+5000) = d[3000 .. 8000), the rest of e stays zero.
  CHECK(cudaMemcpy(e + 100, d + 3000, 5000 * sizeof(unsigned), cudaMemcpyDeviceToDevice));
  CHECK(cudaMemcpy(out.data(), e, n * sizeof(unsigned), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; ++i) want[i] = (i >= 100 && i < 5100) ? h[i - 100 + 3000] + 1 : 0;
  ExpectEqualArrays("offset DtoD", out.data(), want.data(), n);
  // Partial DtoH from an offset.
  std::vector<unsigned> part(7, 0);
  CHECK(cudaMemcpy(part.data(), d + 9990, 7 * sizeof(unsigned), cudaMemcpyDeviceToHost));
  for (int i = 0; i < 7; ++i) EXPECT(part[i] == h[9990 + i] + 1, "partial copy [%d]", i);
  // A zero-byte copy is a no-op that succeeds.
  CHECK(cudaMemcpy(part.data(), d, 0, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(d, part.data(), 0, cudaMemcpyHostToDevice));
  CHECK(cudaFree(d));
  CHECK(cudaFree(e));
  printf("rt_memcpy_kinds: OK\n");
  return 0;
}
