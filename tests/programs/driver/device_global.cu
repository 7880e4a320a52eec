// A __device__ global written and read through cuModuleGetGlobal, used by a kernel.
#include "check.h"

int main() {
  InitContext();
  CUmodule module;
  std::string image = ReadFile(RGPU_KERNELS_FATBIN);
  CHECK(cuModuleLoadData(&module, image.data()));
  CUdeviceptr scale, hits;
  size_t scale_bytes, hits_bytes;
  CHECK(cuModuleGetGlobal(&scale, &scale_bytes, module, "g_scale"));
  CHECK(cuModuleGetGlobal(&hits, &hits_bytes, module, "g_hits"));
  EXPECT_TRUE(scale_bytes == sizeof(float));
  EXPECT_TRUE(hits_bytes == 256 * sizeof(int));
  EXPECT_TRUE(cuModuleGetGlobal(&scale, &scale_bytes, module, "no_such_symbol") ==
              CUDA_ERROR_NOT_FOUND);
  float factor = 3.0f;
  CHECK(cuMemcpyHtoD(scale, &factor, sizeof factor));
  CHECK(cuMemsetD32(hits, 0, 256));
  const int n = 1000;
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(i);
  CUdeviceptr dx;
  CHECK(cuMemAlloc(&dx, n * sizeof(float)));
  CHECK(cuMemcpyHtoD(dx, x.data(), n * sizeof(float)));
  CUfunction fn;
  CHECK(cuModuleGetFunction(&fn, module, "apply_scale"));
  int count = n;
  void* args[] = {&dx, &count};
  CHECK(cuLaunchKernel(fn, (n + 127) / 128, 1, 1, 128, 1, 1, 0, nullptr, args, nullptr));
  CHECK(cuMemcpyDtoH(x.data(), dx, n * sizeof(float)));
  for (int i = 0; i < n; ++i) EXPECT_TRUE(x[i] == 3.0f * i);
  std::vector<int> h(256);
  CHECK(cuMemcpyDtoH(h.data(), hits, hits_bytes));
  for (int i = 0; i < 256; ++i) EXPECT_TRUE(h[i] == n / 256 + (i < n % 256 ? 1 : 0));
  float back = 0;
  CHECK(cuMemcpyDtoH(&back, scale, sizeof back));
  EXPECT_TRUE(back == 3.0f);
  printf("device_global: OK\n");
  return 0;
}
