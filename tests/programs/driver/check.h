// Shared helpers for the driver-API test programs: every call is checked, and a failure prints
// the call, its error name and exits non-zero.
#pragma once

#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CHECK(call)                                                             \
  do {                                                                          \
    CUresult check_result_ = (call);                                            \
    if (check_result_ != CUDA_SUCCESS) {                                        \
      const char* check_name_ = nullptr;                                        \
      cuGetErrorName(check_result_, &check_name_);                              \
      fprintf(stderr, "%s:%d: %s failed: %d (%s)\n", __FILE__, __LINE__, #call, \
              (int)check_result_, check_name_ ? check_name_ : "?");             \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)

#define EXPECT_TRUE(cond)                                                            \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      fprintf(stderr, "%s:%d: expectation failed: %s\n", __FILE__, __LINE__, #cond); \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)

// The test kernels, built by the test build into a fat binary and a PTX file; RGPU_KERNELS_DIR
// names another folder holding them (a test bundle unpacked elsewhere: tests/gpu/).
#ifndef RGPU_KERNELS_FATBIN_PATH
#error "RGPU_KERNELS_FATBIN_PATH must name the kernels' fat binary"
#endif
inline const char* KernelsFile(const char* built, std::string* moved) {
  const char* dir = getenv("RGPU_KERNELS_DIR");
  if (dir == nullptr || *dir == '\0') return built;
  const char* slash = strrchr(built, '/');
  *moved = std::string(dir) + "/" + (slash != nullptr ? slash + 1 : built);
  return moved->c_str();
}
inline const char* KernelsFatbin() {
  static std::string moved;
  static const char* path = KernelsFile(RGPU_KERNELS_FATBIN_PATH, &moved);
  return path;
}
inline const char* KernelsPtx() {
  static std::string moved;
  static const char* path = KernelsFile(RGPU_KERNELS_PTX_PATH, &moved);
  return path;
}
#define RGPU_KERNELS_FATBIN KernelsFatbin()
#define RGPU_KERNELS_PTX KernelsPtx()

// Initializes the driver and makes a new context on device 0 current.
inline CUcontext InitContext() {
  CHECK(cuInit(0));
  CUdevice dev;
  CHECK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CHECK(cuCtxCreate(&ctx, nullptr, 0, dev));
  return ctx;
}

// Reads a whole file (e.g. the PTX or fat binary), NUL-terminated.
inline std::string ReadFile(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f == nullptr) {
    fprintf(stderr, "cannot open %s\n", path);
    exit(1);
  }
  std::string data;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) data.append(buf, n);
  fclose(f);
  data.push_back('\0');
  return data;
}
