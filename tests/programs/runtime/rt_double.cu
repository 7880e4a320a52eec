// Double precision: DAXPY and element-wise sqrt (correctly rounded: exact), exp, log, sin, cos,
// pow, fma (exact) against the host's libm within CUDA's ulp bounds; a dot product with a shared
// memory reduction plus double atomicAdd; conversions between double, float and 64-bit integers.
#include "rt_check.h"

#include <cmath>
#include <vector>

constexpr int kOut = 8;

__global__ void Funcs(const double* x, const double* y, double* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double a = x[i], b = y[i];
  double* o = out + i * kOut;
  o[0] = 2.5 * a + b;  // daxpy
  o[1] = sqrt(fabs(a));
  o[2] = exp(a);
  o[3] = log(fabs(a) + 0.5);
  o[4] = sin(a);
  o[5] = cos(a);
  o[6] = pow(fabs(a) + 0.25, b);
  o[7] = fma(a, b, -1.0);
}

__global__ void Dot(const double* x, const double* y, int n, double* result) {
  __shared__ double partial[256];
  double acc = 0.0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    acc += x[i] * y[i];
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(result, partial[0]);
}

__global__ void Convert(const double* x, long long* ll, float* f, double* back, int n) {
  int i = threadIdx.x;
  if (i >= n) return;
  ll[i] = (long long)x[i];
  f[i] = (float)x[i];
  back[i] = (double)(ll[i] * 3 + 1);
}

int main() {
  const int n = 4096;
  std::vector<double> x(n), y(n), out(n * kOut);
  for (int i = 0; i < n; ++i) {
    x[i] = -8.0 + 16.0 * i / n + 1e-9 * (i % 13);
    y[i] = -2.5 + 5.0 * ((i * 53) % n) / n;
  }
  double *dx, *dy, *dout;
  CHECK(cudaMalloc(&dx, n * sizeof(double)));
  CHECK(cudaMalloc(&dy, n * sizeof(double)));
  CHECK(cudaMalloc(&dout, n * kOut * sizeof(double)));
  CHECK(cudaMemcpy(dx, x.data(), n * sizeof(double), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dy, y.data(), n * sizeof(double), cudaMemcpyHostToDevice));
  Funcs<<<GridFor(n, 128), 128>>>(dx, dy, dout, n);
  CHECK_SYNC();
  CHECK(cudaMemcpy(out.data(), dout, out.size() * sizeof(double), cudaMemcpyDeviceToHost));
  const char* names[kOut] = {"daxpy", "sqrt", "exp", "log", "sin", "cos", "pow", "fma"};
  for (int i = 0; i < n; ++i) {
    double a = x[i], b = y[i];
    const double* o = &out[i * kOut];
    EXPECT(o[1] == std::sqrt(std::fabs(a)), "sqrt(%.17g) = %.17g not correctly rounded", a, o[1]);
    EXPECT(o[7] == std::fma(a, b, -1.0), "fma(%.17g, %.17g, -1) = %.17g, want %.17g", a, b, o[7],
           std::fma(a, b, -1.0));
    double want[kOut] = {2.5 * a + b,
                         0,
                         std::exp(a),
                         std::log(std::fabs(a) + 0.5),
                         std::sin(a),
                         std::cos(a),
                         std::pow(std::fabs(a) + 0.25, b),
                         0};
    // daxpy may be fused (one rounding instead of two: up to half an ulp of 2.5 * a apart); the
    // functions are within 2 ulp on the device and 1 ulp in glibc.
    EXPECT(Near(o[0], want[0], 1e-15, 1e-14), "daxpy(%.17g, %.17g) = %.17g, want %.17g", a, b, o[0],
           want[0]);
    for (int f : {2, 3, 4, 5, 6})
      EXPECT(Near(o[f], want[f], 1e-15, 1e-300), "%s(%.17g, %.17g) = %.17g, want %.17g", names[f],
             a, b, o[f], want[f]);
  }

  // Dot product: shared-memory reduction per block, double atomicAdd across blocks.
  double* dres = nullptr;
  CHECK(cudaMalloc(&dres, sizeof(double)));
  CHECK(cudaMemset(dres, 0, sizeof(double)));
  Dot<<<16, 256>>>(dx, dy, n, dres);
  CHECK_SYNC();
  double dot = 0, want_dot = 0, scale = 0;
  CHECK(cudaMemcpy(&dot, dres, sizeof dot, cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) want_dot += x[i] * y[i], scale += std::fabs(x[i] * y[i]);
  EXPECT(std::fabs(dot - want_dot) <= 1e-12 * scale, "dot %.17g, want %.17g", dot, want_dot);

  // Conversions.
  const double cv[] = {1e15 + 0.75, -123456789012.9, 0.1, -0.99, 4503599627370497.0, 3.0e9};
  const int c = sizeof cv / sizeof cv[0];
  double *dcv, *dback;
  long long* dll;
  float* df;
  CHECK(cudaMalloc(&dcv, sizeof cv));
  CHECK(cudaMalloc(&dll, c * sizeof(long long)));
  CHECK(cudaMalloc(&df, c * sizeof(float)));
  CHECK(cudaMalloc(&dback, c * sizeof(double)));
  CHECK(cudaMemcpy(dcv, cv, sizeof cv, cudaMemcpyHostToDevice));
  Convert<<<1, 32>>>(dcv, dll, df, dback, c);
  CHECK_SYNC();
  long long ll[c];
  float fl[c];
  double back[c];
  CHECK(cudaMemcpy(ll, dll, sizeof ll, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(fl, df, sizeof fl, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(back, dback, sizeof back, cudaMemcpyDeviceToHost));
  for (int i = 0; i < c; ++i) {
    EXPECT(ll[i] == (long long)cv[i], "(long long)%.17g = %lld", cv[i], ll[i]);
    EXPECT(fl[i] == (float)cv[i], "(float)%.17g = %.9g", cv[i], fl[i]);
    EXPECT(back[i] == (double)(ll[i] * 3 + 1), "(double)%lld = %.17g", ll[i] * 3 + 1, back[i]);
  }

  for (void* p : {(void*)dx, (void*)dy, (void*)dout, (void*)dres, (void*)dcv, (void*)dll, (void*)df,
                  (void*)dback})
    CHECK(cudaFree(p));
  printf("rt_double: OK\n");
  return 0;
}
