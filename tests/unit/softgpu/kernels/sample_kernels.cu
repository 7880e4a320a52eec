// Kernels in the style of common CUDA samples, run by samples_test.cc against host references.
#include <cstdint>

#define TILE 16

// C = A * B with shared-memory tiles (n multiple of TILE).
extern "C" __global__ void matmul_tiled(const float* a, const float* b, float* c, int n) {
  __shared__ float ta[TILE][TILE];
  __shared__ float tb[TILE][TILE];
  int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  float sum = 0.f;
  for (int t = 0; t < n / TILE; ++t) {
    ta[threadIdx.y][threadIdx.x] = a[row * n + t * TILE + threadIdx.x];
    tb[threadIdx.y][threadIdx.x] = b[(t * TILE + threadIdx.y) * n + col];
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) sum += ta[threadIdx.y][k] * tb[k][threadIdx.x];
    __syncthreads();
  }
  c[row * n + col] = sum;
}

// 256-bin histogram with shared-memory atomics, merged with global atomics.
extern "C" __global__ void histogram(const unsigned char* data, int n, unsigned* bins) {
  __shared__ unsigned local[256];
  for (int i = threadIdx.x; i < 256; i += blockDim.x) local[i] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    atomicAdd(&local[data[i]], 1u);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 256; i += blockDim.x) atomicAdd(&bins[i], local[i]);
}

// Inclusive scan of each block's slice with warp shuffles, then per-warp totals.
extern "C" __global__ void block_scan(const int* in, int* out) {
  __shared__ int warp_sums[32];
  int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  int v = in[blockIdx.x * blockDim.x + t];
  for (int o = 1; o < 32; o <<= 1) {
    int n = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += n;
  }
  if (lane == 31) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    int s = lane < (blockDim.x >> 5) ? warp_sums[lane] : 0;
    for (int o = 1; o < 32; o <<= 1) {
      int n = __shfl_up_sync(0xffffffffu, s, o);
      if (lane >= o) s += n;
    }
    warp_sums[lane] = s;
  }
  __syncthreads();
  if (warp > 0) v += warp_sums[warp - 1];
  out[blockIdx.x * blockDim.x + t] = v;
}

// Matrix transpose through a padded shared tile (avoids bank conflicts on a GPU).
extern "C" __global__ void transpose(const float* in, float* out, int w, int h) {
  __shared__ float tile[TILE][TILE + 1];
  int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
  if (x < w && y < h) tile[threadIdx.y][threadIdx.x] = in[y * w + x];
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x;
  y = blockIdx.x * TILE + threadIdx.y;
  if (x < h && y < w) out[y * h + x] = tile[threadIdx.x][threadIdx.y];
}

// One n-body step: accelerations from all bodies (float4 position + mass).
extern "C" __global__ void nbody_accel(const float4* pos, float3* acc, int n, float soft2) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float4 p = pos[i];
  float3 a = {0.f, 0.f, 0.f};
  for (int j = 0; j < n; ++j) {
    float4 q = pos[j];
    float dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;
    float d2 = dx * dx + dy * dy + dz * dz + soft2;
    float inv = rsqrtf(d2);
    float s = q.w * inv * inv * inv;
    a.x += dx * s;
    a.y += dy * s;
    a.z += dz * s;
  }
  acc[i] = a;
}

// Mandelbrot escape counts (heavy divergence).
extern "C" __global__ void mandelbrot(int* counts, int w, int h, int max_iter) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w || y >= h) return;
  float cr = -2.0f + 3.0f * x / w, ci = -1.5f + 3.0f * y / h;
  float zr = 0.f, zi = 0.f;
  int it = 0;
  while (it < max_iter && zr * zr + zi * zi <= 4.f) {
    float t = zr * zr - zi * zi + cr;
    zi = 2.f * zr * zi + ci;
    zr = t;
    ++it;
  }
  counts[y * w + x] = it;
}

// Bitonic sort of one block's 512 keys in shared memory.
extern "C" __global__ void bitonic_sort(unsigned* keys) {
  __shared__ unsigned s[512];
  int t = threadIdx.x;
  s[t] = keys[blockIdx.x * 512 + t];
  s[t + 256] = keys[blockIdx.x * 512 + t + 256];
  __syncthreads();
  for (int size = 2; size <= 512; size <<= 1) {
    for (int stride = size / 2; stride > 0; stride >>= 1) {
      int pos = 2 * t - (t & (stride - 1));
      bool up = ((pos & size) == 0);
      unsigned a = s[pos], b = s[pos + stride];
      if ((a > b) == up) {
        s[pos] = b;
        s[pos + stride] = a;
      }
      __syncthreads();
    }
  }
  keys[blockIdx.x * 512 + t] = s[t];
  keys[blockIdx.x * 512 + t + 256] = s[t + 256];
}

// 64-bit hashing with integer mixing (mul.hi.u64, shifts, xor).
extern "C" __global__ void hash64(const uint64_t* in, uint64_t* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  uint64_t x = in[i];
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  out[i] = x + __umul64hi(x, 0x9e3779b97f4a7c15ull);
}
