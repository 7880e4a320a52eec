// A long-running program for the migration tests (tests/e2e/migrate.sh): a loop of kernels
// accumulating state in device memory, on two streams ordered by events, with a module global
// every kernel adds to, a captured graph launched every iteration, and a block of extra device
// memory it checks at the end. It prints "iteration N" as it goes (the tests move its session
// meanwhile) and at the end compares everything with the same computation done on the host:
// "result ok" and exit 0 only when every value is exact.
// With MODE "kernels" the program never asks for the global's address (kernels set and read it),
// as a move to a backend that cannot place module variables at fixed addresses needs.
//   driver_migrate_loop [ITERATIONS] [EXTRA_MIB] [SLEEP_MS] [MODE]
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define RT_CHECK(call)                                                                     \
  do {                                                                                     \
    cudaError_t rt_error_ = (call);                                                        \
    if (rt_error_ != cudaSuccess) {                                                        \
      fprintf(stderr, "%s:%d: %s failed: %s (CUDA_ERROR %d)\n", __FILE__, __LINE__, #call, \
              cudaGetErrorName(rt_error_), (int)rt_error_);                                \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

using u64 = unsigned long long;

__device__ u64 total;  // every kernel adds to it

__global__ void accumulate(u64* v, int n, u64 step) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    v[i] = v[i] * 3 + step + i;
    atomicAdd(&total, step);
  }
}

__global__ void mix(u64* a, const u64* b, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    a[i] ^= (b[i] >> 3) + i;
    atomicAdd(&total, 1);
  }
}

__global__ void set_total(u64 value) { total = value; }

__global__ void read_total(u64* out) { *out = total; }

__global__ void fill(u64* p, size_t n, u64 seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    p[i] = seed * 0x9e3779b97f4a7c15ull + i;
  }
}

namespace {

constexpr int kN = 1024;
constexpr int kThreads = 128;
constexpr u64 kGraphStep = 1000;

void Accumulate(std::vector<u64>& v, u64 step, u64* t) {
  for (int i = 0; i < kN; ++i) {
    v[i] = v[i] * 3 + step + i;
    *t += step;
  }
}
void Mix(std::vector<u64>& a, const std::vector<u64>& b, u64* t) {
  for (int i = 0; i < kN; ++i) {
    a[i] ^= (b[i] >> 3) + i;
    *t += 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? atoi(argv[1]) : 300;
  const size_t extra_mib = argc > 2 ? strtoull(argv[2], nullptr, 10) : 4;
  const int sleep_ms = argc > 3 ? atoi(argv[3]) : 10;
  const bool symbol_copies = !(argc > 4 && strcmp(argv[4], "kernels") == 0);
  const int blocks = (kN + kThreads - 1) / kThreads;

  u64 *a = nullptr, *b = nullptr, *extra = nullptr;
  RT_CHECK(cudaMalloc(&a, kN * sizeof(u64)));
  RT_CHECK(cudaMalloc(&b, kN * sizeof(u64)));
  const size_t extra_words = extra_mib * (1 << 20) / sizeof(u64);
  if (extra_words > 0) RT_CHECK(cudaMalloc(&extra, extra_words * sizeof(u64)));
  RT_CHECK(cudaMemset(a, 0, kN * sizeof(u64)));
  RT_CHECK(cudaMemset(b, 0, kN * sizeof(u64)));
  const u64 start_total = 7;
  if (symbol_copies) {
    RT_CHECK(cudaMemcpyToSymbol(total, &start_total, sizeof start_total));
  } else {
    set_total<<<1, 1>>>(start_total);
    RT_CHECK(cudaGetLastError());
  }

  cudaStream_t s1, s2;
  RT_CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  RT_CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  cudaEvent_t e1, e2, started, stopped;
  RT_CHECK(cudaEventCreateWithFlags(&e1, cudaEventDisableTiming));
  RT_CHECK(cudaEventCreateWithFlags(&e2, cudaEventDisableTiming));
  RT_CHECK(cudaEventCreate(&started));
  RT_CHECK(cudaEventCreate(&stopped));
  if (extra_words > 0) fill<<<64, 256, 0, s1>>>(extra, extra_words, 42);

  // The graph: stream s1's share of every iteration, captured once.
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  RT_CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  accumulate<<<blocks, kThreads, 0, s1>>>(a, kN, kGraphStep);
  mix<<<blocks, kThreads, 0, s1>>>(a, b, kN);
  RT_CHECK(cudaStreamEndCapture(s1, &graph));
  RT_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  RT_CHECK(cudaEventRecord(started, s1));

  for (int it = 0; it < iterations; ++it) {
    accumulate<<<blocks, kThreads, 0, s1>>>(a, kN, it);
    RT_CHECK(cudaEventRecord(e1, s1));
    RT_CHECK(cudaStreamWaitEvent(s2, e1, 0));
    accumulate<<<blocks, kThreads, 0, s2>>>(b, kN, it + 1);
    mix<<<blocks, kThreads, 0, s2>>>(b, a, kN);
    RT_CHECK(cudaEventRecord(e2, s2));
    RT_CHECK(cudaStreamWaitEvent(s1, e2, 0));
    RT_CHECK(cudaGraphLaunch(exec, s1));
    if (it % 10 == 9) {
      RT_CHECK(cudaStreamSynchronize(s1));
      printf("iteration %d\n", it + 1);
      fflush(stdout);
      if (sleep_ms > 0) usleep(sleep_ms * 1000);
    }
  }
  RT_CHECK(cudaEventRecord(stopped, s1));
  RT_CHECK(cudaStreamSynchronize(s1));
  RT_CHECK(cudaStreamSynchronize(s2));
  float elapsed = -1;
  RT_CHECK(cudaEventElapsedTime(&elapsed, started, stopped));

  std::vector<u64> got_a(kN), got_b(kN);
  u64 got_total = 0;
  RT_CHECK(cudaMemcpy(got_a.data(), a, kN * sizeof(u64), cudaMemcpyDeviceToHost));
  RT_CHECK(cudaMemcpy(got_b.data(), b, kN * sizeof(u64), cudaMemcpyDeviceToHost));
  if (symbol_copies) {
    RT_CHECK(cudaMemcpyFromSymbol(&got_total, total, sizeof got_total));
  } else {
    u64* total_out = nullptr;
    RT_CHECK(cudaMalloc(&total_out, sizeof(u64)));
    read_total<<<1, 1>>>(total_out);
    RT_CHECK(cudaMemcpy(&got_total, total_out, sizeof got_total, cudaMemcpyDeviceToHost));
    RT_CHECK(cudaFree(total_out));
  }
  bool extra_ok = true;
  if (extra_words > 0) {
    std::vector<u64> got_extra(extra_words);
    RT_CHECK(
        cudaMemcpy(got_extra.data(), extra, extra_words * sizeof(u64), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < extra_words && extra_ok; ++i) {
      extra_ok = got_extra[i] == 42 * 0x9e3779b97f4a7c15ull + i;
    }
  }

  // The same work on the host, in the order the events impose.
  std::vector<u64> want_a(kN, 0), want_b(kN, 0);
  u64 want_total = start_total;
  for (int it = 0; it < iterations; ++it) {
    Accumulate(want_a, it, &want_total);
    Accumulate(want_b, it + 1, &want_total);
    Mix(want_b, want_a, &want_total);
    Accumulate(want_a, kGraphStep, &want_total);
    Mix(want_a, want_b, &want_total);
  }
  const bool ok =
      got_a == want_a && got_b == want_b && got_total == want_total && extra_ok && elapsed >= 0;
  u64 checksum = got_total;
  for (int i = 0; i < kN; ++i) checksum = checksum * 31 + got_a[i] + 7 * got_b[i];
  if (!ok) {
    fprintf(stderr, "result wrong: a %s, b %s, total %llu (want %llu), extra %s, elapsed %f\n",
            got_a == want_a ? "ok" : "differs", got_b == want_b ? "ok" : "differs", got_total,
            want_total, extra_ok ? "ok" : "differs", elapsed);
    return 1;
  }
  RT_CHECK(cudaGraphExecDestroy(exec));
  RT_CHECK(cudaGraphDestroy(graph));
  printf("result ok %llx after %d iterations\n", checksum, iterations);
  return 0;
}
