// saxpy on two streams with events: each stream copies its half in, runs saxpy and copies out;
// events time the work and order a final cross-stream step.
#include "check.h"

int main() {
  InitContext();
  std::string ptx = ReadFile(RGPU_KERNELS_PTX);
  CUmodule module;
  CHECK(cuModuleLoadData(&module, ptx.data()));
  CUfunction fn;
  CHECK(cuModuleGetFunction(&fn, module, "saxpy"));
  const int n = 1 << 16, half = n / 2;
  std::vector<float> x(n), y(n), out(n);
  for (int i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 97);
    y[i] = static_cast<float>(i % 13);
  }
  CUdeviceptr dx, dy;
  CHECK(cuMemAlloc(&dx, n * sizeof(float)));
  CHECK(cuMemAlloc(&dy, n * sizeof(float)));
  CUstream s[2];
  CUevent start[2], stop[2];
  for (int k = 0; k < 2; ++k) {
    CHECK(cuStreamCreate(&s[k], CU_STREAM_NON_BLOCKING));
    CHECK(cuEventCreate(&start[k], CU_EVENT_DEFAULT));
    CHECK(cuEventCreate(&stop[k], CU_EVENT_DEFAULT));
  }
  float a = 2.5f;
  for (int k = 0; k < 2; ++k) {
    CUdeviceptr px = dx + k * half * sizeof(float), py = dy + k * half * sizeof(float);
    CHECK(cuEventRecord(start[k], s[k]));
    CHECK(cuMemcpyHtoDAsync(px, x.data() + k * half, half * sizeof(float), s[k]));
    CHECK(cuMemcpyHtoDAsync(py, y.data() + k * half, half * sizeof(float), s[k]));
    int count = half;
    void* args[] = {&a, &px, &py, &count};
    CHECK(cuLaunchKernel(fn, 64, 1, 1, 128, 1, 1, 0, s[k], args, nullptr));
    CHECK(cuEventRecord(stop[k], s[k]));
  }
  // Stream 0 waits for stream 1's work, then runs saxpy over the whole array once more.
  CHECK(cuStreamWaitEvent(s[0], stop[1], 0));
  int count = n;
  void* args[] = {&a, &dx, &dy, &count};
  CHECK(cuLaunchKernel(fn, 64, 1, 1, 128, 1, 1, 0, s[0], args, nullptr));
  CHECK(cuMemcpyDtoHAsync(out.data(), dy, n * sizeof(float), s[0]));
  CHECK(cuStreamSynchronize(s[0]));
  CHECK(cuStreamSynchronize(s[1]));
  EXPECT_TRUE(cuStreamQuery(s[0]) == CUDA_SUCCESS);
  EXPECT_TRUE(cuEventQuery(stop[1]) == CUDA_SUCCESS);
  for (int i = 0; i < n; ++i) {
    float expect = a * x[i] + (a * x[i] + y[i]);
    if (out[i] != expect) {
      fprintf(stderr, "mismatch at %d: %f != %f\n", i, out[i], expect);
      return 1;
    }
  }
  for (int k = 0; k < 2; ++k) {
    float ms = -1;
    CHECK(cuEventSynchronize(stop[k]));
    CHECK(cuEventElapsedTime(&ms, start[k], stop[k]));
    EXPECT_TRUE(ms >= 0.0f);
    CHECK(cuEventDestroy(start[k]));
    CHECK(cuEventDestroy(stop[k]));
    CHECK(cuStreamDestroy(s[k]));
  }
  printf("saxpy_streams: OK\n");
  return 0;
}
