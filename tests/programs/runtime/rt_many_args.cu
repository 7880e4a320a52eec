// Kernels with many arguments of mixed sizes and alignments (char, short, int, long long, float,
// double, pointers, bool, unsigned types, interleaved so the parameter buffer needs padding),
// launched both with <<<>>> and with cudaLaunchKernel and an argument array; plus a kernel taking
// 40 int arguments.
#include "rt_check.h"

__global__ void Mixed(char c, short s, int i, long long ll, float f, double d, int* p,
                      unsigned char uc, bool b, unsigned short us, double d2, char c2, float* fp,
                      long long ll2, short s2, unsigned u, double* out_d, long long* out_ll) {
  if (threadIdx.x != 0) return;
  out_ll[0] = c;
  out_ll[1] = s;
  out_ll[2] = i;
  out_ll[3] = ll;
  out_ll[4] = uc;
  out_ll[5] = b ? 1 : 0;
  out_ll[6] = us;
  out_ll[7] = c2;
  out_ll[8] = ll2;
  out_ll[9] = s2;
  out_ll[10] = u;
  out_d[0] = f;
  out_d[1] = d;
  out_d[2] = d2;
  *p = i + 1;
  *fp = f * 2.0f;
}

// clang-format off
#define FORTY(X) \
  X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) \
  X(10) X(11) X(12) X(13) X(14) X(15) X(16) X(17) X(18) X(19) \
  X(20) X(21) X(22) X(23) X(24) X(25) X(26) X(27) X(28) X(29) \
  X(30) X(31) X(32) X(33) X(34) X(35) X(36) X(37) X(38) X(39)
// clang-format on
#define PARAM(k) int a##k,
#define WEIGHTED(k) +a##k*(k + 1)
#define VALUE(k) 1000 - 37 * k,

__global__ void Forty(FORTY(PARAM) long long* out) {
  if (threadIdx.x == 0) *out = 0 FORTY(WEIGHTED);
}

int main() {
  double* out_d = nullptr;
  long long* out_ll = nullptr;
  int* p = nullptr;
  float* fp = nullptr;
  CHECK(cudaMalloc(&out_d, 3 * sizeof(double)));
  CHECK(cudaMalloc(&out_ll, 11 * sizeof(long long)));
  CHECK(cudaMalloc(&p, sizeof(int)));
  CHECK(cudaMalloc(&fp, sizeof(float)));

  char c = -7;
  short s = -31000;
  int i = 2000000001;
  long long ll = 0x123456789ABCDEFLL;
  float f = 3.25f;
  double d = -1.0e-200;
  unsigned char uc = 250;
  bool b = true;
  unsigned short us = 65000;
  double d2 = 6.02214076e23;
  char c2 = 'x';
  long long ll2 = -1;
  short s2 = 12345;
  unsigned u = 0xDEADBEEFu;
  const long long want_ll[11] = {-7,  -31000, 2000000001, 0x123456789ABCDEFLL, 250, 1, 65000,
                                 'x', -1,     12345,      0xDEADBEEFLL};
  const double want_d[3] = {3.25, -1.0e-200, 6.02214076e23};

  for (int way = 0; way < 2; ++way) {
    CHECK(cudaMemset(out_ll, 0, 11 * sizeof(long long)));
    CHECK(cudaMemset(out_d, 0, 3 * sizeof(double)));
    if (way == 0) {
      Mixed<<<1, 32>>>(c, s, i, ll, f, d, p, uc, b, us, d2, c2, fp, ll2, s2, u, out_d, out_ll);
    } else {
      void* args[] = {&c,  &s,  &i,  &ll, &f,   &d,  &p, &uc,    &b,
                      &us, &d2, &c2, &fp, &ll2, &s2, &u, &out_d, &out_ll};
      CHECK(cudaLaunchKernel((const void*)Mixed, dim3(1), dim3(32), args, 0, nullptr));
    }
    CHECK_SYNC();
    long long got_ll[11];
    double got_d[3];
    int got_p = 0;
    float got_f = 0;
    CHECK(cudaMemcpy(got_ll, out_ll, sizeof got_ll, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(got_d, out_d, sizeof got_d, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(&got_p, p, sizeof got_p, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(&got_f, fp, sizeof got_f, cudaMemcpyDeviceToHost));
    const char* how = way == 0 ? "<<<>>>" : "cudaLaunchKernel";
    for (int k = 0; k < 11; ++k)
      EXPECT(got_ll[k] == want_ll[k], "%s: integer argument %d = %lld, want %lld", how, k,
             got_ll[k], want_ll[k]);
    for (int k = 0; k < 3; ++k)
      EXPECT(got_d[k] == want_d[k], "%s: floating argument %d = %.17g, want %.17g", how, k,
             got_d[k], want_d[k]);
    EXPECT(got_p == i + 1 && got_f == 6.5f, "%s: pointer arguments wrote %d and %g", how, got_p,
           got_f);
  }

  long long* sum = nullptr;
  CHECK(cudaMalloc(&sum, sizeof(long long)));
  Forty<<<1, 1>>>(FORTY(VALUE) sum);
  CHECK_SYNC();
  long long got = 0, want = 0;
  CHECK(cudaMemcpy(&got, sum, sizeof got, cudaMemcpyDeviceToHost));
  for (int k = 0; k < 40; ++k) want += (long long)(1000 - 37 * k) * (k + 1);
  EXPECT(got == want, "40-argument kernel: %lld, want %lld", got, want);

  for (void* q : {(void*)out_d, (void*)out_ll, (void*)p, (void*)fp, (void*)sum}) CHECK(cudaFree(q));
  printf("rt_many_args: OK\n");
  return 0;
}
