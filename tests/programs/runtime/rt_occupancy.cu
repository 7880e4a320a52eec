// Occupancy APIs: cudaOccupancyMaxActiveBlocksPerMultiprocessor within the device's per-SM thread,
// block and shared-memory limits; cudaOccupancyMaxPotentialBlockSize (with and without a block
// size limit, and the variable-shared-memory form) gives a usable warp-multiple block size; a
// launch with the suggested configuration computes the right result.
#include "rt_check.h"

#include <vector>

__global__ void Saxpy(float a, const float* x, float* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] = a * x[i] + y[i];
}

__global__ void StaticShared16K(float* out) {
  __shared__ float tile[4096];
  tile[threadIdx.x] = (float)threadIdx.x;
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = tile[blockDim.x - 1 - threadIdx.x];
}

// Dynamic shared memory of one float per thread, for the variable-shared-memory query.
struct FloatPerThread {
  __host__ __device__ size_t operator()(int block) const { return (size_t)block * sizeof(float); }
};

int main() {
  cudaDeviceProp p;
  CHECK(cudaGetDeviceProperties(&p, 0));
  for (int block : {32, 128, 256, 1024}) {
    if (block > p.maxThreadsPerBlock) continue;
    int blocks = -1;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, Saxpy, block, 0));
    EXPECT(blocks >= 1, "block %d: %d active blocks", block, blocks);
    EXPECT(blocks * block <= p.maxThreadsPerMultiProcessor, "block %d: %d blocks exceed %d threads",
           block, blocks, p.maxThreadsPerMultiProcessor);
    EXPECT(blocks <= p.maxBlocksPerMultiProcessor, "block %d: %d blocks > %d", block, blocks,
           p.maxBlocksPerMultiProcessor);
  }
  // Shared memory bounds the number of resident blocks.
  int blocks = -1;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, StaticShared16K, 64, 0));
  EXPECT(blocks >= 1 && blocks * 16384 <= (int)p.sharedMemPerMultiprocessor,
         "16 KiB static shared: %d blocks per SM with %zu bytes", blocks,
         p.sharedMemPerMultiprocessor);
  const size_t dyn = 32 * 1024;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, Saxpy, 64, dyn));
  EXPECT(blocks >= 1 && blocks * dyn <= p.sharedMemPerMultiprocessor,
         "32 KiB dynamic shared: %d blocks per SM", blocks);
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, Saxpy, 128, 0,
                                                               cudaOccupancyDefault));
  EXPECT(blocks >= 1, "with flags: %d", blocks);

  int min_grid = -1, block_size = -1;
  CHECK(cudaOccupancyMaxPotentialBlockSize(&min_grid, &block_size, Saxpy, 0, 0));
  EXPECT(block_size >= 32 && block_size <= p.maxThreadsPerBlock && block_size % 32 == 0,
         "suggested block size %d", block_size);
  EXPECT(min_grid >= p.multiProcessorCount, "suggested min grid %d < %d SMs", min_grid,
         p.multiProcessorCount);
  int limited_grid = -1, limited_block = -1;
  CHECK(cudaOccupancyMaxPotentialBlockSize(&limited_grid, &limited_block, Saxpy, 0, 96));
  EXPECT(limited_block >= 32 && limited_block <= 96 && limited_block % 32 == 0,
         "limited block size %d", limited_block);
  int var_grid = -1, var_block = -1;
  CHECK(cudaOccupancyMaxPotentialBlockSizeVariableSMem(&var_grid, &var_block, Saxpy,
                                                       FloatPerThread(), 0));
  EXPECT(var_block >= 32 && var_block % 32 == 0 && var_grid >= 1, "variable smem: %d x %d",
         var_grid, var_block);
  size_t avail = 0;
  CHECK(cudaOccupancyAvailableDynamicSMemPerBlock(&avail, Saxpy, 1, 128));
  EXPECT(avail > 0 && avail <= p.sharedMemPerMultiprocessor, "available dynamic smem %zu", avail);

  // Launch with the suggested configuration (grid capped to keep the run short).
  const int n = 50000;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) x[i] = (float)(i % 50), y[i] = (float)(i % 7);
  float *dx = nullptr, *dy = nullptr;
  CHECK(cudaMalloc(&dx, n * sizeof(float)));
  CHECK(cudaMalloc(&dy, n * sizeof(float)));
  CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  int grid = min_grid < 64 ? min_grid : 64;
  Saxpy<<<grid, block_size>>>(2.0f, dx, dy, n);
  CHECK_SYNC();
  std::vector<float> out(n);
  CHECK(cudaMemcpy(out.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) EXPECT(out[i] == 2.0f * x[i] + y[i], "y[%d] = %g", i, out[i]);
  float* dout = nullptr;
  CHECK(cudaMalloc(&dout, 4 * 64 * sizeof(float)));
  StaticShared16K<<<4, 64>>>(dout);
  CHECK_SYNC();
  CHECK(cudaFree(dout));
  CHECK(cudaFree(dx));
  CHECK(cudaFree(dy));
  printf("rt_occupancy: OK (suggested %d blocks of %d)\n", min_grid, block_size);
  return 0;
}
