// Context-independent libraries (cuLibrary*, cuKernel*), as CUDA 12+ runtimes use them: a library
// loaded from a file before any context exists; its kernels counted and enumerated; each kernel's
// name and library; one enumerated kernel launched (as a CUkernel and through cuKernelGetFunction)
// and its answer checked; a second load of the same file a library of its own, whose kernels
// are refused once it is unloaded; and the errors for null pointers and a file that does not
// exist.
#include <set>

#include "check.h"

int main() {
  CHECK(cuInit(0));
  CUlibrary lib;
  EXPECT_TRUE(cuLibraryLoadFromFile(&lib, "/nonexistent/kernels.fatbin", nullptr, nullptr, 0,
                                    nullptr, nullptr, 0) != CUDA_SUCCESS);
  EXPECT_TRUE(cuLibraryLoadFromFile(nullptr, RGPU_KERNELS_FATBIN, nullptr, nullptr, 0, nullptr,
                                    nullptr, 0) == CUDA_ERROR_INVALID_VALUE);
  // Loaded before a context exists, as cudart registers its images.
  CHECK(cuLibraryLoadFromFile(&lib, RGPU_KERNELS_FATBIN, nullptr, nullptr, 0, nullptr, nullptr, 0));
  InitContext();

  // As many kernels as the library's module in this context has functions.
  unsigned count = 0;
  CHECK(cuLibraryGetKernelCount(&count, lib));
  CUmodule module;
  CHECK(cuLibraryGetModule(&module, lib));
  unsigned functions = 0;
  CHECK(cuModuleGetFunctionCount(&functions, module));
  EXPECT_TRUE(count == functions && count > 0);
  EXPECT_TRUE(cuLibraryGetKernelCount(nullptr, lib) == CUDA_ERROR_INVALID_VALUE);

  std::vector<CUkernel> kernels(count + 2, nullptr);
  CHECK(cuLibraryEnumerateKernels(kernels.data(), count + 2, lib));
  EXPECT_TRUE(kernels[count] == nullptr && kernels[count + 1] == nullptr);  // only `count` written
  std::set<std::string> names;
  CUkernel vec_add = nullptr;
  for (unsigned i = 0; i < count; ++i) {
    const char* name = nullptr;
    CHECK(cuKernelGetName(&name, kernels[i]));
    EXPECT_TRUE(name != nullptr && *name != '\0');
    names.insert(name);
    if (strcmp(name, "vec_add") == 0) vec_add = kernels[i];
    CUlibrary owner = nullptr;
    CHECK(cuKernelGetLibrary(&owner, kernels[i]));
    EXPECT_TRUE(owner == lib);
  }
  EXPECT_TRUE(names.size() == count);  // each kernel once
  EXPECT_TRUE(names.count("saxpy") == 1 && names.count("empty_kernel") == 1);
  EXPECT_TRUE(vec_add != nullptr);
  // Fewer slots than kernels: only that many are written.
  CUkernel first[2] = {nullptr, nullptr};
  CHECK(cuLibraryEnumerateKernels(first, 1, lib));
  EXPECT_TRUE(first[0] == kernels[0] && first[1] == nullptr);
  EXPECT_TRUE(cuLibraryEnumerateKernels(nullptr, 1, lib) == CUDA_ERROR_INVALID_VALUE);
  const char* name = nullptr;
  EXPECT_TRUE(cuKernelGetName(nullptr, vec_add) == CUDA_ERROR_INVALID_VALUE);
  CUlibrary owner = nullptr;
  EXPECT_TRUE(cuKernelGetLibrary(nullptr, vec_add) == CUDA_ERROR_INVALID_VALUE);
  // The kernel named again is the kernel enumerated.
  CUkernel again = nullptr;
  CHECK(cuLibraryGetKernel(&again, lib, "vec_add"));
  CHECK(cuKernelGetName(&name, again));
  EXPECT_TRUE(strcmp(name, "vec_add") == 0);

  // The enumerated kernel runs, launched as a CUkernel and as its function in this context.
  const int n = 1000;
  std::vector<float> a(n), b(n), c(n);
  for (int i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i);
    b[i] = static_cast<float>(2 * i);
  }
  CUdeviceptr da, db, dc;
  CHECK(cuMemAlloc(&da, n * sizeof(float)));
  CHECK(cuMemAlloc(&db, n * sizeof(float)));
  CHECK(cuMemAlloc(&dc, n * sizeof(float)));
  CHECK(cuMemcpyHtoD(da, a.data(), n * sizeof(float)));
  CHECK(cuMemcpyHtoD(db, b.data(), n * sizeof(float)));
  int count_arg = n;
  void* args[] = {&da, &db, &dc, &count_arg};
  CHECK(cuLaunchKernel(reinterpret_cast<CUfunction>(vec_add), (n + 127) / 128, 1, 1, 128, 1, 1, 0,
                       nullptr, args, nullptr));
  CHECK(cuMemcpyDtoH(c.data(), dc, n * sizeof(float)));
  for (int i = 0; i < n; ++i) EXPECT_TRUE(c[i] == 3.0f * i);
  CUfunction fn;
  CHECK(cuKernelGetFunction(&fn, vec_add));
  CHECK(cuMemsetD32(dc, 0, n));
  CHECK(cuLaunchKernel(fn, (n + 127) / 128, 1, 1, 128, 1, 1, 0, nullptr, args, nullptr));
  CHECK(cuMemcpyDtoH(c.data(), dc, n * sizeof(float)));
  for (int i = 0; i < n; ++i) EXPECT_TRUE(c[i] == 3.0f * i);

  // A library loaded again is a library of its own, with the same kernels.
  CUlibrary second;
  CHECK(cuLibraryLoadFromFile(&second, RGPU_KERNELS_FATBIN, nullptr, nullptr, 0, nullptr, nullptr,
                              0));
  unsigned second_count = 0;
  CHECK(cuLibraryGetKernelCount(&second_count, second));
  EXPECT_TRUE(second_count == count);
  CUkernel other = nullptr;
  CHECK(cuLibraryGetKernel(&other, second, "vec_add"));
  CHECK(cuKernelGetLibrary(&owner, other));
  EXPECT_TRUE(owner == second);
  CHECK(cuLibraryUnload(second));
  // Its kernels went with it (rgpu's client answers for the handles it handed out).
  EXPECT_TRUE(cuKernelGetName(&name, other) == CUDA_ERROR_INVALID_HANDLE);
  EXPECT_TRUE(cuKernelGetLibrary(&owner, other) == CUDA_ERROR_INVALID_HANDLE);
  EXPECT_TRUE(cuKernelGetFunction(&fn, other) == CUDA_ERROR_INVALID_HANDLE);
  CHECK(cuLibraryUnload(lib));
  CHECK(cuMemFree(da));
  CHECK(cuMemFree(db));
  CHECK(cuMemFree(dc));
  printf("library: OK (%u kernels)\n", count);
  return 0;
}
