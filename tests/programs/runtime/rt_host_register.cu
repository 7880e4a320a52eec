// Registered host memory: cudaHostRegister of ordinary (malloc'd) memory, async copies from and to
// it around a kernel on a stream, pointer attributes before/after, the documented errors for
// registering twice and unregistering unregistered memory, and cudaHostUnregister.
#include "rt_check.h"

#include <cstdlib>
#include <cstring>

__global__ void Reverse(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[n - 1 - i] = in[i] * 0.5f;
}

int main() {
  const int n = 1 << 16;
  const size_t bytes = n * sizeof(float);
  float* in = static_cast<float*>(aligned_alloc(4096, bytes));
  float* out = static_cast<float*>(aligned_alloc(4096, bytes));
  EXPECT(in && out, "aligned_alloc failed");
  for (int i = 0; i < n; ++i) in[i] = (float)(i % 4099) - 2000.0f;
  memset(out, 0, bytes);

  cudaPointerAttributes attr;
  CHECK(cudaPointerGetAttributes(&attr, in));
  EXPECT(attr.type == cudaMemoryTypeUnregistered, "malloc'd memory has type %d", (int)attr.type);

  CHECK(cudaHostRegister(in, bytes, cudaHostRegisterDefault));
  CHECK(cudaHostRegister(out, bytes, cudaHostRegisterPortable));
  CHECK(cudaPointerGetAttributes(&attr, in));
  EXPECT(attr.type == cudaMemoryTypeHost, "registered memory has type %d", (int)attr.type);
  EXPECT(attr.hostPointer == in, "hostPointer %p, want %p", attr.hostPointer, (void*)in);

  // Registering the same range twice is an error that does not disturb later work.
  EXPECT_ERROR(cudaHostRegister(in, bytes, cudaHostRegisterDefault),
               cudaErrorHostMemoryAlreadyRegistered);
  EXPECT_ERROR(cudaGetLastError(), cudaErrorHostMemoryAlreadyRegistered);
  EXPECT_ERROR(cudaGetLastError(), cudaSuccess);

  float *din = nullptr, *dout = nullptr;
  CHECK(cudaMalloc(&din, bytes));
  CHECK(cudaMalloc(&dout, bytes));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  for (int round = 0; round < 3; ++round) {
    // The host changes the registered buffer between rounds; each round's copy sees the change.
    for (int i = 0; i < n; ++i) in[i] = (float)((i + round * 7) % 4099) - 2000.0f;
    CHECK(cudaMemcpyAsync(din, in, bytes, cudaMemcpyHostToDevice, s));
    Reverse<<<GridFor(n, 256), 256, 0, s>>>(din, dout, n);
    CHECK_LAUNCH();
    CHECK(cudaMemcpyAsync(out, dout, bytes, cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < n; ++i) {
      float want = in[n - 1 - i] * 0.5f;
      EXPECT(out[i] == want, "round %d: out[%d] = %g, want %g", round, i, out[i], want);
    }
  }
  // A registered sub-range used as a copy source.
  CHECK(cudaMemcpy(dout, in + 100, 1000 * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(out, dout, 1000 * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT(memcmp(out, in + 100, 1000 * sizeof(float)) == 0, "sub-range copy differs");

  CHECK(cudaHostUnregister(in));
  CHECK(cudaHostUnregister(out));
  CHECK(cudaPointerGetAttributes(&attr, in));
  EXPECT(attr.type == cudaMemoryTypeUnregistered, "unregistered memory has type %d",
         (int)attr.type);
  EXPECT_ERROR(cudaHostUnregister(in), cudaErrorHostMemoryNotRegistered);
  EXPECT_ERROR(cudaGetLastError(), cudaErrorHostMemoryNotRegistered);

  // Pageable copies still work once unregistered.
  for (int i = 0; i < n; ++i) in[i] = (float)i;
  CHECK(cudaMemcpy(din, in, bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(out, din, bytes, cudaMemcpyDeviceToHost));
  EXPECT(memcmp(out, in, bytes) == 0, "pageable copy after unregister differs");

  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(din));
  CHECK(cudaFree(dout));
  free(in);
  free(out);
  printf("rt_host_register: OK\n");
  return 0;
}
