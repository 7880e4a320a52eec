// Warp-level matrix kernels for softgpu's matrix_test, compiled to the PTX of compute_75,
// compute_90 and the newest architecture: wmma through NVIDIA's <mma.h>, and mma.sync through
// inline PTX with fragments placed as the PTX ISA's "Matrix Fragments for mma" sections say.
// Kernels whose instructions an architecture lacks are left out of its PTX (m16n8k16 f16, f64, tf32
// and k32 int8 mma need compute_80; stmatrix compute_90), and the tests skip them there.
#include <cuda_fp16.h>
#include <mma.h>

using namespace nvcuda;

// D (col-major) = A (row-major 16x16) * B (col-major 16x16) + 2 * C (row-major), one warp.
extern "C" __global__ void wmma_f16(const half* a, const half* b, const float* c, float* d) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::load_matrix_sync(fc, c, 16, wmma::mem_row_major);
  for (int i = 0; i < fc.num_elements; ++i) fc.x[i] *= 2.0f;  // element-wise: any layout
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::store_matrix_sync(d, fc, 16, wmma::mem_col_major);
}

// D (row-major, leading dimension 24) = A (row-major 16x16 s8) * B (row-major 16x16 s8).
extern "C" __global__ void wmma_s8(const signed char* a, const signed char* b, int* d) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, signed char, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, signed char, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, int> fc;
  wmma::fill_fragment(fc, 0);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::store_matrix_sync(d, fc, 24, wmma::mem_row_major);
}

// mma.sync.m16n8kK f16 x f16 + f32 (K = 8 on compute_75, 16 from compute_80): A 16xK, B Kx8,
// C and D 16x8, all row-major. Element i of a lane's A fragment is at row g + 8 ((i >> 1) & 1),
// column 2t + (i & 1) + 8 (i >> 2); of B at row 2t + (i & 1) + 8 (i >> 1), column g.
template <int K>
__device__ void MmaHalf(const half* a, const half* b, const float* c, float* d) {
  const int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
  unsigned ra[K / 4], rb[K / 8];
  for (int r = 0; r < K / 4; ++r) {
    half2 v;
    for (int h = 0; h < 2; ++h) {
      const int i = 2 * r + h;
      const int row = g + 8 * ((i >> 1) & 1), col = 2 * t + (i & 1) + 8 * (i >> 2);
      (h == 0 ? v.x : v.y) = a[row * K + col];
    }
    ra[r] = *reinterpret_cast<unsigned*>(&v);
  }
  for (int r = 0; r < K / 8; ++r) {
    half2 v;
    for (int h = 0; h < 2; ++h) {
      const int i = 2 * r + h;
      const int row = 2 * t + (i & 1) + 8 * (i >> 1), col = g;
      (h == 0 ? v.x : v.y) = b[row * 8 + col];
    }
    rb[r] = *reinterpret_cast<unsigned*>(&v);
  }
  float acc[4];
  for (int i = 0; i < 4; ++i) acc[i] = c[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)];
  if constexpr (K == 8) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
        "{%0,%1,%2,%3};"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(ra[0]), "r"(ra[1]), "r"(rb[0]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
        : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]));
  }
  for (int i = 0; i < 4; ++i) d[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)] = acc[i];
}

extern "C" __global__ void mma_m16n8k8_f16(const half* a, const half* b, const float* c, float* d) {
  MmaHalf<8>(a, b, c, d);
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
extern "C" __global__ void mma_m16n8k16_f16(const half* a, const half* b, const float* c,
                                            float* d) {
  MmaHalf<16>(a, b, c, d);
}

// mma.sync.m8n8k4 f64: A 8x4, B 4x8, C and D 8x8, row-major.
extern "C" __global__ void mma_m8n8k4_f64(const double* a, const double* b, const double* c,
                                          double* d) {
  const int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
  const double ra = a[g * 4 + t], rb = b[t * 8 + g];
  double acc0 = c[g * 8 + 2 * t], acc1 = c[g * 8 + 2 * t + 1];
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};"
               : "+d"(acc0), "+d"(acc1)
               : "d"(ra), "d"(rb));
  d[g * 8 + 2 * t] = acc0;
  d[g * 8 + 2 * t + 1] = acc1;
}

// mma.sync.m16n8k8 tf32: A 16x8, B 8x8, C and D 16x8 f32, row-major.
extern "C" __global__ void mma_m16n8k8_tf32(const float* a, const float* b, const float* c,
                                            float* d) {
  const int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
  unsigned ra[4], rb[2];
  for (int i = 0; i < 4; ++i) {
    const float v = a[(g + 8 * (i & 1)) * 8 + t + 4 * (i >> 1)];
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(ra[i]) : "f"(v));
  }
  for (int i = 0; i < 2; ++i) {
    const float v = b[(t + 4 * i) * 8 + g];
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(rb[i]) : "f"(v));
  }
  float acc[4];
  for (int i = 0; i < 4; ++i) acc[i] = c[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)];
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]));
  for (int i = 0; i < 4; ++i) d[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)] = acc[i];
}

// mma.sync.m16n8k32 s8 x u8 + s32 (satfinite): A 16x32, B 32x8, C and D 16x8, row-major.
extern "C" __global__ void mma_m16n8k32_s8(const signed char* a, const unsigned char* b,
                                           const int* c, int* d) {
  const int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
  unsigned ra[4] = {0, 0, 0, 0}, rb[2] = {0, 0};
  for (int i = 0; i < 16; ++i) {
    const int row = g + 8 * ((i >> 2) & 1), col = 4 * t + (i & 3) + 16 * (i >> 3);
    ra[i / 4] |= static_cast<unsigned>(static_cast<unsigned char>(a[row * 32 + col]))
                 << (8 * (i % 4));
  }
  for (int i = 0; i < 8; ++i) {
    const int row = 4 * t + (i & 3) + 16 * (i >> 2), col = g;
    rb[i / 4] |= static_cast<unsigned>(b[row * 8 + col]) << (8 * (i % 4));
  }
  int acc[4];
  for (int i = 0; i < 4; ++i) acc[i] = c[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)];
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.u8.s32 {%0,%1,%2,%3}, "
      "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+r"(acc[0]), "+r"(acc[1]), "+r"(acc[2]), "+r"(acc[3])
      : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]));
  for (int i = 0; i < 4; ++i) d[(g + 8 * (i >> 1)) * 8 + 2 * t + (i & 1)] = acc[i];
}

#endif  // compute_80

// ldmatrix .x4 (and .trans) from a 32x8 .b16 array in shared memory, stmatrix back, movmatrix:
// out[0..1023] = each lane's four ldmatrix registers, then those of .trans, then movmatrix of
// the first; `stored` = the array as stmatrix wrote it from the .x4 registers.
extern "C" __global__ void fragment_moves(const unsigned short* in, unsigned* out,
                                          unsigned short* stored) {
  __shared__ __align__(16) unsigned short tile[32 * 8];
  __shared__ __align__(16) unsigned short back[32 * 8];
  const int lane = threadIdx.x;
  for (int i = lane; i < 32 * 8; i += 32) tile[i] = in[i];
  __syncwarp();
  // Lane l addresses row l % 8 of matrix l / 8: rows 8i..8i+7 of the array.
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(&tile[lane * 8]));
  [[maybe_unused]] const unsigned back_address =
      static_cast<unsigned>(__cvta_generic_to_shared(&back[lane * 8]));
  unsigned r[4], t[4], moved;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(t[0]), "=r"(t[1]), "=r"(t[2]), "=r"(t[3])
               : "r"(address));
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(moved) : "r"(r[0]));
  for (int i = 0; i < 4; ++i) {
    out[i * 32 + lane] = r[i];
    out[128 + i * 32 + lane] = t[i];
  }
  out[256 + lane] = moved;
#if __CUDA_ARCH__ >= 900  // below, `stored` is left as it was
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};" ::"r"(back_address),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]));
  __syncwarp();
  for (int i = lane; i < 32 * 8; i += 32) stored[i] = back[i];
#endif
}
