// NVIDIA's cuBLAS, unmodified, through the driver: cublasSgemm and cublasSdot on small matrices
// compared with the CPU, on the default stream and on a stream of the program's own. cuBLAS and
// cuBLASLt reach the driver through private export tables (TOOLS_TLS, the context table
// 21318c60-...; see docs/export_tables.md) and run their compute_120 PTX kernels.
#include <cublas_v2.h>

#include <vector>

#include "rt_check.h"

// Checks that a cuBLAS call returns CUBLAS_STATUS_SUCCESS.
#define CHECK_CUBLAS(call)                                                      \
  do {                                                                          \
    cublasStatus_t check_st_ = (call);                                          \
    if (check_st_ != CUBLAS_STATUS_SUCCESS) {                                   \
      fprintf(stderr, "%s:%d: %s failed: %s (%d)\n", __FILE__, __LINE__, #call, \
              cublasGetStatusName(check_st_), (int)check_st_);                  \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)

int main() {
  const int m = 37, n = 29, k = 23;
  std::vector<float> a(m * k), b(k * n), c(m * n), want(m * n);
  for (int i = 0; i < m * k; ++i) a[i] = (float)((i * 7) % 13) - 6.0f;
  for (int i = 0; i < k * n; ++i) b[i] = (float)((i * 5) % 11) * 0.25f - 1.0f;
  for (int i = 0; i < m * n; ++i) c[i] = (float)(i % 5);
  const float alpha = 1.5f, beta = -0.5f;
  // Column-major C = alpha * A * B + beta * C.
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      double s = 0;
      for (int p = 0; p < k; ++p) s += (double)a[i + p * m] * b[p + j * k];
      want[i + j * m] = (float)(alpha * s + beta * c[i + j * m]);
    }
  }
  float *da, *db, *dc;
  CHECK(cudaMalloc(&da, a.size() * sizeof(float)));
  CHECK(cudaMalloc(&db, b.size() * sizeof(float)));
  CHECK(cudaMalloc(&dc, c.size() * sizeof(float)));
  CHECK(cudaMemcpy(da, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dc, c.data(), c.size() * sizeof(float), cudaMemcpyHostToDevice));

  cublasHandle_t handle;
  CHECK_CUBLAS(cublasCreate(&handle));
  CHECK_CUBLAS(
      cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, da, m, db, k, &beta, dc, m));
  std::vector<float> got(m * n);
  CHECK(cudaMemcpy(got.data(), dc, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
  ExpectNearArrays("sgemm", got.data(), want.data(), got.size(), 1e-5, 1e-4);

  // A dot product on a stream of the program's own, the result written to host memory.
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  CHECK_CUBLAS(cublasSetStream(handle, stream));
  float dot = 0;
  CHECK_CUBLAS(cublasSdot(handle, m * k < k * n ? m * k : k * n, da, 1, db, 1, &dot));
  double want_dot = 0;
  for (int i = 0; i < (m * k < k * n ? m * k : k * n); ++i) want_dot += (double)a[i] * b[i];
  EXPECT(Near(dot, want_dot, 1e-5, 1e-3), "sdot: got %g, want %g", dot, want_dot);

  CHECK_CUBLAS(cublasDestroy(handle));
  CHECK(cudaStreamDestroy(stream));
  CHECK(cudaFree(da));
  CHECK(cudaFree(db));
  CHECK(cudaFree(dc));
  printf("rt_cublas: OK\n");
  return 0;
}
