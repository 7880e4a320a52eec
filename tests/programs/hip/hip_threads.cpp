// Several host threads at once, each with its own stream, buffers and last error: the runtime's
// per-thread state (current device, last error, launch configurations) stays per thread.
#include <string.h>

#include <thread>
#include <vector>

#include "hip_check.h"

static void Worker(int id, int rounds, int* failures) {
  if (hipSetDevice(0) != hipSuccess) {
    ++*failures;
    return;
  }
  hipStream_t s;
  if (hipStreamCreateWithFlags(&s, hipStreamNonBlocking) != hipSuccess) {
    ++*failures;
    return;
  }
  const size_t n = 64 * 1024;
  std::vector<unsigned> in(n), out(n);
  void* d = nullptr;
  if (hipMalloc(&d, n * 4) != hipSuccess) ++*failures;
  for (int r = 0; r < rounds && d != nullptr; ++r) {
    for (size_t i = 0; i < n; ++i) in[i] = static_cast<unsigned>(id * 1000003 + r * 7919 + i);
    memset(out.data(), 0, n * 4);
    if (hipMemcpyAsync(d, in.data(), n * 4, hipMemcpyHostToDevice, s) != hipSuccess ||
        hipMemcpyAsync(out.data(), d, n * 4, hipMemcpyDeviceToHost, s) != hipSuccess ||
        hipStreamSynchronize(s) != hipSuccess || memcmp(in.data(), out.data(), n * 4) != 0) {
      ++*failures;
    }
    // An error made on this thread is this thread's alone.
    if (id % 2 == 0) {
      if (hipMalloc(nullptr, 1) != hipErrorInvalidValue) ++*failures;
      if (hipGetLastError() != hipErrorInvalidValue) ++*failures;
    }
    if (hipGetLastError() != hipSuccess) ++*failures;
  }
  if (hipFree(d) != hipSuccess || hipStreamDestroy(s) != hipSuccess) ++*failures;
}

int main() {
  const int kThreads = 8, kRounds = 20;
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(Worker, t, kRounds, &failures[t]);
  for (auto& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) {
    if (failures[t] != 0) fprintf(stderr, "thread %d: %d failures\n", t, failures[t]);
    EXPECT(failures[t] == 0);
  }
  CHECK(hipDeviceSynchronize());
  puts("hip_threads: ok");
  return 0;
}
