// Shared memory: a static __shared__ tile (block-wise reversal), dynamic extern __shared__ memory
// sized at launch (block prefix sums with __syncthreads), two arrays of different types carved
// from one dynamic allocation, cudaFuncGetAttributes' static size, and opting in to more than
// 48 KiB of dynamic shared memory with cudaFuncSetAttribute where the device allows it.
#include "rt_check.h"

#include <vector>

__global__ void ReverseBlocks(const int* in, int* out) {
  __shared__ int tile[256];
  int base = blockIdx.x * 256;
  tile[threadIdx.x] = in[base + threadIdx.x];
  __syncthreads();
  out[base + threadIdx.x] = tile[255 - threadIdx.x];
}

// Inclusive prefix sum within each block (Hillis-Steele, double-buffered in dynamic memory).
__global__ void BlockScan(const int* in, int* out) {
  extern __shared__ int buf[];  // 2 * blockDim.x ints
  int t = threadIdx.x, n = blockDim.x;
  int* src = buf;
  int* dst = buf + n;
  src[t] = in[blockIdx.x * n + t];
  __syncthreads();
  for (int step = 1; step < n; step *= 2) {
    dst[t] = t >= step ? src[t] + src[t - step] : src[t];
    __syncthreads();
    int* tmp = src;
    src = dst;
    dst = tmp;
  }
  out[blockIdx.x * n + t] = src[t];
}

// Dynamic memory holding blockDim.x doubles followed by blockDim.x chars.
__global__ void MixedTypes(double* out) {
  extern __shared__ double dyn[];
  char* flags = reinterpret_cast<char*>(dyn + blockDim.x);
  int t = threadIdx.x;
  dyn[t] = t * 0.25;
  flags[t] = (char)(t % 3);
  __syncthreads();
  int o = blockDim.x - 1 - t;
  out[blockIdx.x * blockDim.x + t] = dyn[o] * flags[o] + blockIdx.x;
}

// Uses `words` ints of dynamic shared memory: every thread fills a strided part, then sums another.
__global__ void BigShared(int words, long long* out) {
  extern __shared__ int big[];
  for (int i = threadIdx.x; i < words; i += blockDim.x) big[i] = i;
  __syncthreads();
  long long sum = 0;
  for (int i = blockDim.x - 1 - threadIdx.x; i < words; i += blockDim.x) sum += big[i];
  atomicAdd((unsigned long long*)out, (unsigned long long)sum);
}

int main() {
  const int blocks = 64, n = blocks * 256;
  std::vector<int> h(n), out(n);
  for (int i = 0; i < n; ++i) h[i] = (i * 37) % 1001 - 500;
  int *din = nullptr, *dout = nullptr;
  CHECK(cudaMalloc(&din, n * sizeof(int)));
  CHECK(cudaMalloc(&dout, n * sizeof(int)));
  CHECK(cudaMemcpy(din, h.data(), n * sizeof(int), cudaMemcpyHostToDevice));

  ReverseBlocks<<<blocks, 256>>>(din, dout);
  CHECK_SYNC();
  CHECK(cudaMemcpy(out.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    int b = i / 256, t = i % 256;
    EXPECT(out[i] == h[b * 256 + 255 - t], "reverse[%d] = %d", i, out[i]);
  }

  for (int block : {32, 128, 512}) {
    BlockScan<<<n / block, block, 2 * block * sizeof(int)>>>(din, dout);
    CHECK_SYNC();
    CHECK(cudaMemcpy(out.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int b = 0; b < n / block; ++b) {
      int acc = 0;
      for (int t = 0; t < block; ++t) {
        acc += h[b * block + t];
        EXPECT(out[b * block + t] == acc, "scan(block %d)[%d] = %d, want %d", block, b * block + t,
               out[b * block + t], acc);
      }
    }
  }

  const int mb = 96, mblocks = 8;
  double* dmixed = nullptr;
  CHECK(cudaMalloc(&dmixed, mb * mblocks * sizeof(double)));
  MixedTypes<<<mblocks, mb, mb*(sizeof(double) + sizeof(char))>>>(dmixed);
  CHECK_SYNC();
  std::vector<double> mixed(mb * mblocks);
  CHECK(cudaMemcpy(mixed.data(), dmixed, mixed.size() * sizeof(double), cudaMemcpyDeviceToHost));
  for (int b = 0; b < mblocks; ++b)
    for (int t = 0; t < mb; ++t) {
      int o = mb - 1 - t;
      double want = o * 0.25 * (o % 3) + b;
      EXPECT(mixed[b * mb + t] == want, "mixed[%d][%d] = %g, want %g", b, t, mixed[b * mb + t],
             want);
    }

  cudaFuncAttributes attrs;
  CHECK(cudaFuncGetAttributes(&attrs, ReverseBlocks));
  EXPECT(attrs.sharedSizeBytes == 256 * sizeof(int), "static shared size %zu",
         attrs.sharedSizeBytes);
  EXPECT(attrs.maxThreadsPerBlock >= 256, "maxThreadsPerBlock %d", attrs.maxThreadsPerBlock);
  CHECK(cudaFuncGetAttributes(&attrs, BlockScan));
  EXPECT(attrs.sharedSizeBytes == 0, "BlockScan static shared size %zu", attrs.sharedSizeBytes);

  // More than the default 48 KiB of dynamic shared memory, after opting in.
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  long long* dsum = nullptr;
  CHECK(cudaMalloc(&dsum, sizeof(long long)));
  size_t bytes = prop.sharedMemPerBlockOptin < 64 * 1024 ? prop.sharedMemPerBlockOptin : 64 * 1024;
  if (bytes > 48 * 1024) {
    CHECK(cudaFuncSetAttribute(BigShared, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    CHECK(cudaFuncGetAttributes(&attrs, BigShared));
    EXPECT((size_t)attrs.maxDynamicSharedSizeBytes == bytes, "maxDynamicSharedSizeBytes %d",
           attrs.maxDynamicSharedSizeBytes);
  } else {
    bytes = 48 * 1024;
  }
  int words = (int)(bytes / sizeof(int));
  CHECK(cudaMemset(dsum, 0, sizeof(long long)));
  BigShared<<<2, 256, bytes>>>(words, dsum);
  CHECK_SYNC();
  long long sum = 0;
  CHECK(cudaMemcpy(&sum, dsum, sizeof sum, cudaMemcpyDeviceToHost));
  long long want = 2LL * words * (words - 1) / 2;
  EXPECT(sum == want, "big shared sum %lld, want %lld (%zu bytes)", sum, want, bytes);

  CHECK(cudaFree(dsum));
  CHECK(cudaFree(dmixed));
  CHECK(cudaFree(din));
  CHECK(cudaFree(dout));
  printf("rt_shared_memory: OK (dynamic shared up to %zu bytes)\n", bytes);
  return 0;
}
