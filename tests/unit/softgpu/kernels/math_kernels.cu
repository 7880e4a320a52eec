// Math-library, half-precision and 64-bit integer kernels for the softgpu tests.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void fmath(const float* in, float* out) {
  float x = in[threadIdx.x];
  float* o = out + threadIdx.x * 32;
  o[0] = sinf(x);
  o[1] = cosf(x);
  o[2] = tanf(x);
  o[3] = expf(x);
  o[4] = logf(fabsf(x) + 1);
  o[5] = powf(fabsf(x), 1.5f);
  o[6] = sqrtf(fabsf(x));
  o[7] = rsqrtf(fabsf(x) + 1);
  o[8] = erff(x);
  o[9] = tanhf(x);
  o[10] = atan2f(x, 1.5f);
  o[11] = asinf(x / 10);
  o[12] = acosf(x / 10);
  o[13] = log2f(fabsf(x) + 1);
  o[14] = exp2f(x);
  o[15] = log10f(fabsf(x) + 1);
  o[16] = cbrtf(x);
  o[17] = fmodf(x, 0.7f);
  o[18] = floorf(x);
  o[19] = ceilf(x);
  o[20] = roundf(x);
  o[21] = truncf(x);
  o[22] = __sinf(x);
  o[23] = __expf(x);
  o[24] = __fdividef(x, 3.f);
  o[25] = hypotf(x, 2.f);
  o[26] = sinhf(x / 4);
  o[27] = lgammaf(fabsf(x) + 1);
  o[28] = expm1f(x);
  o[29] = log1pf(fabsf(x));
  o[30] = fminf(x, 0.3f) + fmaxf(x, -0.2f);
  o[31] = __saturatef(x);
}
extern "C" __global__ void dmath(const double* in, double* out) {
  double x = in[threadIdx.x];
  double* o = out + threadIdx.x * 16;
  o[0] = sin(x);
  o[1] = cos(x);
  o[2] = tan(x);
  o[3] = exp(x);
  o[4] = log(fabs(x) + 1);
  o[5] = pow(fabs(x), 1.5);
  o[6] = sqrt(fabs(x));
  o[7] = rsqrt(fabs(x) + 1);
  o[8] = erf(x);
  o[9] = tanh(x);
  o[10] = atan2(x, 1.5);
  o[11] = asin(x / 10);
  o[12] = cbrt(x);
  o[13] = fmod(x, 0.7);
  o[14] = round(x);
  o[15] = 1.0 / x;
}
extern "C" __global__ void halfs(const float* in, float* out) {
  float x = in[threadIdx.x];
  __half h = __float2half(x);
  __half2 h2 = __floats2half2_rn(x, x * 2);
  __nv_bfloat16 b = __float2bfloat16(x);
  __nv_bfloat162 b2 = __floats2bfloat162_rn(x, -x);
  h2 = __hfma2(h2, h2, h2);
  b2 = __hmul2(b2, b2);
  float* o = out + threadIdx.x * 8;
  o[0] = __half2float(h * h + h);
  o[1] = __low2float(h2) + __high2float(h2);
  o[2] = __bfloat162float(b * b);
  o[3] = __low2float(b2) + __high2float(b2);
  o[4] = __half2float(hsqrt(__habs(h)));
  o[5] = __half2float(hexp(h / __float2half(4.f)));
  o[6] = __hlt(h, __float2half(0.5f)) ? 1.f : 0.f;
  o[7] = __half2float(__hmax(h, __float2half(0.25f)));
}
extern "C" __global__ void ints(const long long* in, long long* out) {
  long long x = in[threadIdx.x];
  unsigned long long u = x;
  long long* o = out + threadIdx.x * 12;
  o[0] = x / 7;
  o[1] = x % 7;
  o[2] = u / 13;
  o[3] = u % 13;
  o[4] = __popcll(u);
  o[5] = __clzll(u);
  o[6] = __brevll(u);
  o[7] = __ffsll(x);
  o[8] = __mul64hi(x, 12345);
  o[9] = __umul64hi(u, 0x9e3779b97f4a7c15ull);
  o[10] = (long long)(double)x;
  o[11] = (long long)(float)x;
}
extern "C" __global__ void bits32(const unsigned* in, unsigned* out) {
  unsigned x = in[threadIdx.x], y = in[(threadIdx.x + 1) % blockDim.x];
  unsigned* o = out + threadIdx.x * 10;
  o[0] = __popc(x);
  o[1] = __clz(x);
  o[2] = __brev(x);
  o[3] = __byte_perm(x, y, 0x5140);
  o[4] = __funnelshift_l(x, y, threadIdx.x & 31);
  o[5] = __funnelshift_r(x, y, 7);
  o[6] = __umulhi(x, y);
  o[7] = __ffs(x);
  o[8] = __usad(x & 0xffff, y & 0xffff, 3);
  o[9] = __mul24(x & 0x7fffff, y & 0x7fffff);
}
