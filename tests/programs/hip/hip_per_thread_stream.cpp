// Built with -fgpu-default-stream=per-thread (the _spt entry points): each thread's work on its
// null stream stays in order, synchronous calls wait for it, and queries answer.
#include <string.h>

#include <thread>
#include <vector>

#include "hip_check.h"

#ifndef HIP_API_PER_THREAD_DEFAULT_STREAM
#error "build with -fgpu-default-stream=per-thread"
#endif

static void Worker(int id, int* failures) {
  const size_t n = 256 * 1024;
  std::vector<unsigned char> host(n), back(n);
  void* d = nullptr;
  if (hipMalloc(&d, n) != hipSuccess) {
    ++*failures;
    return;
  }
  for (int round = 0; round < 10; ++round) {
    const unsigned char fill = static_cast<unsigned char>(id * 16 + round);
    // Ordered on this thread's stream: the memset, then the copy over half of it.
    memset(host.data(), fill ^ 0xff, n / 2);
    if (hipMemset(d, fill, n) != hipSuccess) ++*failures;
    if (hipMemcpyAsync(d, host.data(), n / 2, hipMemcpyHostToDevice, 0) != hipSuccess) {
      ++*failures;
    }
    if (hipStreamSynchronize(0) != hipSuccess) ++*failures;
    if (hipMemcpy(back.data(), d, n, hipMemcpyDeviceToHost) != hipSuccess) ++*failures;
    for (size_t i = 0; i < n; ++i) {
      if (back[i] != (i < n / 2 ? (fill ^ 0xff) : fill)) {
        ++*failures;
        break;
      }
    }
    // Other threads' work may share the stream on the server (rgpu runs per-thread default
    // streams as the context's default stream), so "not ready" is an answer too.
    const hipError_t query = hipStreamQuery(0);
    if (query != hipSuccess && query != hipErrorNotReady) ++*failures;
  }
  unsigned flags = 99;
  if (hipStreamGetFlags(0, &flags) != hipSuccess) ++*failures;
  if (hipFree(d) != hipSuccess) ++*failures;
}

int main() {
  const int kThreads = 4;
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(Worker, t, &failures[t]);
  for (auto& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) EXPECT(failures[t] == 0);
  // 2D forms on the per-thread stream too.
  void* p;
  size_t pitch = 0;
  CHECK(hipMallocPitch(&p, &pitch, 64, 8));
  CHECK(hipMemset2D(p, pitch, 0x33, 64, 8));
  std::vector<unsigned char> rows(64 * 8);
  CHECK(hipMemcpy2D(rows.data(), 64, p, pitch, 64, 8, hipMemcpyDeviceToHost));
  for (unsigned char v : rows) EXPECT(v == 0x33);
  CHECK(hipFree(p));
  puts("hip_per_thread_stream: ok");
  return 0;
}
