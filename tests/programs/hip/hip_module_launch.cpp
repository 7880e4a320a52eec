// The module API: load a code object built with `hipcc --genco`, find a kernel and a global,
// launch with kernel parameters and with a packed argument buffer (`extra`).
#include <string.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "hip_check.h"

#ifndef RGPU_HIP_CODE_OBJECT
#error "RGPU_HIP_CODE_OBJECT must name the code object built from module_kernels.cpp"
#endif

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : RGPU_HIP_CODE_OBJECT;
  std::ifstream file(path, std::ios::binary);
  EXPECT(file.good());
  std::stringstream bytes;
  bytes << file.rdbuf();
  const std::string image = bytes.str();

  // A file that is no code object is refused without reaching a kernel.
  hipModule_t bogus;
  const char garbage[128] =
      "\x7f"
      "ELF not really";
  EXPECT(hipModuleLoadData(&bogus, garbage) != hipSuccess);
  (void)hipGetLastError();

  hipModule_t module;
  CHECK_CODE(hipModuleLoadData(&module, image.data()));
  hipModule_t from_file;
  CHECK(hipModuleLoad(&from_file, path));
  CHECK(hipModuleUnload(from_file));
  hipFunction_t fill, axpy;
  CHECK(hipModuleGetFunction(&fill, module, "fill"));
  CHECK(hipModuleGetFunction(&axpy, module, "axpy"));
  hipFunction_t missing;
  EXPECT(hipModuleGetFunction(&missing, module, "no_such_kernel") != hipSuccess);
  (void)hipGetLastError();
  hipDeviceptr_t bias;
  size_t bias_size = 0;
  CHECK(hipModuleGetGlobal(&bias, &bias_size, module, "bias"));
  EXPECT(bias_size == sizeof(float));
  const float bias_value = 0.5f;
  CHECK(hipMemcpyHtoD(bias, const_cast<float*>(&bias_value), sizeof bias_value));

  const int n = 4096;
  float *x, *y;
  CHECK(hipMalloc(&x, n * sizeof(float)));
  CHECK(hipMalloc(&y, n * sizeof(float)));
  // fill(float* out, float value, int n) with kernel parameters.
  float value = 3.0f;
  int count = n;
  void* fill_args[] = {&x, &value, &count};
  CHECK(hipModuleLaunchKernel(fill, n / 256, 1, 1, 256, 1, 1, 0, nullptr, fill_args, nullptr));
  value = 1.0f;
  void* fill_y[] = {&y, &value, &count};
  CHECK(hipModuleLaunchKernel(fill, n / 256, 1, 1, 256, 1, 1, 0, nullptr, fill_y, nullptr));
  // axpy(float a, const float* x, float* y, int n) with a packed buffer laid out as the
  // compiler lays out its kernel arguments.
  struct {
    float a;
    int pad;
    float* x;
    float* y;
    int n;
  } packed = {2.0f, 0, x, y, n};
  size_t packed_size = sizeof packed;
  void* extra[] = {HIP_LAUNCH_PARAM_BUFFER_POINTER, &packed, HIP_LAUNCH_PARAM_BUFFER_SIZE,
                   &packed_size, HIP_LAUNCH_PARAM_END};
  CHECK(hipModuleLaunchKernel(axpy, n / 256, 1, 1, 256, 1, 1, 0, nullptr, nullptr, extra));
  std::vector<float> host(n);
  CHECK(hipMemcpy(host.data(), y, n * sizeof(float), hipMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) EXPECT(host[i] == 2.0f * 3.0f + 1.0f + 0.5f);
  CHECK(hipFree(x));
  CHECK(hipFree(y));
  CHECK(hipModuleUnload(module));
  puts("hip_module_launch: ok");
  return 0;
}
