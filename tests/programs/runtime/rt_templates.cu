// Templated kernels instantiated for int, float and double (and a functor template parameter):
// each instantiation is a separate mangled kernel that must be found and launched correctly.
#include "rt_check.h"

#include <vector>

template <typename T>
__global__ void AxpbyClamp(const T* x, const T* y, T* out, T a, T b, T lo, T hi, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  T v = a * x[i] + b * y[i];
  out[i] = v < lo ? lo : (v > hi ? hi : v);
}

struct Triple {
  template <typename T>
  __host__ __device__ T operator()(T v) const {
    return v * (T)3;
  }
};
struct Negate {
  template <typename T>
  __host__ __device__ T operator()(T v) const {
    return -v;
  }
};

template <typename T, typename Op, int kUnroll>
__global__ void Map(T* p, int n, Op op) {
  int base = (blockIdx.x * blockDim.x + threadIdx.x) * kUnroll;
#pragma unroll
  for (int k = 0; k < kUnroll; ++k)
    if (base + k < n) p[base + k] = op(p[base + k]);
}

template <typename T>
void Run(const char* type, T a, T b, T lo, T hi, double tol) {
  const int n = 5000;
  std::vector<T> x(n), y(n), out(n), want(n);
  for (int i = 0; i < n; ++i) {
    x[i] = (T)((i % 97) - 48);
    y[i] = (T)((i % 13) * 2 - 11);
    T v = a * x[i] + b * y[i];
    want[i] = v < lo ? lo : (v > hi ? hi : v);
  }
  T *dx = nullptr, *dy = nullptr, *dout = nullptr;
  CHECK(cudaMalloc(&dx, n * sizeof(T)));
  CHECK(cudaMalloc(&dy, n * sizeof(T)));
  CHECK(cudaMalloc(&dout, n * sizeof(T)));
  CHECK(cudaMemcpy(dx, x.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dy, y.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  AxpbyClamp<T><<<GridFor(n, 256), 256>>>(dx, dy, dout, a, b, lo, hi, n);
  CHECK_SYNC();
  CHECK(cudaMemcpy(out.data(), dout, n * sizeof(T), cudaMemcpyDeviceToHost));
  ExpectNearArrays(type, out.data(), want.data(), n, tol, tol);

  // Map<T, Triple, 4> then Map<T, Negate, 1>: out = -3 * clamp(...)
  Map<T, Triple, 4><<<GridFor(n, 4 * 128), 128>>>(dout, n, Triple());
  CHECK_LAUNCH();
  Map<T, Negate, 1><<<GridFor(n, 128), 128>>>(dout, n, Negate());
  CHECK_SYNC();
  CHECK(cudaMemcpy(out.data(), dout, n * sizeof(T), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) want[i] = -(want[i] * (T)3);
  ExpectNearArrays(type, out.data(), want.data(), n, tol, tol);
  CHECK(cudaFree(dx));
  CHECK(cudaFree(dy));
  CHECK(cudaFree(dout));
}

int main() {
  Run<int>("int", 3, -2, -100, 120, 0);
  Run<float>("float", 1.5f, -0.25f, -50.0f, 60.0f, 1e-6);
  Run<double>("double", 0.125, 2.5, -70.0, 30.0, 1e-14);
  printf("rt_templates: OK\n");
  return 0;
}
