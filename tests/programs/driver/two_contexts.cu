// Two contexts, each used from its own thread at the same time; each thread's current context is
// its own, and memory of one context is not usable in the other.
#include <thread>

#include "check.h"

static void Work(CUcontext ctx, int seed, int* status) {
  CHECK(cuCtxSetCurrent(ctx));
  CUcontext current = nullptr;
  CHECK(cuCtxGetCurrent(&current));
  EXPECT_TRUE(current == ctx);
  CUmodule module;
  CHECK(cuModuleLoad(&module, RGPU_KERNELS_FATBIN));
  CUfunction fn;
  CHECK(cuModuleGetFunction(&fn, module, "add_one_f64"));
  const int n = 5000;
  std::vector<double> x(n);
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < n; ++i) x[i] = seed * 1000.0 + i + round;
    CUdeviceptr d;
    CHECK(cuMemAlloc(&d, n * sizeof(double)));
    CHECK(cuMemcpyHtoD(d, x.data(), n * sizeof(double)));
    int count = n;
    void* args[] = {&d, &count};
    CHECK(cuLaunchKernel(fn, (n + 63) / 64, 1, 1, 64, 1, 1, 0, nullptr, args, nullptr));
    CHECK(cuMemcpyDtoH(x.data(), d, n * sizeof(double)));
    for (int i = 0; i < n; ++i) EXPECT_TRUE(x[i] == (seed * 1000.0 + i + round) * 2.0 + 1.0);
    CHECK(cuMemFree(d));
  }
  *status = 0;
}

int main() {
  CHECK(cuInit(0));
  CUdevice dev;
  CHECK(cuDeviceGet(&dev, 0));
  CUcontext a, b;
  CHECK(cuCtxCreate(&a, nullptr, 0, dev));
  CHECK(cuCtxCreate(&b, nullptr, 0, dev));
  // Memory of context a is not memory of context b.
  CHECK(cuCtxSetCurrent(a));
  CUdeviceptr pa;
  CHECK(cuMemAlloc(&pa, 1024));
  CHECK(cuCtxSetCurrent(b));
  EXPECT_TRUE(cuMemsetD8(pa, 1, 1024) == CUDA_ERROR_INVALID_VALUE);
  EXPECT_TRUE(cuMemFree(pa) == CUDA_ERROR_INVALID_VALUE);
  CHECK(cuCtxSetCurrent(nullptr));

  int status_a = 1, status_b = 1;
  std::thread ta(Work, a, 1, &status_a), tb(Work, b, 2, &status_b);
  ta.join();
  tb.join();
  EXPECT_TRUE(status_a == 0 && status_b == 0);
  CHECK(cuCtxPushCurrent(a));
  CUcontext popped;
  CHECK(cuCtxPopCurrent(&popped));
  EXPECT_TRUE(popped == a);
  CHECK(cuCtxDestroy(a));
  CHECK(cuCtxDestroy(b));
  printf("two_contexts: OK\n");
  return 0;
}
