// Vector addition: c = a + b for float and int vectors of an awkward length (not a multiple of the
// block size), with a bounds check in the kernel, compared exactly with the CPU.
#include "rt_check.h"

#include <vector>

__global__ void AddF(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

__global__ void AddI(const int* a, const int* b, int* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

int main() {
  const int n = 50001;
  std::vector<float> a(n), b(n), c(n, 0.0f);
  std::vector<int> ia(n), ib(n), ic(n, 0);
  for (int i = 0; i < n; ++i) {
    a[i] = 0.5f * (float)i;
    b[i] = 1.0f / (float)(i + 1);
    ia[i] = i * 3 - 70000;
    ib[i] = (i % 17) * 1000;
  }
  float *da, *db, *dc;
  int *dia, *dib, *dic;
  CHECK(cudaMalloc(&da, n * sizeof(float)));
  CHECK(cudaMalloc(&db, n * sizeof(float)));
  CHECK(cudaMalloc(&dc, n * sizeof(float)));
  CHECK(cudaMalloc(&dia, n * sizeof(int)));
  CHECK(cudaMalloc(&dib, n * sizeof(int)));
  CHECK(cudaMalloc(&dic, n * sizeof(int)));
  CHECK(cudaMemcpy(da, a.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, b.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dia, ia.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dib, ib.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  // The int kernel covers only n - 1 elements: the last one keeps this sentinel (-1).
  CHECK(cudaMemset(dic, 0xFF, n * sizeof(int)));
  AddF<<<GridFor(n, 256), 256>>>(da, db, dc, n);
  CHECK_LAUNCH();
  AddI<<<GridFor(n, 128), 128>>>(dia, dib, dic, n - 1);  // last element untouched
  CHECK_SYNC();
  CHECK(cudaMemcpy(c.data(), dc, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(ic.data(), dic, n * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    EXPECT(c[i] == a[i] + b[i], "c[%d] = %.9g, want %.9g", i, c[i], a[i] + b[i]);
    int want = i < n - 1 ? ia[i] + ib[i] : -1;
    EXPECT(ic[i] == want, "ic[%d] = %d, want %d", i, ic[i], want);
  }
  for (void* p : {(void*)da, (void*)db, (void*)dc, (void*)dia, (void*)dib, (void*)dic})
    CHECK(cudaFree(p));
  printf("rt_vector_add: OK\n");
  return 0;
}
