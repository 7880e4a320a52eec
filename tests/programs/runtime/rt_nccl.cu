// NCCL, unmodified, on the devices one process sees: communicators for every device
// (ncclCommInitAll), then an all-reduce (sum), a broadcast from the last rank and an all-gather,
// each result compared with the CPU. NCCL reads NVML before CUDA (rgpu's NVML face answers it).
#include <nccl.h>

#include <vector>

#include "rt_check.h"

#define NCCL_CHECK(call) CHECK_LIBRARY(call, ncclSuccess, ncclGetErrorString)

int main() {
  int n = 0;
  CHECK(cudaGetDeviceCount(&n));
  std::vector<int> devices(n);
  for (int i = 0; i < n; ++i) devices[i] = i;
  std::vector<ncclComm_t> comms(n);
  NCCL_CHECK(ncclCommInitAll(comms.data(), n, devices.data()));
  const size_t count = 4096 + 7;
  std::vector<float*> send(n), recv(n), gathered(n);
  std::vector<cudaStream_t> streams(n);
  for (int i = 0; i < n; ++i) {
    CHECK(cudaSetDevice(i));
    CHECK(cudaStreamCreate(&streams[i]));
    CHECK(cudaMalloc(&send[i], count * sizeof(float)));
    CHECK(cudaMalloc(&recv[i], count * sizeof(float)));
    CHECK(cudaMalloc(&gathered[i], n * count * sizeof(float)));
    std::vector<float> host(count);
    for (size_t k = 0; k < count; ++k) host[k] = static_cast<float>((i + 1) * (k % 97));
    CHECK(cudaMemcpy(send[i], host.data(), count * sizeof(float), cudaMemcpyHostToDevice));
  }
  auto wait_all = [&] {
    for (int i = 0; i < n; ++i) {
      CHECK(cudaSetDevice(i));
      CHECK(cudaStreamSynchronize(streams[i]));
    }
  };
  auto fetch = [&](int i, const float* d, size_t elements) {
    std::vector<float> host(elements);
    CHECK(cudaSetDevice(i));
    CHECK(cudaMemcpy(host.data(), d, elements * sizeof(float), cudaMemcpyDeviceToHost));
    return host;
  };
  // All-reduce: every rank gets the sum of all ranks' buffers.
  NCCL_CHECK(ncclGroupStart());
  for (int i = 0; i < n; ++i) {
    NCCL_CHECK(ncclAllReduce(send[i], recv[i], count, ncclFloat, ncclSum, comms[i], streams[i]));
  }
  NCCL_CHECK(ncclGroupEnd());
  wait_all();
  const float ranks_sum = n * (n + 1) / 2.0f;
  for (int i = 0; i < n; ++i) {
    std::vector<float> got = fetch(i, recv[i], count);
    for (size_t k = 0; k < count; ++k) {
      EXPECT(got[k] == ranks_sum * (k % 97), "all-reduce: rank %d [%zu] = %f", i, k, got[k]);
    }
  }
  // Broadcast of the last rank's buffer.
  NCCL_CHECK(ncclGroupStart());
  for (int i = 0; i < n; ++i) {
    NCCL_CHECK(ncclBroadcast(send[i], recv[i], count, ncclFloat, n - 1, comms[i], streams[i]));
  }
  NCCL_CHECK(ncclGroupEnd());
  wait_all();
  for (int i = 0; i < n; ++i) {
    std::vector<float> got = fetch(i, recv[i], count);
    for (size_t k = 0; k < count; ++k) {
      EXPECT(got[k] == static_cast<float>(n * (k % 97)), "broadcast: rank %d [%zu]", i, k);
    }
  }
  // All-gather: rank r's buffer lands at r * count in every rank's result.
  NCCL_CHECK(ncclGroupStart());
  for (int i = 0; i < n; ++i) {
    NCCL_CHECK(ncclAllGather(send[i], gathered[i], count, ncclFloat, comms[i], streams[i]));
  }
  NCCL_CHECK(ncclGroupEnd());
  wait_all();
  for (int i = 0; i < n; ++i) {
    std::vector<float> got = fetch(i, gathered[i], n * count);
    for (int r = 0; r < n; ++r) {
      for (size_t k = 0; k < count; ++k) {
        EXPECT(got[r * count + k] == static_cast<float>((r + 1) * (k % 97)),
               "all-gather: rank %d, block %d [%zu]", i, r, k);
      }
    }
  }
  for (int i = 0; i < n; ++i) {
    NCCL_CHECK(ncclCommDestroy(comms[i]));
    CHECK(cudaSetDevice(i));
    CHECK(cudaFree(send[i]));
    CHECK(cudaFree(recv[i]));
    CHECK(cudaFree(gathered[i]));
    CHECK(cudaStreamDestroy(streams[i]));
  }
  printf("rt_nccl: OK (%d device%s)\n", n, n == 1 ? "" : "s");
  return 0;
}
