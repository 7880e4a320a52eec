// Reductions with shared memory and __syncthreads: a two-pass tree reduction (per-block partial
// results, then one block over the partials) for an integer sum, a float sum and an integer
// maximum, with block sizes 64, 256 and 1024; integer results exact, the float sum within 1e-5.
#include "rt_check.h"

#include <vector>

struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
  template <typename T>
  __device__ T identity() const {
    return T(0);
  }
};
struct MaxOp {
  __device__ int operator()(int a, int b) const { return a > b ? a : b; }
  template <typename T>
  __device__ T identity() const {
    return -2147483647 - 1;
  }
};

// Each block reduces 2 * blockDim.x elements into out[blockIdx.x]; blockDim.x is a power of two.
template <typename T, typename Op>
__global__ void BlockReduce(const T* in, T* out, int n, Op op) {
  extern __shared__ unsigned char smem[];
  T* s = reinterpret_cast<T*>(smem);
  int t = threadIdx.x;
  int i = blockIdx.x * blockDim.x * 2 + t;
  T v = op.template identity<T>();
  if (i < n) v = in[i];
  if (i + (int)blockDim.x < n) v = op(v, in[i + blockDim.x]);
  s[t] = v;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (t < half) s[t] = op(s[t], s[t + half]);
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

template <typename T, typename Op>
T Reduce(const T* d_in, int n, int block, Op op) {
  int blocks = (n + 2 * block - 1) / (2 * block);
  T* partial = nullptr;
  T* result = nullptr;
  CHECK(cudaMalloc(&partial, blocks * sizeof(T)));
  CHECK(cudaMalloc(&result, sizeof(T)));
  BlockReduce<T, Op><<<blocks, block, block * sizeof(T)>>>(d_in, partial, n, op);
  CHECK_LAUNCH();
  int final_block = 1;
  while (final_block * 2 < blocks) final_block *= 2;
  if (final_block > 1024) final_block = 1024;
  EXPECT(2 * final_block >= blocks, "too many partial results (%d)", blocks);
  BlockReduce<T, Op><<<1, final_block, final_block * sizeof(T)>>>(partial, result, blocks, op);
  CHECK_SYNC();
  T h;
  CHECK(cudaMemcpy(&h, result, sizeof h, cudaMemcpyDeviceToHost));
  CHECK(cudaFree(partial));
  CHECK(cudaFree(result));
  return h;
}

int main() {
  const int n = 100000;
  std::vector<int> vi(n);
  std::vector<float> vf(n);
  long long want_sum = 0;
  int want_max = -2147483647 - 1;
  double want_fsum = 0;
  for (int i = 0; i < n; ++i) {
    vi[i] = (int)((i * 7919LL) % 2001) - 1000;
    if (i == 77777) vi[i] = 123456;
    vf[i] = (float)((i % 313) - 150) * 0.125f;
    want_sum += vi[i];
    want_max = vi[i] > want_max ? vi[i] : want_max;
    want_fsum += vf[i];
  }
  int* di = nullptr;
  float* df = nullptr;
  CHECK(cudaMalloc(&di, n * sizeof(int)));
  CHECK(cudaMalloc(&df, n * sizeof(float)));
  CHECK(cudaMemcpy(di, vi.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(df, vf.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  for (int block : {64, 256, 1024}) {
    int sum = Reduce(di, n, block, SumOp());
    EXPECT(sum == want_sum, "block %d: int sum %d, want %lld", block, sum, want_sum);
    int mx = Reduce(di, n, block, MaxOp());
    EXPECT(mx == want_max, "block %d: max %d, want %d", block, mx, want_max);
    float fs = Reduce(df, n, block, SumOp());
    EXPECT(Near(fs, want_fsum, 1e-5, 1e-2), "block %d: float sum %.9g, want %.9g", block, fs,
           want_fsum);
  }
  CHECK(cudaFree(di));
  CHECK(cudaFree(df));
  printf("rt_reduction: OK\n");
  return 0;
}
