// 2D grids and blocks: a tiled matrix transpose through padded shared memory (64x64 and a 96x48
// rectangle, using blockIdx/threadIdx .x and .y) and a 64x64 tiled matrix multiply with 16x16
// tiles; integer-valued floats make both results exact.
#include "rt_check.h"

#include <vector>

constexpr int kTile = 16;

__global__ void Transpose(const float* in, float* out, int rows, int cols) {
  __shared__ float tile[kTile][kTile + 1];
  int x = blockIdx.x * kTile + threadIdx.x;  // column in `in`
  int y = blockIdx.y * kTile + threadIdx.y;  // row in `in`
  if (x < cols && y < rows) tile[threadIdx.y][threadIdx.x] = in[y * cols + x];
  __syncthreads();
  int tx = blockIdx.y * kTile + threadIdx.x;  // column in `out` (= row in `in`)
  int ty = blockIdx.x * kTile + threadIdx.y;  // row in `out`
  if (tx < rows && ty < cols) out[ty * rows + tx] = tile[threadIdx.x][threadIdx.y];
}

// C = A * B for n x n matrices, n a multiple of kTile.
__global__ void MatMul(const float* a, const float* b, float* c, int n) {
  __shared__ float as[kTile][kTile];
  __shared__ float bs[kTile][kTile];
  int row = blockIdx.y * kTile + threadIdx.y;
  int col = blockIdx.x * kTile + threadIdx.x;
  float acc = 0.0f;
  for (int t = 0; t < n / kTile; ++t) {
    as[threadIdx.y][threadIdx.x] = a[row * n + t * kTile + threadIdx.x];
    bs[threadIdx.y][threadIdx.x] = b[(t * kTile + threadIdx.y) * n + col];
    __syncthreads();
    for (int k = 0; k < kTile; ++k) acc += as[threadIdx.y][k] * bs[k][threadIdx.x];
    __syncthreads();
  }
  c[row * n + col] = acc;
}

static void CheckTranspose(int rows, int cols) {
  std::vector<float> in(rows * cols), out(rows * cols, -1.0f);
  for (int i = 0; i < rows * cols; ++i) in[i] = (float)(i * 3 % 10007);
  float *din = nullptr, *dout = nullptr;
  CHECK(cudaMalloc(&din, in.size() * sizeof(float)));
  CHECK(cudaMalloc(&dout, out.size() * sizeof(float)));
  CHECK(cudaMemcpy(din, in.data(), in.size() * sizeof(float), cudaMemcpyHostToDevice));
  dim3 block(kTile, kTile), grid(GridFor(cols, kTile), GridFor(rows, kTile));
  Transpose<<<grid, block>>>(din, dout, rows, cols);
  CHECK_SYNC();
  CHECK(cudaMemcpy(out.data(), dout, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      EXPECT(out[c * rows + r] == in[r * cols + c], "%dx%d transpose: out(%d,%d) = %g, want %g",
             rows, cols, c, r, out[c * rows + r], in[r * cols + c]);
  CHECK(cudaFree(din));
  CHECK(cudaFree(dout));
}

int main() {
  CheckTranspose(64, 64);
  CheckTranspose(96, 48);

  const int n = 64;
  std::vector<float> a(n * n), b(n * n), c(n * n), want(n * n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      a[i * n + j] = (float)((i + 2 * j) % 7 - 3);
      b[i * n + j] = (float)((i * j) % 5 - 2);
    }
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int k = 0; k < n; ++k) acc += a[i * n + k] * b[k * n + j];
      want[i * n + j] = acc;
    }
  float *da, *db, *dc;
  CHECK(cudaMalloc(&da, n * n * sizeof(float)));
  CHECK(cudaMalloc(&db, n * n * sizeof(float)));
  CHECK(cudaMalloc(&dc, n * n * sizeof(float)));
  CHECK(cudaMemcpy(da, a.data(), n * n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, b.data(), n * n * sizeof(float), cudaMemcpyHostToDevice));
  MatMul<<<dim3(n / kTile, n / kTile), dim3(kTile, kTile)>>>(da, db, dc, n);
  CHECK_SYNC();
  CHECK(cudaMemcpy(c.data(), dc, n * n * sizeof(float), cudaMemcpyDeviceToHost));
  ExpectNearArrays("matmul", c.data(), want.data(), n * n, 0, 0);
  CHECK(cudaFree(da));
  CHECK(cudaFree(db));
  CHECK(cudaFree(dc));
  printf("rt_matrix_2d: OK\n");
  return 0;
}
