// Vector addition through the driver API: module from a fat binary, three buffers, one launch.
#include "check.h"

int main() {
  CUcontext ctx = InitContext();
  CUmodule module;
  CHECK(cuModuleLoad(&module, RGPU_KERNELS_FATBIN));
  CUfunction fn;
  CHECK(cuModuleGetFunction(&fn, module, "vec_add"));
  const int n = 100000;
  std::vector<float> a(n), b(n), c(n, -1.0f);
  for (int i = 0; i < n; ++i) {
    a[i] = i * 0.5f;
    b[i] = 1000.0f - i;
  }
  CUdeviceptr da, db, dc;
  CHECK(cuMemAlloc(&da, n * sizeof(float)));
  CHECK(cuMemAlloc(&db, n * sizeof(float)));
  CHECK(cuMemAlloc(&dc, n * sizeof(float)));
  CHECK(cuMemcpyHtoD(da, a.data(), n * sizeof(float)));
  CHECK(cuMemcpyHtoD(db, b.data(), n * sizeof(float)));
  int count = n;
  void* args[] = {&da, &db, &dc, &count};
  CHECK(cuLaunchKernel(fn, (n + 255) / 256, 1, 1, 256, 1, 1, 0, nullptr, args, nullptr));
  CHECK(cuCtxSynchronize());
  CHECK(cuMemcpyDtoH(c.data(), dc, n * sizeof(float)));
  for (int i = 0; i < n; ++i) {
    if (c[i] != a[i] + b[i]) {
      fprintf(stderr, "mismatch at %d: %f != %f\n", i, c[i], a[i] + b[i]);
      return 1;
    }
  }
  CHECK(cuMemFree(da));
  CHECK(cuMemFree(db));
  CHECK(cuMemFree(dc));
  CHECK(cuModuleUnload(module));
  CHECK(cuCtxDestroy(ctx));
  printf("vector_add: %d elements OK\n", n);
  return 0;
}
