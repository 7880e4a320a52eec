// Tensor-map copies (TMA) through the runtime, built for compute_90: the program gets
// cuTensorMapEncodeTiled and cuTensorMapReplaceAddress from the driver with
// cudaGetDriverEntryPointByVersion (as cuBLAS, CUTLASS and PyTorch do), transposes a matrix
// whose sides are no multiple of the tile by loading 32x32 tiles with cp.async.bulk.tensor into
// 128-byte-swizzled shared memory and storing the transposed tiles with a tensor-map store
// (which leaves everything outside the matrix alone), then points the input map at another
// matrix and does it again; each result compared with the CPU. A misaligned tensor is refused.
#include <cuda.h>
#include <cudaTypedefs.h>

#include <cuda/ptx>
#include <vector>

#include "rt_check.h"

namespace ptx = cuda::ptx;

constexpr int kTile = 32;  // 32 floats: one 128-byte swizzle span per row

// Block (bx, by) transposes the tile at rows by*32.., columns bx*32.. of `in` (rows x cols) into
// `out` (cols x rows).
__global__ void TransposeTiles(const __grid_constant__ CUtensorMap in,
                               const __grid_constant__ CUtensorMap out) {
  extern __shared__ unsigned char raw[];
  // The swizzle pattern repeats every 1024 bytes: align the tiles to it.
  const unsigned base = static_cast<unsigned>(__cvta_generic_to_shared(raw));
  unsigned char* loaded = raw + ((base + 1023) / 1024 * 1024 - base);
  float* transposed = reinterpret_cast<float*>(loaded + kTile * kTile * sizeof(float));
  __shared__ uint64_t bar;
  const int row0 = blockIdx.y * kTile, col0 = blockIdx.x * kTile;
  if (threadIdx.x == 0) {
    ptx::mbarrier_init(&bar, 1);
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const int32_t at[2] = {col0, row0};  // innermost (column) first
    ptx::cp_async_bulk_tensor(ptx::space_cluster, ptx::space_global, loaded, &in, at, &bar);
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &bar,
                                   kTile * kTile * sizeof(float));
  }
  while (!ptx::mbarrier_try_wait_parity(&bar, 0)) {
  }
  // Element (r, c) of the loaded tile: 16-byte chunk c / 4 of row r sits at chunk (c / 4) ^ (r %
  // 8).
  for (int i = threadIdx.x; i < kTile * kTile; i += blockDim.x) {
    const int r = i / kTile, c = i % kTile;
    const float* row = reinterpret_cast<const float*>(loaded + r * 128);
    transposed[c * kTile + r] = row[((c / 4) ^ (r % 8)) * 4 + c % 4];
  }
  ptx::fence_proxy_async(ptx::space_shared);
  __syncthreads();
  if (threadIdx.x == 0) {
    const int32_t at[2] = {row0, col0};
    ptx::cp_async_bulk_tensor(ptx::space_global, ptx::space_shared, &out, at, transposed);
    ptx::cp_async_bulk_commit_group();
    ptx::cp_async_bulk_wait_group_read(ptx::n32_t<0>());
  }
}

static PFN_cuTensorMapEncodeTiled_v12000 encode;
static PFN_cuTensorMapReplaceAddress_v12000 replace_address;

static void DriverEntry(const char* name, void** fn) {
  cudaDriverEntryPointQueryResult found;
  CHECK(cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || *fn == nullptr) {
    fprintf(stderr, "%s: not found (%d)\n", name, static_cast<int>(found));
    exit(1);
  }
}

// A map of 32x32-float boxes over a rows x cols matrix at `base` (row pitch: `pitch` bytes).
static CUresult MatrixMap(CUtensorMap* map, float* base, int rows, int cols, size_t pitch,
                          CUtensorMapSwizzle swizzle) {
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {pitch};
  const cuuint32_t box[2] = {kTile, kTile}, element_strides[2] = {1, 1};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, base, dims, strides, box, element_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

static void Check(const std::vector<float>& in, const std::vector<float>& out, int rows, int cols,
                  int out_pitch_floats, const char* what) {
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const float want = in[r * cols + c], got = out[c * out_pitch_floats + r];
      if (got != want) {
        fprintf(stderr, "%s: out[%d][%d] = %g, want %g\n", what, c, r, got, want);
        exit(1);
      }
    }
  }
  // The padding after each output row (past `rows` floats) is untouched (-1).
  for (int c = 0; c < cols; ++c) {
    for (int p = rows; p < out_pitch_floats; ++p) {
      if (out[c * out_pitch_floats + p] != -1.0f) {
        fprintf(stderr, "%s: padding out[%d][%d] was written\n", what, c, p);
        exit(1);
      }
    }
  }
}

int main() {
  DriverEntry("cuTensorMapEncodeTiled", reinterpret_cast<void**>(&encode));
  DriverEntry("cuTensorMapReplaceAddress", reinterpret_cast<void**>(&replace_address));
  const int rows = 100, cols = 70;
  const size_t in_pitch = 288;  // 70 floats = 280 bytes, rounded up to 16
  const int out_pitch = 112;    // floats per output row (>= rows, 16-byte multiple)
  std::vector<float> a(rows * cols), b(rows * cols);
  for (int i = 0; i < rows * cols; ++i) {
    a[i] = static_cast<float>(i) * 0.5f;
    b[i] = -static_cast<float>(i) - 3.0f;
  }
  float *da, *db, *dout;
  CHECK(cudaMalloc(&da, rows * in_pitch));
  CHECK(cudaMalloc(&db, rows * in_pitch));
  CHECK(cudaMalloc(&dout, cols * out_pitch * sizeof(float)));
  CHECK(cudaMemcpy2D(da, in_pitch, a.data(), cols * sizeof(float), cols * sizeof(float), rows,
                     cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy2D(db, in_pitch, b.data(), cols * sizeof(float), cols * sizeof(float), rows,
                     cudaMemcpyHostToDevice));

  CUtensorMap in_map, out_map;
  if (MatrixMap(&in_map, da, rows, cols, in_pitch, CU_TENSOR_MAP_SWIZZLE_128B) != CUDA_SUCCESS ||
      MatrixMap(&out_map, dout, cols, rows, out_pitch * sizeof(float),
                CU_TENSOR_MAP_SWIZZLE_NONE) != CUDA_SUCCESS) {
    fprintf(stderr, "cuTensorMapEncodeTiled failed\n");
    return 1;
  }
  // A tensor that does not start on 16 bytes is refused.
  CUtensorMap bad;
  if (MatrixMap(&bad, da + 1, rows, cols, in_pitch, CU_TENSOR_MAP_SWIZZLE_NONE) !=
      CUDA_ERROR_INVALID_VALUE) {
    fprintf(stderr, "a misaligned tensor was not refused\n");
    return 1;
  }

  const size_t shared = 1024 + 2 * kTile * kTile * sizeof(float);
  CHECK(cudaFuncSetAttribute(TransposeTiles, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(shared)));
  const dim3 grid((cols + kTile - 1) / kTile, (rows + kTile - 1) / kTile);
  std::vector<float> out(cols * out_pitch);
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<float> minus_one(cols * out_pitch, -1.0f);
    CHECK(cudaMemcpy(dout, minus_one.data(), minus_one.size() * sizeof(float),
                     cudaMemcpyHostToDevice));
    TransposeTiles<<<grid, 128, shared>>>(in_map, out_map);
    CHECK_SYNC();
    CHECK(cudaMemcpy(out.data(), dout, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
    Check(pass == 0 ? a : b, out, rows, cols, out_pitch, pass == 0 ? "first" : "replaced");
    // Point the input map at the second matrix.
    if (pass == 0 && replace_address(&in_map, db) != CUDA_SUCCESS) {
      fprintf(stderr, "cuTensorMapReplaceAddress failed\n");
      return 1;
    }
  }
  CHECK(cudaFree(da));
  CHECK(cudaFree(db));
  CHECK(cudaFree(dout));
  printf("rt_tensor_map: %dx%d matrix transposed through tensor maps twice: OK\n", rows, cols);
  return 0;
}
