// Non-sticky error paths: invalid launch configurations give cudaErrorInvalidConfiguration through
// cudaPeekAtLastError (which does not clear it) and cudaGetLastError (which does); bad devices,
// impossible allocations, bad frees and bad memcpy kinds give their documented errors; error
// names and strings are non-empty; and the device keeps working after all of them.
#include "rt_check.h"

#include <cstring>

__global__ void Store(int* p, int v) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  p[i] = v + i;
}

static void ExpectLaunchError(const char* what, cudaError_t want) {
  cudaError_t peek = cudaPeekAtLastError();
  EXPECT(peek == want, "%s: cudaPeekAtLastError = %s, want %s", what, cudaGetErrorName(peek),
         cudaGetErrorName(want));
  peek = cudaPeekAtLastError();  // peeking does not clear
  EXPECT(peek == want, "%s: second cudaPeekAtLastError = %s", what, cudaGetErrorName(peek));
  cudaError_t last = cudaGetLastError();
  EXPECT(last == want, "%s: cudaGetLastError = %s", what, cudaGetErrorName(last));
  last = cudaGetLastError();  // cleared now
  EXPECT(last == cudaSuccess, "%s: error not cleared: %s", what, cudaGetErrorName(last));
}

static void ExpectDeviceWorks(int* d, int v) {
  Store<<<4, 64>>>(d, v);
  CHECK_SYNC();
  int h[256];
  CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 256; ++i) EXPECT(h[i] == v + i, "after errors: p[%d] = %d", i, h[i]);
}

int main() {
  int* d = nullptr;
  CHECK(cudaMalloc(&d, 256 * sizeof(int)));
  ExpectDeviceWorks(d, 1);

  // Invalid launch configurations.
  Store<<<1, 2048>>>(d, 0);
  ExpectLaunchError("2048 threads per block", cudaErrorInvalidConfiguration);
  Store<<<1, dim3(32, 32, 2)>>>(d, 0);
  ExpectLaunchError("32x32x2 block", cudaErrorInvalidConfiguration);
  Store<<<1, dim3(1, 1, 65)>>>(d, 0);
  ExpectLaunchError("block z of 65", cudaErrorInvalidConfiguration);
  Store<<<0, 32>>>(d, 0);
  ExpectLaunchError("empty grid", cudaErrorInvalidConfiguration);
  Store<<<dim3(1, 65536, 1), 32>>>(d, 0);
  ExpectLaunchError("grid y of 65536", cudaErrorInvalidConfiguration);
  ExpectDeviceWorks(d, 2);

  // Far too much dynamic shared memory: a launch error (which one varies by version), not sticky.
  Store<<<1, 32, 512u << 20>>>(d, 0);
  cudaError_t big = cudaGetLastError();
  EXPECT(big == cudaErrorInvalidValue || big == cudaErrorInvalidConfiguration ||
             big == cudaErrorLaunchOutOfResources,
         "512 MiB dynamic shared memory: %s", cudaGetErrorName(big));
  ExpectDeviceWorks(d, 3);

  // Error names and strings.
  const cudaError_t codes[] = {cudaSuccess,
                               cudaErrorInvalidValue,
                               cudaErrorMemoryAllocation,
                               cudaErrorInvalidConfiguration,
                               cudaErrorInvalidDevice,
                               cudaErrorInvalidMemcpyDirection,
                               cudaErrorIllegalAddress,
                               cudaErrorLaunchFailure,
                               cudaErrorNotReady,
                               cudaErrorInvalidResourceHandle,
                               cudaErrorNotSupported};
  for (cudaError_t c : codes) {
    const char* name = cudaGetErrorName(c);
    const char* str = cudaGetErrorString(c);
    EXPECT(name && strncmp(name, "cuda", 4) == 0, "name of %d: %s", (int)c, name ? name : "(null)");
    EXPECT(str && strlen(str) > 0, "empty string for %s", name);
  }
  EXPECT(
      strcmp(cudaGetErrorName(cudaErrorInvalidConfiguration), "cudaErrorInvalidConfiguration") == 0,
      "name %s", cudaGetErrorName(cudaErrorInvalidConfiguration));
  EXPECT(strcmp(cudaGetErrorName(cudaErrorIllegalAddress), "cudaErrorIllegalAddress") == 0, "name");

  // Bad device ordinals.
  int count = 0;
  CHECK(cudaGetDeviceCount(&count));
  EXPECT_ERROR(cudaSetDevice(count), cudaErrorInvalidDevice);
  EXPECT_ERROR(cudaGetLastError(), cudaErrorInvalidDevice);
  cudaDeviceProp prop;
  EXPECT_ERROR(cudaGetDeviceProperties(&prop, count + 5), cudaErrorInvalidDevice);
  (void)cudaGetLastError();
  int dev = -1;
  CHECK(cudaGetDevice(&dev));
  EXPECT(dev == 0, "current device changed to %d by a failed cudaSetDevice", dev);

  // An impossible allocation.
  void* huge = nullptr;
  EXPECT_ERROR(cudaMalloc(&huge, (size_t)1 << 50), cudaErrorMemoryAllocation);
  EXPECT_ERROR(cudaGetLastError(), cudaErrorMemoryAllocation);
  EXPECT_ERROR(cudaGetLastError(), cudaSuccess);

  // Freeing something that was never allocated; freeing NULL is fine.
  cudaError_t bad_free = cudaFree(reinterpret_cast<void*>(0x1234560));
  EXPECT(bad_free == cudaErrorInvalidValue || bad_free == cudaErrorInvalidDevicePointer,
         "cudaFree(bogus) = %s", cudaGetErrorName(bad_free));
  (void)cudaGetLastError();
  CHECK(cudaFree(nullptr));

  // A memcpy kind that does not exist.
  int h = 0;
  EXPECT_ERROR(cudaMemcpy(&h, d, sizeof h, static_cast<cudaMemcpyKind>(42)),
               cudaErrorInvalidMemcpyDirection);
  (void)cudaGetLastError();

  ExpectDeviceWorks(d, 4);
  CHECK(cudaFree(d));
  printf("rt_errors: OK\n");
  return 0;
}
