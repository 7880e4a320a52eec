// Copies out into pinned memory (cuMemcpyDtoHAsync), which rgpu posts (MemcpyDtoHPosted): each
// one's bytes must be there once the program learns the copy is done, however it learns it, and
// be the bytes the stream had at the copy's place:
//   1. rounds of a kernel writing a round's value, the copy out, and cuStreamSynchronize;
//   2. behind a queue of kernels, then a kernel overwriting the source after the copy, learned
//      by cuEventSynchronize on an event recorded after the copy;
//   3. learned by polling cuStreamQuery;
//   4. two streams, each copying its own buffer, and cuCtxSynchronize;
//   5. the pinned buffer freed right after a copy into it was issued (the copy lands first);
//   6. a copy from outside any allocation: an error at the next synchronize, not a hang.
// Prints "posted reads: begin" and "posted reads: end" to stderr around the rounds of part 1
// (tests/e2e/posted_reads.sh counts the round trips between them).
#include "check.h"

int main() {
  CUcontext ctx = InitContext();
  (void)ctx;
  CUmodule module;
  CHECK(cuModuleLoad(&module, RGPU_KERNELS_FATBIN));
  CUfunction set_all, spin;
  CHECK(cuModuleGetFunction(&set_all, module, "set_all"));
  CHECK(cuModuleGetFunction(&spin, module, "spin"));
  const int n = 1024, rounds = 100;
  CUdeviceptr a, b, sink;
  CHECK(cuMemAlloc(&a, n * sizeof(int)));
  CHECK(cuMemAlloc(&b, n * sizeof(int)));
  CHECK(cuMemAlloc(&sink, 64));
  int* host_a = nullptr;
  int* host_b = nullptr;
  CHECK(cuMemAllocHost(reinterpret_cast<void**>(&host_a), n * sizeof(int)));
  CHECK(cuMemAllocHost(reinterpret_cast<void**>(&host_b), n * sizeof(int)));
  CUstream s1, s2;
  CHECK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  CHECK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  auto set = [&](CUdeviceptr p, int value, CUstream s) {
    int count = n;
    void* args[] = {&p, &value, &count};
    CHECK(cuLaunchKernel(set_all, n / 128, 1, 1, 128, 1, 1, 0, s, args, nullptr));
  };
  auto busy = [&](CUstream s, int kernels) {
    int iters = 20000;
    void* args[] = {&iters, &sink};
    for (int k = 0; k < kernels; ++k) {
      CHECK(cuLaunchKernel(spin, 4, 1, 1, 128, 1, 1, 0, s, args, nullptr));
    }
  };
  auto expect = [&](const int* host, int value, const char* part) {
    for (int i = 0; i < n; ++i) {
      if (host[i] != value) {
        fprintf(stderr, "posted reads, %s: element %d is %d, not %d\n", part, i, host[i], value);
        exit(1);
      }
    }
  };

  // 1.
  fprintf(stderr, "posted reads: begin\n");
  for (int round = 1; round <= rounds; ++round) {
    set(a, round, s1);
    CHECK(cuMemcpyDtoHAsync(host_a, a, n * sizeof(int), s1));
    CHECK(cuStreamSynchronize(s1));
    expect(host_a, round, "rounds");
  }
  fprintf(stderr, "posted reads: end\n");

  // 2.
  CUevent copied;
  CHECK(cuEventCreate(&copied, CU_EVENT_DEFAULT));
  busy(s1, 20);
  set(a, 1000, s1);
  CHECK(cuMemcpyDtoHAsync(host_a, a, n * sizeof(int), s1));
  CHECK(cuEventRecord(copied, s1));
  set(a, 2000, s1);  // after the copy: must not be what it brings
  CHECK(cuEventSynchronize(copied));
  expect(host_a, 1000, "behind a queue, learned from an event");
  CHECK(cuStreamSynchronize(s1));

  // 3.
  busy(s1, 20);
  set(a, 3000, s1);
  CHECK(cuMemcpyDtoHAsync(host_a, a, n * sizeof(int), s1));
  CUresult q;
  while ((q = cuStreamQuery(s1)) == CUDA_ERROR_NOT_READY) {
  }
  CHECK(q);
  expect(host_a, 3000, "learned by polling");

  // 4.
  busy(s1, 10);
  busy(s2, 10);
  set(a, 4001, s1);
  set(b, 4002, s2);
  CHECK(cuMemcpyDtoHAsync(host_a, a, n * sizeof(int), s1));
  CHECK(cuMemcpyDtoHAsync(host_b, b, n * sizeof(int), s2));
  CHECK(cuCtxSynchronize());
  expect(host_a, 4001, "two streams (first)");
  expect(host_b, 4002, "two streams (second)");

  // 5.
  busy(s2, 20);
  CHECK(cuMemcpyDtoHAsync(host_b, b, n * sizeof(int), s2));
  CHECK(cuMemFreeHost(host_b));
  CHECK(cuMemAllocHost(reinterpret_cast<void**>(&host_b), n * sizeof(int)));
  memset(host_b, 0, n * sizeof(int));
  CHECK(cuStreamSynchronize(s2));
  for (int i = 0; i < n; ++i) EXPECT_TRUE(host_b[i] == 0);  // nothing landed in the new buffer

  // 6.
  CUresult bad = cuMemcpyDtoHAsync(host_a, CUdeviceptr{16}, sizeof(int), s1);
  if (bad == CUDA_SUCCESS) bad = cuStreamSynchronize(s1);
  if (bad == CUDA_SUCCESS) {
    fprintf(stderr, "posted reads: a copy from outside any allocation succeeded\n");
    return 1;
  }

  printf(
      "posted reads: %d rounds, events, queries, two streams, a freed buffer, a bad source: OK\n",
      rounds);
  return 0;
}
