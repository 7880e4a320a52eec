// What the driver-API benchmarks share: CK (a driver call that must succeed, else the benchmark
// ends naming it) and Now (monotonic seconds).
#pragma once

#include <cuda.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#define CK(call)                                                                 \
  do {                                                                           \
    CUresult r_ = (call);                                                        \
    if (r_ != CUDA_SUCCESS) {                                                    \
      const char* name_ = nullptr;                                               \
      cuGetErrorName(r_, &name_);                                                \
      fprintf(stderr, "%s failed: %s\n", #call, name_ != nullptr ? name_ : "?"); \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

inline double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
