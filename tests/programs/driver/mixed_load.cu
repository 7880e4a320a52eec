// Mixed work of one tenant among many (argv[1] = seed): allocations of varied sizes, copies both
// ways, memsets, kernel launches on two streams, frees, and deliberate errors (a foreign pointer,
// a double free), for a few thousand calls; every result is checked and everything is freed.
#include <cstdlib>

#include "check.h"

int main(int argc, char** argv) {
  unsigned seed = argc > 1 ? atoi(argv[1]) : 1;
  auto next = [&seed] { return seed = seed * 1103515245u + 12345u; };
  InitContext();
  CUmodule m;
  CHECK(cuModuleLoad(&m, RGPU_KERNELS_FATBIN));
  CUfunction vec_add;
  CHECK(cuModuleGetFunction(&vec_add, m, "vec_add"));
  CUstream s[2];
  for (auto& st : s) CHECK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
  int calls = 0;
  for (int round = 0; round < 60; ++round) {
    const int n = 256 + next() % 4096;
    CUdeviceptr a, b, c;
    CHECK(cuMemAlloc(&a, n * sizeof(float)));
    CHECK(cuMemAlloc(&b, n * sizeof(float)));
    CHECK(cuMemAlloc(&c, n * sizeof(float)));
    std::vector<float> ha(n), hb(n), hc(n);
    for (int i = 0; i < n; ++i) {
      ha[i] = static_cast<float>(next() % 1000);
      hb[i] = static_cast<float>(next() % 1000);
    }
    CUstream st = s[round % 2];
    CHECK(cuMemcpyHtoDAsync(a, ha.data(), n * sizeof(float), st));
    CHECK(cuMemcpyHtoDAsync(b, hb.data(), n * sizeof(float), st));
    CHECK(cuMemsetD32Async(c, 0, n, st));
    void* args[] = {&a, &b, &c, const_cast<int*>(&n)};
    CHECK(cuLaunchKernel(vec_add, (n + 127) / 128, 1, 1, 128, 1, 1, 0, st, args, nullptr));
    CHECK(cuMemcpyDtoHAsync(hc.data(), c, n * sizeof(float), st));
    CHECK(cuStreamSynchronize(st));
    for (int i = 0; i < n; ++i) EXPECT_TRUE(hc[i] == ha[i] + hb[i]);
    // Errors the driver reports without harm: an address that is not an allocation, a double
    // free, a copy past the end.
    EXPECT_TRUE(cuMemFree(a + 4) == CUDA_ERROR_INVALID_VALUE);
    EXPECT_TRUE(cuMemcpyHtoD(c, ha.data(), (n + 1) * sizeof(float)) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemFree(a));
    EXPECT_TRUE(cuMemFree(a) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemFree(b));
    CHECK(cuMemFree(c));
    calls += 16;
  }
  for (auto& st : s) CHECK(cuStreamDestroy(st));
  CHECK(cuModuleUnload(m));
  printf("mixed_load %d: %d calls OK\n", argc > 1 ? atoi(argv[1]) : 1, calls);
  return 0;
}
