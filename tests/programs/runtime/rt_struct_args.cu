// Structs passed to kernels by value: padding and alignment (char before int, a 16-byte aligned
// struct, nested structs), a 1 KiB struct, built-in vector types (float3, int2, double2), and a
// struct holding a device pointer; each thread reads the arguments and writes fields back.
#include "rt_check.h"

#include <vector>

struct Small {
  char c;
  int i;
};
struct Mixed {
  double d;
  float f;
  short s;
  char c;
  long long ll;
  int arr[3];
};
struct alignas(16) Vec4 {
  float x, y, z, w;
};
struct Nested {
  Small a;
  Vec4 v;
  char tail;
};
struct Big {
  int data[256];
  double scale;
};
struct View {
  int* ptr;
  int len;
  unsigned char tag;
};

__global__ void ReadArgs(Small s, Mixed m, Vec4 v, Nested nest, Big big, float3 f3, int2 i2,
                         double2 d2, View view, long long* out_ll, double* out_d) {
  int t = threadIdx.x;
  if (t == 0) {
    out_ll[0] = s.c;
    out_ll[1] = s.i;
    out_ll[2] = m.s;
    out_ll[3] = m.c;
    out_ll[4] = m.ll;
    out_ll[5] = m.arr[0] + 10 * m.arr[1] + 100 * m.arr[2];
    out_ll[6] = nest.a.c;
    out_ll[7] = nest.a.i;
    out_ll[8] = nest.tail;
    out_ll[9] = i2.x;
    out_ll[10] = i2.y;
    out_ll[11] = view.len;
    out_ll[12] = view.tag;
    out_d[0] = m.d;
    out_d[1] = m.f;
    out_d[2] = v.x + 10 * v.y + 100 * v.z + 1000 * v.w;
    out_d[3] = nest.v.x - nest.v.w;
    out_d[4] = big.scale;
    out_d[5] = f3.x + 2 * f3.y + 4 * f3.z;
    out_d[6] = d2.x * d2.y;
  }
  // Every thread reads its own slice of the big struct and writes through the pointer in `view`.
  for (int k = t; k < 256; k += blockDim.x) out_ll[16 + k] = (long long)(big.data[k] * big.scale);
  if (t < view.len) view.ptr[t] = t * view.tag + s.i;
}

int main() {
  Small s{'q', -123456};
  Mixed m;
  m.d = 3.0e100;
  m.f = -1.25f;
  m.s = -32000;
  m.c = 'Z';
  m.ll = -9000000000000000001LL;
  m.arr[0] = 7, m.arr[1] = 8, m.arr[2] = 9;
  Vec4 v{1.0f, 2.0f, 3.0f, 4.0f};
  Nested nest{{'n', 424242}, {0.5f, 0.0f, 0.0f, -7.5f}, 'T'};
  Big big;
  for (int k = 0; k < 256; ++k) big.data[k] = k * k - 1000;
  big.scale = 2.0;
  float3 f3 = make_float3(1.5f, -2.0f, 0.25f);
  int2 i2 = make_int2(-5, 77);
  double2 d2 = make_double2(1e-3, 4e5);
  int* dptr = nullptr;
  CHECK(cudaMalloc(&dptr, 64 * sizeof(int)));
  View view{dptr, 40, 3};
  long long* dll = nullptr;
  double* dd = nullptr;
  CHECK(cudaMalloc(&dll, (16 + 256) * sizeof(long long)));
  CHECK(cudaMalloc(&dd, 8 * sizeof(double)));
  CHECK(cudaMemset(dptr, 0xFF, 64 * sizeof(int)));

  ReadArgs<<<1, 64>>>(s, m, v, nest, big, f3, i2, d2, view, dll, dd);
  CHECK_SYNC();
  std::vector<long long> ll(16 + 256);
  double d[8];
  int p[64];
  CHECK(cudaMemcpy(ll.data(), dll, ll.size() * sizeof(long long), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(d, dd, 7 * sizeof(double), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(p, dptr, sizeof p, cudaMemcpyDeviceToHost));

  const long long want_ll[13] = {
      'q', -123456, -32000, 'Z', -9000000000000000001LL, 987, 'n', 424242, 'T', -5, 77, 40, 3};
  for (int k = 0; k < 13; ++k)
    EXPECT(ll[k] == want_ll[k], "integer field %d = %lld, want %lld", k, ll[k], want_ll[k]);
  const double want_d[7] = {3.0e100, -1.25, 4321.0, 8.0, 2.0, 1.5 - 4.0 + 1.0, 400.0};
  for (int k = 0; k < 7; ++k)
    EXPECT(Near(d[k], want_d[k], 1e-15, 0), "floating field %d = %.17g, want %.17g", k, d[k],
           want_d[k]);
  for (int k = 0; k < 256; ++k)
    EXPECT(ll[16 + k] == 2LL * (k * k - 1000), "big.data[%d] read as %lld", k, ll[16 + k]);
  for (int t = 0; t < 64; ++t) {
    int want = t < 40 ? t * 3 - 123456 : -1;
    EXPECT(p[t] == want, "view.ptr[%d] = %d, want %d", t, p[t], want);
  }
  CHECK(cudaFree(dptr));
  CHECK(cudaFree(dll));
  CHECK(cudaFree(dd));
  printf("rt_struct_args: OK (param bytes include a %zu-byte struct)\n", sizeof(Big));
  return 0;
}
