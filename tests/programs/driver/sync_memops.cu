// CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: off until a program sets it; only it can be set
// (cuPointerSetAttribute); set on an allocation (through any address inside it), it reads back
// set there and nowhere else, and setting it waits for the synchronous operations already issued;
// a synchronous memset (1D and 2D) or copy into or out of that allocation (from the host, within
// the device, between contexts, into another context's memory) returns only once it has run, with
// the work queued before it on the legacy stream: a long kernel queued first has finished when the
// call returns (the stream is idle), and the bytes are there. Cleared, it reads back clear.
#include "check.h"

namespace {
// A kernel that runs for a while on the software GPU (a fraction of a second); on a GPU it is
// short, and the checks below hold all the more.
void LaunchLong(CUfunction spin, CUdeviceptr sink) {
  int iters = 400000;
  void* args[] = {&iters, &sink};
  CHECK(cuLaunchKernel(spin, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr));
}
}  // namespace

int main() {
  CUcontext ctx = InitContext();
  CUmodule module;
  CHECK(cuModuleLoad(&module, RGPU_KERNELS_FATBIN));
  CUfunction spin;
  CHECK(cuModuleGetFunction(&spin, module, "spin"));
  const size_t n = 1 << 18;
  CUdeviceptr d, other, sink;
  CHECK(cuMemAlloc(&d, n * sizeof(unsigned)));
  CHECK(cuMemAlloc(&other, n * sizeof(unsigned)));
  CHECK(cuMemAlloc(&sink, sizeof(unsigned)));

  int set = -1;
  CHECK(cuPointerGetAttribute(&set, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, d));
  EXPECT_TRUE(set == 0);
  unsigned one = 1, zero = 0;
  EXPECT_TRUE(cuPointerSetAttribute(nullptr, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, d) ==
              CUDA_ERROR_INVALID_VALUE);
  EXPECT_TRUE(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d) ==
              CUDA_ERROR_INVALID_VALUE);
  // Setting it waits for the synchronous operations already issued (a memset behind a long
  // kernel).
  LaunchLong(spin, sink);
  CHECK(cuMemsetD32(d, 0, n));
  CHECK(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, d + 4096));
  EXPECT_TRUE(cuStreamQuery(nullptr) == CUDA_SUCCESS);
  CHECK(cuPointerGetAttribute(&set, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, d));
  EXPECT_TRUE(set == 1);
  CHECK(cuPointerGetAttribute(&set, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, other));
  EXPECT_TRUE(set == 0);

  // A memset into the allocation, behind a long kernel: both have run when it returns.
  LaunchLong(spin, sink);
  CHECK(cuMemsetD32(d, 0x5a5a5a5a, n));
  EXPECT_TRUE(cuStreamQuery(nullptr) == CUDA_SUCCESS);
  std::vector<unsigned> host(n);
  CHECK(cuMemcpyDtoH(host.data(), d, n * sizeof(unsigned)));
  for (size_t i = 0; i < n; ++i) EXPECT_TRUE(host[i] == 0x5a5a5a5au);
  // A copy into it from the host, likewise.
  for (size_t i = 0; i < n; ++i) host[i] = static_cast<unsigned>(i * 7);
  LaunchLong(spin, sink);
  CHECK(cuMemcpyHtoD(d, host.data(), n * sizeof(unsigned)));
  EXPECT_TRUE(cuStreamQuery(nullptr) == CUDA_SUCCESS);
  // And a copy within the device, out of it.
  LaunchLong(spin, sink);
  CHECK(cuMemcpyDtoD(other, d, n * sizeof(unsigned)));
  EXPECT_TRUE(cuStreamQuery(nullptr) == CUDA_SUCCESS);
  std::vector<unsigned> back(n);
  CHECK(cuMemcpyDtoH(back.data(), other, n * sizeof(unsigned)));
  for (size_t i = 0; i < n; ++i) EXPECT_TRUE(back[i] == static_cast<unsigned>(i * 7));

  // A 2D memset into it, and a copy between contexts' memory (here one context) out of it.
  LaunchLong(spin, sink);
  CHECK(cuMemsetD2D32(d, 1024 * sizeof(unsigned), 7, 1024, n / 1024));
  EXPECT_TRUE(cuStreamQuery(nullptr) == CUDA_SUCCESS);
  LaunchLong(spin, sink);
  CHECK(cuMemcpyPeer(other, ctx, d, ctx, n * sizeof(unsigned)));
  EXPECT_TRUE(cuStreamQuery(nullptr) == CUDA_SUCCESS);
  CHECK(cuMemcpyDtoH(back.data(), other, n * sizeof(unsigned)));
  for (size_t i = 0; i < n; ++i) EXPECT_TRUE(back[i] == 7u);

  // Memory of another context: a copy into it from this one runs in its context, behind its
  // long kernel, and has run when the copy returns.
  CUcontext second;
  CHECK(cuCtxCreate(&second, nullptr, 0, 0));  // current now
  CUdeviceptr theirs, second_sink;
  CHECK(cuMemAlloc(&theirs, n * sizeof(unsigned)));
  CHECK(cuMemAlloc(&second_sink, sizeof(unsigned)));
  CHECK(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, theirs));
  CUmodule second_module;
  CHECK(cuModuleLoad(&second_module, RGPU_KERNELS_FATBIN));
  CUfunction second_spin;
  CHECK(cuModuleGetFunction(&second_spin, second_module, "spin"));
  LaunchLong(second_spin, second_sink);
  CHECK(cuCtxSetCurrent(ctx));
  CHECK(cuMemcpyDtoD(theirs, d, n * sizeof(unsigned)));
  CHECK(cuCtxSetCurrent(second));
  EXPECT_TRUE(cuStreamQuery(nullptr) == CUDA_SUCCESS);
  CHECK(cuCtxDestroy(second));
  CHECK(cuCtxSetCurrent(ctx));

  CHECK(cuPointerSetAttribute(&zero, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, d));
  CHECK(cuPointerGetAttribute(&set, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, d));
  EXPECT_TRUE(set == 0);
  CHECK(cuCtxSynchronize());
  CHECK(cuMemFree(d));
  CHECK(cuMemFree(other));
  CHECK(cuMemFree(sink));
  printf("sync_memops: OK\n");
  return 0;
}
