// Launches from several host threads at once: each std::thread has its own stream, buffers and
// pinned memory, and runs rounds of copy/kernel/copy; all threads also add into one shared device
// counter. Results are checked per thread and for the shared counter.
#include "rt_check.h"

#include <atomic>
#include <thread>
#include <vector>

// A failure inside a worker thread: report and end the process at once (no exit handlers that
// could race with the other threads' CUDA calls).
#define TCHECK(call)                                                                          \
  do {                                                                                        \
    cudaError_t tcheck_err_ = (call);                                                         \
    if (tcheck_err_ != cudaSuccess) {                                                         \
      fprintf(stderr, "thread %d: %s:%d: %s failed: %s: %s\n", id, __FILE__, __LINE__, #call, \
              cudaGetErrorName(tcheck_err_), cudaGetErrorString(tcheck_err_));                \
      fflush(stderr);                                                                         \
      _Exit(1);                                                                               \
    }                                                                                         \
  } while (0)

__global__ void Mix(const int* in, int* out, int n, int id, int round, unsigned long long* total) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = in[i] * (id + 1) + round;
  atomicAdd(total, 1ULL);
}

static std::atomic<int> g_failures{0};

static void Worker(int id, int n, int rounds, unsigned long long* total) {
  TCHECK(cudaSetDevice(0));
  cudaStream_t s;
  TCHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int *h_in = nullptr, *h_out = nullptr, *d_in = nullptr, *d_out = nullptr;
  TCHECK(cudaMallocHost(&h_in, n * sizeof(int)));
  TCHECK(cudaMallocHost(&h_out, n * sizeof(int)));
  TCHECK(cudaMalloc(&d_in, n * sizeof(int)));
  TCHECK(cudaMalloc(&d_out, n * sizeof(int)));
  for (int round = 0; round < rounds; ++round) {
    for (int i = 0; i < n; ++i) h_in[i] = i * 7 + id * 1000 + round;
    TCHECK(cudaMemcpyAsync(d_in, h_in, n * sizeof(int), cudaMemcpyHostToDevice, s));
    Mix<<<GridFor(n, 128), 128, 0, s>>>(d_in, d_out, n, id, round, total);
    TCHECK(cudaGetLastError());
    TCHECK(cudaMemcpyAsync(h_out, d_out, n * sizeof(int), cudaMemcpyDeviceToHost, s));
    TCHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < n; ++i) {
      int want = h_in[i] * (id + 1) + round;
      if (h_out[i] != want) {
        fprintf(stderr, "thread %d round %d: out[%d] = %d, want %d\n", id, round, i, h_out[i],
                want);
        ++g_failures;
        break;
      }
    }
  }
  TCHECK(cudaStreamDestroy(s));
  TCHECK(cudaFree(d_in));
  TCHECK(cudaFree(d_out));
  TCHECK(cudaFreeHost(h_in));
  TCHECK(cudaFreeHost(h_out));
}

int main() {
  const int kThreads = 4, n = 4096, rounds = 5;
  unsigned long long* total = nullptr;
  CHECK(cudaMalloc(&total, sizeof *total));
  CHECK(cudaMemset(total, 0, sizeof *total));
  CHECK(cudaDeviceSynchronize());
  std::vector<std::thread> threads;
  for (int id = 0; id < kThreads; ++id) threads.emplace_back(Worker, id, n, rounds, total);
  for (auto& t : threads) t.join();
  EXPECT(g_failures == 0, "%d thread(s) saw wrong results", g_failures.load());
  CHECK(cudaDeviceSynchronize());
  unsigned long long count = 0;
  CHECK(cudaMemcpy(&count, total, sizeof count, cudaMemcpyDeviceToHost));
  EXPECT(count == (unsigned long long)kThreads * n * rounds, "shared counter %llu, want %llu",
         count, (unsigned long long)kThreads * n * rounds);
  CHECK(cudaFree(total));
  printf("rt_host_threads: OK (%d threads x %d rounds)\n", kThreads, rounds);
  return 0;
}
