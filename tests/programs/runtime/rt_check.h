// Shared helpers for the CUDA runtime acceptance programs: every runtime call is checked, and a
// failure prints the call, the error's name and description, and exits non-zero.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

// Checks that a runtime call returns cudaSuccess.
#define CHECK(call)                                                                           \
  do {                                                                                        \
    cudaError_t check_err_ = (call);                                                          \
    if (check_err_ != cudaSuccess) {                                                          \
      fprintf(stderr, "%s:%d: %s failed: %s (%d): %s\n", __FILE__, __LINE__, #call,           \
              cudaGetErrorName(check_err_), (int)check_err_, cudaGetErrorString(check_err_)); \
      exit(1);                                                                                \
    }                                                                                         \
  } while (0)

// Checks a call of one of NVIDIA's libraries that returns a status: `ok` is its success value,
// `describe` turns a status into text (cudnnGetErrorString, ncclGetErrorString).
#define CHECK_LIBRARY(call, ok, describe)                                  \
  do {                                                                     \
    auto library_status_ = (call);                                         \
    if (library_status_ != (ok)) {                                         \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, \
              describe(library_status_));                                  \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

// Checks the launch just made (cudaGetLastError) and, with SYNC, the kernel's completion.
#define CHECK_LAUNCH() CHECK(cudaGetLastError())
#define CHECK_SYNC()                \
  do {                              \
    CHECK(cudaGetLastError());      \
    CHECK(cudaDeviceSynchronize()); \
  } while (0)

// Checks that a runtime call returns exactly the error `expected`.
#define EXPECT_ERROR(call, expected)                                                               \
  do {                                                                                             \
    cudaError_t expect_err_ = (call);                                                              \
    if (expect_err_ != (expected)) {                                                               \
      fprintf(stderr, "%s:%d: %s returned %s (%d), expected %s (%d)\n", __FILE__, __LINE__, #call, \
              cudaGetErrorName(expect_err_), (int)expect_err_, cudaGetErrorName(expected),         \
              (int)(expected));                                                                    \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

// Checks a condition; on failure prints it and a printf-style explanation.
#define EXPECT(cond, ...)                                                            \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      fprintf(stderr, "%s:%d: expectation failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                                  \
      fprintf(stderr, "\n");                                                         \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)

// True when `got` is within `rel` (relative) or `abs_tol` (absolute) of `want`.
inline bool Near(double got, double want, double rel, double abs_tol) {
  if (std::isnan(want)) return std::isnan(got);
  double diff = std::fabs(got - want);
  return diff <= abs_tol || diff <= rel * std::fabs(want);
}

// Compares n integers exactly; reports the first mismatch.
template <typename T>
void ExpectEqualArrays(const char* what, const T* got, const T* want, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (got[i] != want[i]) {
      fprintf(stderr, "%s: mismatch at [%zu]: got %lld, want %lld\n", what, i, (long long)got[i],
              (long long)want[i]);
      exit(1);
    }
  }
}

// Compares n floating-point values within a tolerance; reports the first mismatch.
template <typename T>
void ExpectNearArrays(const char* what, const T* got, const T* want, size_t n, double rel,
                      double abs_tol) {
  for (size_t i = 0; i < n; ++i) {
    if (!Near((double)got[i], (double)want[i], rel, abs_tol)) {
      fprintf(stderr, "%s: mismatch at [%zu]: got %.17g, want %.17g\n", what, i, (double)got[i],
              (double)want[i]);
      exit(1);
    }
  }
}

// Grid size that covers n elements with blocks of `block` threads.
inline unsigned GridFor(size_t n, unsigned block) { return (unsigned)((n + block - 1) / block); }
