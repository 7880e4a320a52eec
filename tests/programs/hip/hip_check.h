// Checks shared by the HIP test programs. Each program is an ordinary HIP program that knows
// nothing of rgpu; it checks its own results and exits 0 when all hold.
// A kernel launch that the device refuses with hipErrorNoBinaryForGpu (the server's GPU cannot
// run AMDGPU code, e.g. the software GPU) ends the program with kExitNoBinary and a line saying
// so, which the e2e tests expect where no AMD GPU serves.
#pragma once

#include <hip/hip_runtime.h>
#include <stdio.h>
#include <stdlib.h>

constexpr int kExitNoBinary = 3;

// Fails the program unless `call` returns hipSuccess.
#define CHECK(call)                                                             \
  do {                                                                          \
    hipError_t check_e_ = (call);                                               \
    if (check_e_ != hipSuccess) {                                               \
      fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #call, \
              hipGetErrorName(check_e_), hipGetErrorString(check_e_));          \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)

// Fails the program unless `call` returns `expected`.
#define EXPECT_ERROR(call, expected)                                                     \
  do {                                                                                   \
    hipError_t check_e_ = (call);                                                        \
    if (check_e_ != (expected)) {                                                        \
      fprintf(stderr, "%s:%d: %s returned %s, expected %s\n", __FILE__, __LINE__, #call, \
              hipGetErrorName(check_e_), hipGetErrorName(expected));                     \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

// Fails the program unless `cond` holds.
#define EXPECT(cond)                                                      \
  do {                                                                    \
    if (!(cond)) {                                                        \
      fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
      exit(1);                                                            \
    }                                                                     \
  } while (0)

// After a launch: the launch's own error (hipGetLastError), ending the program with
// kExitNoBinary when the device has no code it can run.
#define CHECK_LAUNCH(what)                                                          \
  do {                                                                              \
    hipError_t check_e_ = hipGetLastError();                                        \
    if (check_e_ == hipErrorNoBinaryForGpu) {                                       \
      printf("kernel launch rejected: %s: hipErrorNoBinaryForGpu\n", what);         \
      exit(kExitNoBinary);                                                          \
    }                                                                               \
    if (check_e_ != hipSuccess) {                                                   \
      fprintf(stderr, "%s:%d: launch of %s failed: %s\n", __FILE__, __LINE__, what, \
              hipGetErrorName(check_e_));                                           \
      exit(1);                                                                      \
    }                                                                               \
  } while (0)

// As CHECK, for module loads and module launches that the device may refuse.
#define CHECK_CODE(call)                                                   \
  do {                                                                     \
    hipError_t check_e_ = (call);                                          \
    if (check_e_ == hipErrorNoBinaryForGpu) {                              \
      printf("rejected: %s: hipErrorNoBinaryForGpu\n", #call);             \
      exit(kExitNoBinary);                                                 \
    }                                                                      \
    if (check_e_ != hipSuccess) {                                          \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, \
              hipGetErrorName(check_e_));                                  \
      exit(1);                                                             \
    }                                                                      \
  } while (0)
