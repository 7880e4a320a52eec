// Per-thread default stream (built with --default-stream per-thread): each of several host threads
// launches kernels and async copies on its default stream (0, i.e. cudaStreamPerThread), which
// keep their order within the thread; cudaStreamSynchronize(0 / cudaStreamPerThread), events on
// the per-thread stream, and the legacy stream used explicitly (cudaStreamLegacy) all work. Each
// thread's per-thread stream is its own: one thread's idle stream is ready while another's runs a
// long kernel. In this build a NULL stream is the calling thread's stream, not the legacy one
// (the `_ptsz` entry points): a query of stream 0 is not ready while a kernel the thread launched
// on cudaStreamPerThread waits, and the copies out that threads make on cudaStreamPerThread have
// landed when their cudaStreamSynchronize(0) returns (the `_lanes_off` variant runs it with the
// copies out posted in every thread).
#include "rt_check.h"

#include <atomic>
#include <thread>
#include <vector>

#ifndef CUDA_API_PER_THREAD_DEFAULT_STREAM
#error "build this program with --default-stream per-thread"
#endif

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

__global__ void Step(int* p, int n, int mul, int add) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = p[i] * mul + add;
}

__global__ void Spin(long long iterations, int* out) {
  int acc = 0;
  for (long long i = 0; i < iterations; ++i) acc += static_cast<int>(i & 3);
  *out = acc;
}

// Runs until *flag is non-zero.
__global__ void WaitFlag(volatile int* flag) {
  while (*flag == 0) {
  }
}

static std::atomic<int> g_failures{0};

static void Worker(int id) {
  const int n = 4096;
  int* h = nullptr;
  int* d = nullptr;
  TCHECK(cudaMallocHost(&h, n * sizeof(int)));
  TCHECK(cudaMalloc(&d, n * sizeof(int)));
  cudaEvent_t done;
  TCHECK(cudaEventCreate(&done));
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < n; ++i) h[i] = i + id * 10000 + round;
    TCHECK(cudaMemcpyAsync(d, h, n * sizeof(int), cudaMemcpyHostToDevice, 0));
    Step<<<n / 256, 256>>>(d, n, 3, id);  // default stream = this thread's stream
    TCHECK(cudaGetLastError());
    Step<<<n / 256, 256, 0, cudaStreamPerThread>>>(d, n, 1, -round);
    TCHECK(cudaGetLastError());
    TCHECK(cudaMemcpyAsync(h, d, n * sizeof(int), cudaMemcpyDeviceToHost, cudaStreamPerThread));
    if (round % 2 == 0) {
      TCHECK(cudaStreamSynchronize(0));
    } else {
      TCHECK(cudaEventRecord(done, 0));
      TCHECK(cudaEventSynchronize(done));
    }
    for (int i = 0; i < n; ++i) {
      int want = (i + id * 10000 + round) * 3 + id - round;
      if (h[i] != want) {
        fprintf(stderr, "thread %d round %d: out[%d] = %d, want %d\n", id, round, i, h[i], want);
        ++g_failures;
        break;
      }
    }
  }
  TCHECK(cudaStreamQuery(cudaStreamPerThread));
  TCHECK(cudaEventDestroy(done));
  TCHECK(cudaFree(d));
  TCHECK(cudaFreeHost(h));
}

int main() {
  std::vector<std::thread> threads;
  for (int id = 0; id < 4; ++id) threads.emplace_back(Worker, id);
  for (auto& t : threads) t.join();
  EXPECT(g_failures == 0, "%d thread(s) saw wrong results", g_failures.load());

  // One thread's per-thread stream runs a long kernel; another thread's, idle, is ready.
  {
    int* sink = nullptr;
    CHECK(cudaMalloc(&sink, sizeof(int)));
    std::atomic<bool> launched{false};
    cudaError_t busy_query = cudaSuccess, idle_query = cudaErrorUnknown;
    std::thread busy([&] {
      Spin<<<1, 1, 0, cudaStreamPerThread>>>(20000000, sink);
      launched = true;
      while (launched.load()) std::this_thread::yield();  // until the idle thread has asked
      busy_query = cudaStreamSynchronize(cudaStreamPerThread);
    });
    std::thread idle([&] {
      while (!launched.load()) std::this_thread::yield();
      idle_query = cudaStreamQuery(cudaStreamPerThread);
      launched = false;
    });
    idle.join();
    busy.join();
    EXPECT(idle_query == cudaSuccess, "an idle per-thread stream answered %s",
           cudaGetErrorName(idle_query));
    EXPECT(busy_query == cudaSuccess, "the busy stream: %s", cudaGetErrorName(busy_query));
    CHECK(cudaFree(sink));
  }

  // Stream 0 is this thread's stream: not ready while its kernel waits for a flag that another
  // (non-blocking) stream then sets.
  {
    int* flag = nullptr;
    CHECK(cudaMalloc(&flag, sizeof(int)));
    CHECK(cudaMemset(flag, 0, sizeof(int)));
    CHECK(cudaDeviceSynchronize());
    cudaStream_t side;
    CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    WaitFlag<<<1, 1, 0, cudaStreamPerThread>>>(flag);
    CHECK_LAUNCH();
    const cudaError_t while_waiting = cudaStreamQuery(0);
    static const int one = 1;
    CHECK(cudaMemcpyAsync(flag, &one, sizeof(int), cudaMemcpyHostToDevice, side));
    CHECK(cudaStreamSynchronize(side));
    CHECK(cudaStreamSynchronize(0));
    EXPECT(while_waiting == cudaErrorNotReady,
           "stream 0 answered %s while this thread's stream ran a kernel",
           cudaGetErrorName(while_waiting));
    CHECK(cudaStreamQuery(cudaStreamPerThread));
    CHECK(cudaStreamDestroy(side));
    CHECK(cudaFree(flag));
  }

  // The legacy default stream, named explicitly.
  const int n = 1024;
  int* d = nullptr;
  std::vector<int> h(n);
  CHECK(cudaMalloc(&d, n * sizeof(int)));
  CHECK(cudaMemsetAsync(d, 0, n * sizeof(int), cudaStreamLegacy));
  Step<<<n / 256, 256, 0, cudaStreamLegacy>>>(d, n, 1, 9);
  CHECK_LAUNCH();
  CHECK(cudaStreamSynchronize(cudaStreamLegacy));
  CHECK(cudaMemcpy(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) EXPECT(h[i] == 9, "legacy stream: h[%d] = %d", i, h[i]);
  CHECK(cudaFree(d));
  printf("rt_per_thread_stream: OK\n");
  return 0;
}
