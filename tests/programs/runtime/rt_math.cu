// Single-precision math on the device against the host's libm (in double) within CUDA's documented
// ulp bounds: sqrtf (correctly rounded: exact), expf, logf, sinf, cosf, tanf, powf, atan2f, tanhf,
// rsqrtf; fmaf (exact, single rounding) versus __fmul_rn + __fadd_rn (two roundings); rounding and
// conversions; integer intrinsics (__clz, __ffs, __popc, __brev, __mulhi, __umul64hi).
#include "rt_check.h"

#include <cmath>
#include <vector>

constexpr int kFuncs = 10;

__global__ void FloatFuncs(const float* x, const float* y, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a = x[i], b = y[i];
  float* o = out + i * kFuncs;
  o[0] = sqrtf(fabsf(a));
  o[1] = expf(a);
  o[2] = logf(fabsf(a) + 0.5f);
  o[3] = sinf(a);
  o[4] = cosf(a);
  o[5] = tanf(a * 0.1f);
  o[6] = powf(fabsf(a) + 0.25f, b);
  o[7] = atan2f(a, b);
  o[8] = tanhf(a * 0.3f);
  o[9] = rsqrtf(fabsf(a) + 1.0f);
}

__global__ void Fused(const float* a, const float* b, const float* c, float* fused, float* split,
                      int n) {
  int i = threadIdx.x;
  if (i >= n) return;
  fused[i] = fmaf(a[i], b[i], c[i]);
  split[i] = __fadd_rn(__fmul_rn(a[i], b[i]), c[i]);
}

__global__ void Rounding(const float* x, int* out, int n) {
  int i = threadIdx.x;
  if (i >= n) return;
  out[i * 6 + 0] = (int)floorf(x[i]);
  out[i * 6 + 1] = (int)ceilf(x[i]);
  out[i * 6 + 2] = (int)truncf(x[i]);
  out[i * 6 + 3] = (int)roundf(x[i]);     // half away from zero
  out[i * 6 + 4] = __float2int_rn(x[i]);  // half to even
  out[i * 6 + 5] = (int)x[i];             // truncation
}

__global__ void IntIntrinsics(const unsigned* u, unsigned* out, unsigned long long* out64, int n) {
  int i = threadIdx.x;
  if (i >= n) return;
  unsigned v = u[i];
  out[i * 5 + 0] = (unsigned)__clz((int)v);
  out[i * 5 + 1] = (unsigned)__ffs((int)v);
  out[i * 5 + 2] = (unsigned)__popc(v);
  out[i * 5 + 3] = __brev(v);
  out[i * 5 + 4] = (unsigned)__mulhi((int)v, (int)(v ^ 0x9E3779B9u));
  unsigned long long w = ((unsigned long long)v << 32) | (v * 2654435761u);
  out64[i] = __umul64hi(w, 0xD1B54A32D192ED03ULL);
}

static double Ref(int f, double a, double b) {
  switch (f) {
    case 0:
      return std::sqrt(std::fabs(a));
    case 1:
      return std::exp(a);
    case 2:
      return std::log((double)(float)(std::fabs(a) + 0.5));
    case 3:
      return std::sin(a);
    case 4:
      return std::cos(a);
    case 5:
      return std::tan((double)(float)(a * 0.1f));
    case 6:
      return std::pow((double)(float)(std::fabs(a) + 0.25f), b);
    case 7:
      return std::atan2(a, b);
    case 8:
      return std::tanh((double)(float)(a * 0.3f));
    default:
      return 1.0 / std::sqrt((double)(float)(std::fabs(a) + 1.0f));
  }
}

int main() {
  const int n = 2048;
  std::vector<float> x(n), y(n), out(n * kFuncs);
  for (int i = 0; i < n; ++i) {
    x[i] = -10.0f + 20.0f * (float)i / (float)n + 0.001f * (float)(i % 7);
    y[i] = -3.0f + 6.0f * (float)((i * 37) % n) / (float)n;
  }
  float *dx, *dy, *dout;
  CHECK(cudaMalloc(&dx, n * sizeof(float)));
  CHECK(cudaMalloc(&dy, n * sizeof(float)));
  CHECK(cudaMalloc(&dout, n * kFuncs * sizeof(float)));
  CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  FloatFuncs<<<GridFor(n, 128), 128>>>(dx, dy, dout, n);
  CHECK_SYNC();
  CHECK(cudaMemcpy(out.data(), dout, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  const char* names[kFuncs] = {"sqrtf", "expf", "logf",   "sinf",  "cosf",
                               "tanf",  "powf", "atan2f", "tanhf", "rsqrtf"};
  // Documented maximum errors are 0-4 ulp (2^-23 relative each); allow 8 ulp, and an absolute
  // 1e-6 for results near zero.
  for (int i = 0; i < n; ++i)
    for (int f = 0; f < kFuncs; ++f) {
      double want = Ref(f, x[i], y[i]);
      double got = out[i * kFuncs + f];
      if (f == 0) {
        EXPECT(got == (double)std::sqrt(std::fabs(x[i])),
               "sqrtf(%.9g) = %.9g not correctly rounded", x[i], got);
        continue;
      }
      EXPECT(Near(got, want, 8.0 / (1 << 23), 1e-6), "%s(%.9g, %.9g) = %.9g, want %.9g", names[f],
             x[i], y[i], got, want);
    }

  // fmaf rounds once; multiply-then-add rounds twice.
  const int m = 4;
  float ha[m] = {1.0f + 1.0f / 4096, 3.0f, -2.5f, 1.0f / 3.0f};
  float hb[m] = {1.0f + 1.0f / 4096, 1.0f / 3.0f, 4.0f, 3.0f};
  float hc[m] = {-1.0f, -1.0f, 10.0f, -1.0f};
  float *da, *db, *dc, *dfused, *dsplit;
  CHECK(cudaMalloc(&da, m * sizeof(float)));
  CHECK(cudaMalloc(&db, m * sizeof(float)));
  CHECK(cudaMalloc(&dc, m * sizeof(float)));
  CHECK(cudaMalloc(&dfused, m * sizeof(float)));
  CHECK(cudaMalloc(&dsplit, m * sizeof(float)));
  CHECK(cudaMemcpy(da, ha, sizeof ha, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, hb, sizeof hb, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dc, hc, sizeof hc, cudaMemcpyHostToDevice));
  Fused<<<1, 32>>>(da, db, dc, dfused, dsplit, m);
  CHECK_SYNC();
  float fused[m], split[m];
  CHECK(cudaMemcpy(fused, dfused, sizeof fused, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(split, dsplit, sizeof split, cudaMemcpyDeviceToHost));
  for (int i = 0; i < m; ++i) {
    volatile float prod = ha[i] * hb[i];  // volatile: keep the host from fusing
    float want_split = prod + hc[i];
    float want_fused = std::fma(ha[i], hb[i], hc[i]);
    EXPECT(fused[i] == want_fused, "fmaf #%d = %.9g, want %.9g", i, fused[i], want_fused);
    EXPECT(split[i] == want_split, "mul+add #%d = %.9g, want %.9g", i, split[i], want_split);
  }
  EXPECT(fused[0] != split[0], "fmaf and mul+add agree where they must differ (%.9g)", fused[0]);

  // Rounding modes and conversions.
  const float rx[] = {2.5f, 3.5f, -2.5f, -0.4f, 7.99f, -7.01f, 0.5f, 1e6f + 0.5f};
  const int r = sizeof rx / sizeof rx[0];
  float* drx;
  int* dri;
  CHECK(cudaMalloc(&drx, sizeof rx));
  CHECK(cudaMalloc(&dri, r * 6 * sizeof(int)));
  CHECK(cudaMemcpy(drx, rx, sizeof rx, cudaMemcpyHostToDevice));
  Rounding<<<1, 32>>>(drx, dri, r);
  CHECK_SYNC();
  int ri[r * 6];
  CHECK(cudaMemcpy(ri, dri, sizeof ri, cudaMemcpyDeviceToHost));
  for (int i = 0; i < r; ++i) {
    int want[6] = {(int)std::floor(rx[i]), (int)std::ceil(rx[i]),      (int)std::trunc(rx[i]),
                   (int)std::round(rx[i]), (int)std::nearbyint(rx[i]), (int)rx[i]};
    for (int k = 0; k < 6; ++k)
      EXPECT(ri[i * 6 + k] == want[k], "rounding #%d of %.9g: %d, want %d", k, rx[i], ri[i * 6 + k],
             want[k]);
  }

  // Integer intrinsics.
  const unsigned uv[] = {0u, 1u, 0x80000000u, 0xFFFFFFFFu, 0x00F0F000u, 123456789u, 0x40000001u};
  const int u = sizeof uv / sizeof uv[0];
  unsigned* duv;
  unsigned* dui;
  unsigned long long* du64;
  CHECK(cudaMalloc(&duv, sizeof uv));
  CHECK(cudaMalloc(&dui, u * 5 * sizeof(unsigned)));
  CHECK(cudaMalloc(&du64, u * sizeof(unsigned long long)));
  CHECK(cudaMemcpy(duv, uv, sizeof uv, cudaMemcpyHostToDevice));
  IntIntrinsics<<<1, 32>>>(duv, dui, du64, u);
  CHECK_SYNC();
  unsigned ui[u * 5];
  unsigned long long u64[u];
  CHECK(cudaMemcpy(ui, dui, sizeof ui, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(u64, du64, sizeof u64, cudaMemcpyDeviceToHost));
  for (int i = 0; i < u; ++i) {
    unsigned v = uv[i];
    unsigned rev = 0;
    for (int b = 0; b < 32; ++b)
      if (v & (1u << b)) rev |= 1u << (31 - b);
    unsigned want[5] = {v ? (unsigned)__builtin_clz(v) : 32u, (unsigned)__builtin_ffs((int)v),
                        (unsigned)__builtin_popcount(v), rev,
                        (unsigned)(((long long)(int)v * (long long)(int)(v ^ 0x9E3779B9u)) >> 32)};
    for (int k = 0; k < 5; ++k)
      EXPECT(ui[i * 5 + k] == want[k], "int intrinsic #%d of 0x%08x: 0x%08x, want 0x%08x", k, v,
             ui[i * 5 + k], want[k]);
    unsigned long long w = ((unsigned long long)v << 32) | (v * 2654435761u);
    unsigned long long hi =
        (unsigned long long)(((unsigned __int128)w * 0xD1B54A32D192ED03ULL) >> 64);
    EXPECT(u64[i] == hi, "__umul64hi of 0x%016llx: 0x%016llx, want 0x%016llx", w, u64[i], hi);
  }

  for (void* p : {(void*)dx, (void*)dy, (void*)dout, (void*)da, (void*)db, (void*)dc, (void*)dfused,
                  (void*)dsplit, (void*)drx, (void*)dri, (void*)duv, (void*)dui, (void*)du64})
    CHECK(cudaFree(p));
  printf("rt_math: OK\n");
  return 0;
}
