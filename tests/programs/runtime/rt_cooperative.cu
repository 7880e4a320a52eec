// Cooperative launches through the runtime: cudaLaunchCooperativeKernel on as many blocks as the
// device can hold at once (from the occupancy calculator), each phase of a grid-wide reduction
// separated by cooperative_groups' grid.sync(), the result compared with the CPU over several
// rounds; the grid group is valid and sized as launched; a grid too large to be co-resident is
// refused with cudaErrorCooperativeLaunchTooLarge
#include <cooperative_groups.h>

#include <vector>

#include "rt_check.h"

namespace cg = cooperative_groups;

// Every block sums its share into partial[block]; after a grid-wide barrier block 0 adds the
// partials; after another barrier every thread reads the total back into out.
__global__ void GridSum(const int* in, int n, int* partial, int* total, int* out, int rounds) {
  cg::grid_group grid = cg::this_grid();
  __shared__ int block_sum;
  for (int round = 0; round < rounds; ++round) {
    if (threadIdx.x == 0) block_sum = 0;
    __syncthreads();
    int mine = 0;
    for (long long i = grid.thread_rank(); i < n; i += grid.size()) mine += in[i] * (round + 1);
    atomicAdd(&block_sum, mine);
    __syncthreads();
    if (threadIdx.x == 0) partial[blockIdx.x] = block_sum;
    grid.sync();
    if (grid.thread_rank() == 0) {
      int sum = 0;
      for (unsigned b = 0; b < gridDim.x; ++b) sum += partial[b];
      *total = sum;
    }
    grid.sync();
    if (grid.thread_rank() == 0) out[round] = *total;
    grid.sync();
  }
  if (grid.thread_rank() == 0 && (!grid.is_valid() || grid.size() != gridDim.x * blockDim.x)) {
    out[0] = -1;
  }
}

int main() {
  int supported = 0;
  CHECK(cudaDeviceGetAttribute(&supported, cudaDevAttrCooperativeLaunch, 0));
  if (!supported) {
    fprintf(stderr, "cooperative launches not supported\n");
    return 1;
  }
  const int threads = 128;
  int per_sm = 0, sms = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, GridSum, threads, 0));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int blocks = per_sm * sms;
  if (blocks < 1) {
    fprintf(stderr, "occupancy says no block fits\n");
    return 1;
  }
  const int n = 100000, rounds = 3;
  std::vector<int> host(n);
  long long want = 0;
  for (int i = 0; i < n; ++i) {
    host[i] = (i * 7) % 13 - 6;
    want += host[i];
  }
  int *in, *partial, *total, *out;
  CHECK(cudaMalloc(&in, n * sizeof(int)));
  CHECK(cudaMalloc(&partial, blocks * sizeof(int)));
  CHECK(cudaMalloc(&total, sizeof(int)));
  CHECK(cudaMalloc(&out, rounds * sizeof(int)));
  CHECK(cudaMemcpy(in, host.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  int n_arg = n, rounds_arg = rounds;
  void* args[] = {&in, &n_arg, &partial, &total, &out, &rounds_arg};
  CHECK(cudaLaunchCooperativeKernel((void*)GridSum, blocks, threads, args, 0, 0));
  CHECK_SYNC();
  int got[rounds];
  CHECK(cudaMemcpy(got, out, sizeof got, cudaMemcpyDeviceToHost));
  for (int r = 0; r < rounds; ++r) {
    if (got[r] != want * (r + 1)) {
      fprintf(stderr, "round %d: %d, want %lld (%d blocks)\n", r, got[r], want * (r + 1), blocks);
      return 1;
    }
  }
  // A grid far larger than the device holds at once.
  cudaError_t e = cudaLaunchCooperativeKernel((void*)GridSum, blocks * 64 + 1, threads, args, 0, 0);
  if (e != cudaErrorCooperativeLaunchTooLarge) {
    fprintf(stderr, "an oversized cooperative grid gave %s\n", cudaGetErrorName(e));
    return 1;
  }
  cudaGetLastError();
  CHECK(cudaFree(in));
  CHECK(cudaFree(partial));
  CHECK(cudaFree(total));
  CHECK(cudaFree(out));
  printf("cooperative: %d blocks, %d rounds OK\n", blocks, rounds);
  return 0;
}
