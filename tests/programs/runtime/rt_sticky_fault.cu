// A sticky kernel fault: a kernel writes 4 GiB past the end of a small allocation; the fault is
// reported at synchronization (cudaErrorIllegalAddress; an H200 says
// cudaErrorInvalidAddressSpace) and then persists (allocations, copies, launches and
// synchronizations keep failing with it); cudaDeviceReset recovers the software GPU (NVIDIA's
// driver keeps the device from the process, as it documents).
#include "rt_check.h"

#include <cstring>

static bool IsSoftGpu() {
  cudaDeviceProp prop = {};
  return cudaGetDeviceProperties(&prop, 0) == cudaSuccess &&
         strstr(prop.name, "softgpu") != nullptr;
}

__global__ void WriteAt(int* p, long long index, int v) { p[index + threadIdx.x] = v; }

static cudaError_t g_fault = cudaErrorIllegalAddress;

static void ExpectSticky(cudaError_t got, const char* what) {
  EXPECT(got == g_fault, "%s after the fault returned %s, want %s", what, cudaGetErrorName(got),
         cudaGetErrorName(g_fault));
}

int main() {
  int* d = nullptr;
  CHECK(cudaMalloc(&d, 1024));
  WriteAt<<<1, 32>>>(d, 0, 5);  // in bounds
  CHECK_SYNC();

  WriteAt<<<1, 32>>>(d, 1LL << 30, 5);  // 2^30 ints = 4 GiB past the start
  cudaError_t launch = cudaGetLastError();
  EXPECT(launch == cudaSuccess || launch == cudaErrorIllegalAddress ||
             launch == cudaErrorInvalidAddressSpace,
         "faulting launch: %s", cudaGetErrorName(launch));
  cudaError_t sync = cudaDeviceSynchronize();
  EXPECT(sync == cudaErrorIllegalAddress || sync == cudaErrorInvalidAddressSpace,
         "synchronize after the fault: %s (%s)", cudaGetErrorName(sync), cudaGetErrorString(sync));
  g_fault = sync;
  EXPECT(strlen(cudaGetErrorString(sync)) > 0, "empty error string");

  // The error persists.
  ExpectSticky(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  ExpectSticky(cudaPeekAtLastError(), "cudaPeekAtLastError");
  void* p = nullptr;
  ExpectSticky(cudaMalloc(&p, 64), "cudaMalloc");
  int h = 0;
  ExpectSticky(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost), "cudaMemcpy");
  ExpectSticky(cudaMemset(d, 0, 64), "cudaMemset");
  WriteAt<<<1, 32>>>(d, 0, 6);
  ExpectSticky(cudaGetLastError(), "a new launch");
  ExpectSticky(cudaStreamSynchronize(0), "cudaStreamSynchronize");
  ExpectSticky(cudaDeviceSynchronize(), "cudaDeviceSynchronize (again)");

  // A device reset gives a working device again, on the software GPU; NVIDIA's driver may keep
  // the fault until the process ends.
  CHECK(cudaDeviceReset());
  (void)cudaGetLastError();
  int* e = nullptr;
  cudaError_t again = cudaMalloc(&e, 32 * sizeof(int));
  if (again != cudaSuccess && !IsSoftGpu()) {
    // NVIDIA's driver, run natively on an H200: cudaErrorDevicesUnavailable here
    // (docs/real-gpu.md, run 3); the device stays unusable to this process.
    printf("rt_sticky_fault: OK (fault reported as %s; after a reset the process gets %s)\n",
           cudaGetErrorName(sync), cudaGetErrorName(again));
    return 0;
  }
  CHECK(again);
  WriteAt<<<1, 32>>>(e, 0, 42);
  CHECK_SYNC();
  int back[32];
  CHECK(cudaMemcpy(back, e, sizeof back, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 32; ++i) EXPECT(back[i] == 42, "after reset: e[%d] = %d", i, back[i]);
  CHECK(cudaFree(e));
  printf("rt_sticky_fault: OK (fault reported as %s)\n", cudaGetErrorName(sync));
  return 0;
}
