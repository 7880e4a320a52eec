// Helpers for the softgpu tests: error-checked driver calls, kernel files and a fixture that
// owns a context with the test kernels loaded.
#pragma once

#include <cuda.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace softgpu_test {

inline std::string Name(CUresult r) {
  const char* name = nullptr;
  cuGetErrorName(r, &name);
  return name != nullptr ? name : "?";
}

#define CU_ASSERT_OK(expr)                                                                      \
  do {                                                                                          \
    const CUresult cu_result_ = (expr);                                                         \
    ASSERT_EQ(cu_result_, CUDA_SUCCESS) << #expr << " -> " << ::softgpu_test::Name(cu_result_); \
  } while (0)

#define CU_EXPECT_EQ(expr, want)                                                        \
  do {                                                                                  \
    const CUresult cu_result_ = (expr);                                                 \
    EXPECT_EQ(cu_result_, want) << #expr << " -> " << ::softgpu_test::Name(cu_result_); \
  } while (0)

// Contents of a file produced by the build in SOFTGPU_KERNEL_DIR ("" if missing).
inline std::string KernelFile(const std::string& name) {
  std::ifstream in(std::string(SOFTGPU_KERNEL_DIR) + "/" + name, std::ios::binary);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A context on device 0 with a kernel file loaded: test_kernels.ptx, or the one a subclass names.
class KernelTest : public ::testing::Test {
 protected:
  virtual const char* PtxFile() const { return "test_kernels.ptx"; }

  void SetUp() override {
    ptx_ = KernelFile(PtxFile());
    if (ptx_.empty()) GTEST_SKIP() << PtxFile() << " was not built (no nvcc)";
    CU_ASSERT_OK(cuInit(0));
    CU_ASSERT_OK(cuCtxCreate(&ctx_, nullptr, 0, 0));
    CU_ASSERT_OK(cuModuleLoadData(&module_, ptx_.c_str()));
  }
  void TearDown() override {
    if (ctx_ != nullptr) {
      EXPECT_EQ(cuCtxDestroy(ctx_), CUDA_SUCCESS);
    }
  }

  CUfunction Function(const char* name) {
    CUfunction f = nullptr;
    EXPECT_EQ(cuModuleGetFunction(&f, module_, name), CUDA_SUCCESS) << name;
    return f;
  }

  template <typename T>
  CUdeviceptr Upload(const std::vector<T>& host) {
    CUdeviceptr d = 0;
    EXPECT_EQ(cuMemAlloc(&d, host.size() * sizeof(T)), CUDA_SUCCESS);
    EXPECT_EQ(cuMemcpyHtoD(d, host.data(), host.size() * sizeof(T)), CUDA_SUCCESS);
    return d;
  }

  template <typename T>
  std::vector<T> Download(CUdeviceptr d, size_t count) {
    std::vector<T> host(count);
    EXPECT_EQ(cuMemcpyDtoH(host.data(), d, count * sizeof(T)), CUDA_SUCCESS);
    return host;
  }

  CUresult Launch(CUfunction f, unsigned grid, unsigned block, std::vector<void*> args,
                  unsigned shared = 0, CUstream stream = nullptr) {
    return cuLaunchKernel(f, grid, 1, 1, block, 1, 1, shared, stream, args.data(), nullptr);
  }

  std::string ptx_;
  CUcontext ctx_ = nullptr;
  CUmodule module_ = nullptr;
};

}  // namespace softgpu_test
