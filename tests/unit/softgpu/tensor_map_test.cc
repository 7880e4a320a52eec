// Tensor maps (cuTensorMapEncodeTiled, cuTensorMapReplaceAddress) and the copies that use them
// (cp.async.bulk.tensor loads, stores and reducing stores; multicast into a cluster), st.async,
// red.async and reducing bulk copies, against references computed here on the host. Kernels:
// kernels/tensor_kernels.cu for compute_90 (and the newest architecture).
#include <cuda.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "test_util.h"

namespace {

using softgpu_test::KernelFile;

struct Tensor {
  std::vector<uint64_t> dims;     // elements per dimension, innermost first
  std::vector<uint64_t> strides;  // bytes, dimensions 1.. (cuTensorMapEncodeTiled's globalStrides)
  uint64_t bytes = 0;
};

// A tensor of `dims` whose rows are padded to `pad` extra bytes, then rounded up to 16.
Tensor Shape(std::vector<uint64_t> dims, uint32_t element_bytes, uint64_t pad = 0) {
  Tensor t;
  t.dims = dims;
  uint64_t stride = (dims[0] * element_bytes + pad + 15) / 16 * 16;
  for (size_t i = 1; i < dims.size(); ++i) {
    t.strides.push_back(stride);
    stride *= dims[i];
  }
  t.bytes = stride;
  return t;
}

class TensorMapTest : public softgpu_test::KernelTest {
 protected:
  const char* PtxFile() const override { return "tensor_kernels.ptx"; }

  CUresult Encode(CUtensorMap* map, CUtensorMapDataType type, const Tensor& t, CUdeviceptr base,
                  std::vector<uint32_t> box, std::vector<uint32_t> element_strides = {},
                  CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE) {
    if (element_strides.empty()) element_strides.assign(box.size(), 1);
    return cuTensorMapEncodeTiled(map, type, static_cast<cuuint32_t>(t.dims.size()),
                                  reinterpret_cast<void*>(base), t.dims.data(), t.strides.data(),
                                  box.data(), element_strides.data(), CU_TENSOR_MAP_INTERLEAVE_NONE,
                                  swizzle, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  }

  // Runs tensor_load and returns the box's shared-memory image (`bytes` long).
  std::vector<uint8_t> Load(const CUtensorMap& map, int rank, std::vector<int> c, unsigned bytes,
                            CUresult* result = nullptr) {
    c.resize(5, 0);
    CUdeviceptr out;
    EXPECT_EQ(cuMemAlloc(&out, bytes), CUDA_SUCCESS);
    EXPECT_EQ(cuMemsetD8(out, 0xee, bytes), CUDA_SUCCESS);
    CUfunction f = Function("tensor_load");
    EXPECT_EQ(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 64 * 1024),
              CUDA_SUCCESS);
    CUtensorMap param = map;
    void* args[] = {&param, &rank, &c[0], &c[1], &c[2], &c[3], &c[4], &bytes, &out};
    CUresult r = cuLaunchKernel(f, 1, 1, 1, 64, 1, 1, bytes, nullptr, args, nullptr);
    if (r == CUDA_SUCCESS) r = cuCtxSynchronize();
    if (result != nullptr) *result = r;
    if (r != CUDA_SUCCESS) return {};
    return Download<uint8_t>(out, bytes);
  }
};

// The element a box load places at box position k (innermost first), or 0 outside the tensor:
// the tensor's element at c + k * element_strides, as `value(index)` of its linear index.
template <typename T, typename V>
std::vector<T> ExpectedBox(const Tensor& t, const std::vector<int>& c,
                           const std::vector<uint32_t>& n, const std::vector<uint32_t>& es,
                           V value) {
  size_t count = 1;
  for (uint32_t e : n) count *= e;
  std::vector<T> box(count, T{});
  for (size_t i = 0; i < count; ++i) {
    size_t rest = i, linear = 0, scale = 1;
    bool inside = true;
    for (size_t d = 0; d < n.size(); ++d) {
      const int64_t g = c[d] + static_cast<int64_t>(rest % n[d]) * (d == 0 ? 1 : es[d]);
      rest /= n[d];
      if (g < 0 || g >= static_cast<int64_t>(t.dims[d])) inside = false;
      linear += static_cast<size_t>(g) * scale;
      scale *= t.dims[d];
    }
    if (inside) box[i] = value(linear);
  }
  return box;
}

// Writes elements value(linear index) into a host image of `t` (padded rows) of element T.
template <typename T, typename V>
std::vector<uint8_t> Fill(const Tensor& t, V value) {
  std::vector<uint8_t> bytes(t.bytes, 0);
  size_t count = 1;
  for (uint64_t d : t.dims) count *= d;
  for (size_t linear = 0; linear < count; ++linear) {
    size_t rest = linear / t.dims[0];
    uint64_t offset = (linear % t.dims[0]) * sizeof(T);
    for (size_t d = 1; d < t.dims.size(); ++d) {
      offset += (rest % t.dims[d]) * t.strides[d - 1];
      rest /= t.dims[d];
    }
    const T v = value(linear);
    memcpy(bytes.data() + offset, &v, sizeof v);
  }
  return bytes;
}

TEST_F(TensorMapTest, EncodeChecksItsArguments) {
  CUtensorMap map;
  CUdeviceptr d;
  CU_ASSERT_OK(cuMemAlloc(&d, 1 << 16));
  const Tensor t = Shape({64, 32}, 4);
  CU_ASSERT_OK(Encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, t, d, {32, 8}));
  // Misaligned map or address, zero or too many dimensions, boxes of 0 or past 256 elements, an
  // inner box that is no multiple of 16 bytes, strides no multiple of 16, element strides past 8,
  // an inner box wider than the swizzle span: all refused as the driver documents.
  CUtensorMap* misaligned = reinterpret_cast<CUtensorMap*>(reinterpret_cast<char*>(&map) + 8);
  CU_EXPECT_EQ(Encode(misaligned, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, t, d, {32, 8}),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(Encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, t, d + 8, {32, 8}),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(Encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, t, d, {0, 8}),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(Encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, t, d, {32, 257}),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(Encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, t, d, {3, 8}),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(Encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, t, d, {32, 8}, {1, 9}),
               CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(
      Encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, t, d, {32, 8}, {}, CU_TENSOR_MAP_SWIZZLE_64B),
      CUDA_ERROR_INVALID_VALUE);
  Tensor odd = t;
  odd.strides[0] = 264;
  CU_EXPECT_EQ(Encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, odd, d, {32, 8}),
               CUDA_ERROR_INVALID_VALUE);
  const Tensor six = Shape({16, 2, 2, 2, 2, 2}, 4);
  CU_EXPECT_EQ(Encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, six, d, {16, 1, 1, 1, 1, 1}),
               CUDA_ERROR_INVALID_VALUE);
  const uint64_t dims[2] = {64, 32}, strides[1] = {256};
  const uint32_t box[2] = {32, 8}, es[2] = {1, 1};
  // What softgpu does not implement is NOT_SUPPORTED, never a map that would copy wrongly.
  CU_EXPECT_EQ(
      cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, reinterpret_cast<void*>(d),
                             dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                             CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                             CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA),
      CUDA_ERROR_NOT_SUPPORTED);
  // The NaN fill is for floating-point types only.
  CU_EXPECT_EQ(
      cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_INT32, 2, reinterpret_cast<void*>(d),
                             dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                             CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                             CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA),
      CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(Encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, t, d, {32, 8}, {},
                      CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B),
               CUDA_ERROR_NOT_SUPPORTED);
  // cuTensorMapReplaceAddress takes only a map made by the encoder, and a 16-byte aligned address.
  CU_ASSERT_OK(Encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, t, d, {32, 8}));
  CU_EXPECT_EQ(cuTensorMapReplaceAddress(&map, reinterpret_cast<void*>(d + 8)),
               CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuTensorMapReplaceAddress(&map, reinterpret_cast<void*>(d + 4096)));
  CUtensorMap garbage;
  memset(&garbage, 0x5a, sizeof garbage);
  CU_EXPECT_EQ(cuTensorMapReplaceAddress(&garbage, reinterpret_cast<void*>(d)),
               CUDA_ERROR_INVALID_VALUE);
}

// Boxes of 1 to 5 dimensions, with element strides and corners outside the tensor (zeros there).
TEST_F(TensorMapTest, LoadsBoxesOfEveryRankWithZerosOutsideTheTensor) {
  struct Case {
    std::vector<uint64_t> dims;
    std::vector<uint32_t> box, es;
    std::vector<int> c;
    uint64_t pad;
  };
  const Case cases[] = {
      {{100}, {32}, {1}, {80}, 0},                          // runs past the end
      {{40, 30}, {16, 8}, {1, 1}, {-4, 25}, 48},            // before and past, padded rows
      {{24, 10, 6}, {8, 4, 3}, {1, 2, 1}, {20, 3, -1}, 0},  // element stride 2 in dim 1
      {{8, 5, 4, 3}, {8, 2, 4, 2}, {1, 1, 3, 2}, {0, 4, 1, 1}, 16},
      {{4, 3, 3, 2, 2}, {4, 3, 2, 2, 2}, {1, 1, 2, 1, 1}, {0, 0, 1, -1, 1}, 0},
  };
  for (const Case& k : cases) {
    const Tensor t = Shape(k.dims, 4, k.pad);
    auto value = [](size_t i) { return static_cast<float>(i) * 0.25f + 1.0f; };
    const std::vector<uint8_t> image = Fill<float>(t, value);
    CUdeviceptr d = Upload(image);
    CUtensorMap map;
    CU_ASSERT_OK(Encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, t, d, k.box, k.es));
    std::vector<uint32_t> n;
    for (size_t i = 0; i < k.box.size(); ++i) n.push_back((k.box[i] + k.es[i] - 1) / k.es[i]);
    const std::vector<float> want = ExpectedBox<float>(t, k.c, n, k.es, value);
    const unsigned bytes = static_cast<unsigned>(want.size() * sizeof(float));
    const std::vector<uint8_t> got = Load(map, static_cast<int>(k.dims.size()), k.c, bytes);
    ASSERT_EQ(got.size(), bytes) << "rank " << k.dims.size();
    std::vector<float> got_f(want.size());
    memcpy(got_f.data(), got.data(), bytes);
    EXPECT_EQ(got_f, want) << "rank " << k.dims.size();
  }
}

// The swizzle modes permute 16-byte chunks within each row of the box as the hardware's
// 32/64/128-byte patterns do: chunk j of box row r lands at chunk j ^ f(r), f(r) = (r / 4) % 2,
// (r / 2) % 4 and r % 8 for rows of 32, 64 and 128 bytes.
TEST_F(TensorMapTest, SwizzledLoadsPermuteSixteenByteChunks) {
  struct Mode {
    CUtensorMapSwizzle swizzle;
    uint32_t row_bytes;
    uint32_t (*pattern)(uint32_t row);
  };
  const Mode modes[] = {
      {CU_TENSOR_MAP_SWIZZLE_32B, 32, [](uint32_t r) { return (r / 4) % 2; }},
      {CU_TENSOR_MAP_SWIZZLE_64B, 64, [](uint32_t r) { return (r / 2) % 4; }},
      {CU_TENSOR_MAP_SWIZZLE_128B, 128, [](uint32_t r) { return r % 8; }},
  };
  for (const Mode& mode : modes) {
    const uint32_t columns = mode.row_bytes / 2, rows = 24;  // 16-bit elements
    const Tensor t = Shape({200, 50}, 2);
    auto value = [](size_t i) { return static_cast<uint16_t>(i * 7 + 1); };
    CUdeviceptr d = Upload(Fill<uint16_t>(t, value));
    CUtensorMap map;
    CU_ASSERT_OK(
        Encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, t, d, {columns, rows}, {}, mode.swizzle));
    const std::vector<int> c = {16, 5};
    const std::vector<uint16_t> box = ExpectedBox<uint16_t>(t, c, {columns, rows}, {1, 1}, value);
    const unsigned bytes = columns * rows * 2;
    const std::vector<uint8_t> got = Load(map, 2, c, bytes);
    ASSERT_EQ(got.size(), bytes) << mode.row_bytes;
    for (uint32_t r = 0; r < rows; ++r) {
      for (uint32_t col = 0; col < columns; ++col) {
        const uint32_t chunk = (col * 2 / 16) ^ mode.pattern(r);
        const uint32_t at = r * mode.row_bytes + chunk * 16 + (col * 2) % 16;
        uint16_t v;
        memcpy(&v, got.data() + at, 2);
        ASSERT_EQ(v, box[r * columns + col]) << mode.row_bytes << "B row " << r << " col " << col;
      }
    }
  }
}

TEST_F(TensorMapTest, AMapInGlobalMemoryAndAReplacedAddressWork) {
  const Tensor t = Shape({64, 16}, 4);
  auto first = [](size_t i) { return static_cast<int32_t>(i); };
  auto second = [](size_t i) { return -static_cast<int32_t>(i) - 5; };
  CUdeviceptr a = Upload(Fill<int32_t>(t, first)), b = Upload(Fill<int32_t>(t, second));
  CUtensorMap map;
  CU_ASSERT_OK(Encode(&map, CU_TENSOR_MAP_DATA_TYPE_INT32, t, a, {16, 4}));
  CU_ASSERT_OK(cuTensorMapReplaceAddress(&map, reinterpret_cast<void*>(b)));
  CUdeviceptr dmap, out;
  CU_ASSERT_OK(cuMemAlloc(&dmap, sizeof map));
  CU_ASSERT_OK(cuMemcpyHtoD(dmap, &map, sizeof map));
  const unsigned bytes = 16 * 4 * 4;
  CU_ASSERT_OK(cuMemAlloc(&out, bytes));
  int c0 = 8, c1 = 3;
  unsigned b_ = bytes;
  void* args[] = {&dmap, &c0, &c1, &b_, &out};
  CU_ASSERT_OK(cuLaunchKernel(Function("tensor_load_from_global"), 1, 1, 1, 32, 1, 1, bytes,
                              nullptr, args, nullptr));
  CU_ASSERT_OK(cuCtxSynchronize());
  EXPECT_EQ(Download<int32_t>(out, 64), ExpectedBox<int32_t>(t, {8, 3}, {16, 4}, {1, 1}, second));
}

// Stores write the elements inside the tensor and nothing outside it; reducing stores add.
TEST_F(TensorMapTest, StoresAndReductionsWriteOnlyInsideTheTensor) {
  const Tensor t = Shape({40, 20}, 4, 32);
  auto initial = [](size_t i) { return static_cast<float>(i); };
  const std::vector<uint8_t> before = Fill<float>(t, initial);
  for (int reduce = 0; reduce <= 1; ++reduce) {
    CUdeviceptr d = Upload(before);
    CUtensorMap map;
    CU_ASSERT_OK(Encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, t, d, {16, 8}, {},
                        CU_TENSOR_MAP_SWIZZLE_64B));
    // The shared-memory image: element (r, col) of the box at chunk (col / 4) ^ ((r / 2) % 4).
    std::vector<float> image(16 * 8);
    for (uint32_t r = 0; r < 8; ++r) {
      for (uint32_t col = 0; col < 16; ++col) {
        const uint32_t at = r * 16 + ((col / 4) ^ ((r / 2) % 4)) * 4 + col % 4;
        image[at] = 1000.0f + r * 16 + col;
      }
    }
    CUdeviceptr dimage = Upload(image);
    int c0 = 30, c1 = -3;  // columns 30..45 (40.. outside), rows -3..4 (-3..-1 outside)
    unsigned bytes = 16 * 8 * 4;
    void* args[] = {&map, &c0, &c1, &dimage, &bytes, &reduce};
    CU_ASSERT_OK(cuLaunchKernel(Function("tensor_store_2d"), 1, 1, 1, 64, 1, 1, bytes, nullptr,
                                args, nullptr));
    CU_ASSERT_OK(cuCtxSynchronize());
    const std::vector<uint8_t> after = Download<uint8_t>(d, t.bytes);
    for (uint64_t y = 0; y < 20; ++y) {
      for (uint64_t x = 0; x < 40; ++x) {
        float got, was;
        memcpy(&got, after.data() + y * t.strides[0] + x * 4, 4);
        memcpy(&was, before.data() + y * t.strides[0] + x * 4, 4);
        const int64_t r = static_cast<int64_t>(y) - c1, col = static_cast<int64_t>(x) - c0;
        float want = was;
        if (r >= 0 && r < 8 && col >= 0 && col < 16) {
          const float stored = 1000.0f + r * 16 + col;
          want = reduce ? was + stored : stored;
        }
        ASSERT_EQ(got, want) << "reduce " << reduce << " x " << x << " y " << y;
      }
      // The row's padding is untouched.
      for (uint64_t p = 40 * 4; p < t.strides[0]; ++p) {
        ASSERT_EQ(after[y * t.strides[0] + p], 0) << y;
      }
    }
  }
}

TEST_F(TensorMapTest, AMulticastLoadFillsEveryBlockOfTheMask) {
  const Tensor t = Shape({64, 64}, 4);
  auto value = [](size_t i) { return static_cast<uint32_t>(i * 3); };
  CUdeviceptr d = Upload(Fill<uint32_t>(t, value));
  CUtensorMap map;
  CU_ASSERT_OK(
      Encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT32, t, d, {32, 16}, {}, CU_TENSOR_MAP_SWIZZLE_128B));
  const unsigned bytes = 32 * 16 * 4;
  CUdeviceptr out;
  CU_ASSERT_OK(cuMemAlloc(&out, 2 * bytes));
  int c0 = 8, c1 = 40;
  unsigned b = bytes;
  void* args[] = {&map, &c0, &c1, &b, &out};
  CU_ASSERT_OK(cuLaunchKernel(Function("tensor_load_multicast"), 2, 1, 1, 64, 1, 1, bytes, nullptr,
                              args, nullptr));
  CU_ASSERT_OK(cuCtxSynchronize());
  const std::vector<uint32_t> box = ExpectedBox<uint32_t>(t, {8, 40}, {32, 16}, {1, 1}, value);
  const std::vector<uint32_t> got = Download<uint32_t>(out, 2 * 32 * 16);
  for (uint32_t rank = 0; rank < 2; ++rank) {
    for (uint32_t r = 0; r < 16; ++r) {
      for (uint32_t col = 0; col < 32; ++col) {
        const uint32_t at = r * 32 + ((col / 4) ^ (r % 8)) * 4 + col % 4;
        ASSERT_EQ(got[rank * 32 * 16 + at], box[r * 32 + col]) << rank << " " << r << " " << col;
      }
    }
  }
}

TEST_F(TensorMapTest, StAsyncAndRedAsyncCompleteTheOtherBlocksBarrier) {
  std::vector<unsigned> values(64);
  for (unsigned i = 0; i < 64; ++i) values[i] = i * i + 7;
  CUdeviceptr dvalues = Upload(values), words, sums;
  CU_ASSERT_OK(cuMemAlloc(&words, 64 * 4));
  CU_ASSERT_OK(cuMemAlloc(&sums, 64 * 4));
  void* args[] = {&dvalues, &words, &sums};
  CU_ASSERT_OK(
      cuLaunchKernel(Function("async_stores"), 2, 1, 1, 64, 1, 1, 0, nullptr, args, nullptr));
  CU_ASSERT_OK(cuCtxSynchronize());
  const std::vector<unsigned> got_words = Download<unsigned>(words, 64);
  const std::vector<unsigned> got_sums = Download<unsigned>(sums, 64);
  for (unsigned i = 0; i < 64; ++i) {
    EXPECT_EQ(got_words[i], values[i]) << i;
    EXPECT_EQ(got_sums[i], values[i] + i) << i;
  }
}

TEST_F(TensorMapTest, ReducingBulkCopiesAdd) {
  std::vector<float> src(200), dst(200);
  for (int i = 0; i < 200; ++i) {
    src[i] = i * 0.5f;
    dst[i] = 1000.0f - i;
  }
  CUdeviceptr dsrc = Upload(src), ddst = Upload(dst), dcopy;
  CU_ASSERT_OK(cuMemAlloc(&dcopy, 200 * 4));
  unsigned count = 200;
  void* args[] = {&dsrc, &ddst, &dcopy, &count};
  CU_ASSERT_OK(
      cuLaunchKernel(Function("bulk_reduce_add"), 1, 1, 1, 64, 1, 1, 0, nullptr, args, nullptr));
  CU_ASSERT_OK(cuCtxSynchronize());
  const std::vector<float> sum = Download<float>(ddst, 200), copy = Download<float>(dcopy, 200);
  for (int i = 0; i < 200; ++i) {
    EXPECT_EQ(sum[i], dst[i] + src[i]) << i;
    EXPECT_EQ(copy[i], src[i]) << i;
  }
}

// Bytes that are no map, a map of another rank, a box past shared memory and a map over memory
// the context does not own fault the kernel; the context keeps the error.
TEST_F(TensorMapTest, BadMapsFaultTheKernel) {
  CUdeviceptr d;
  CU_ASSERT_OK(cuMemAlloc(&d, 4096));
  CUtensorMap map;
  memset(&map, 0x33, sizeof map);
  CUresult r;
  Load(map, 2, {0, 0}, 256, &r);
  EXPECT_EQ(r, CUDA_ERROR_ILLEGAL_ADDRESS);
}

TEST_F(TensorMapTest, AMapOfAnotherRankFaults) {
  CUdeviceptr d;
  CU_ASSERT_OK(cuMemAlloc(&d, 4096));
  CUtensorMap map;
  CU_ASSERT_OK(Encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, Shape({16, 16}, 4), d, {16, 4}));
  CUresult r;
  Load(map, 3, {0, 0, 0}, 256, &r);
  EXPECT_EQ(r, CUDA_ERROR_ILLEGAL_ADDRESS);
}

TEST_F(TensorMapTest, ABoxLargerThanSharedMemoryFaults) {
  CUdeviceptr d;
  CU_ASSERT_OK(cuMemAlloc(&d, 1 << 20));
  CUtensorMap map;
  CU_ASSERT_OK(Encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, Shape({256, 256}, 4), d, {64, 64}));
  CUresult r;
  Load(map, 2, {0, 0}, 1024, &r);  // the box is 16 KiB; the launch gives 1 KiB
  EXPECT_EQ(r, CUDA_ERROR_ILLEGAL_ADDRESS);
}

TEST_F(TensorMapTest, AMapOverMemoryTheContextDoesNotOwnFaults) {
  CUdeviceptr d;
  CU_ASSERT_OK(cuMemAlloc(&d, 4096));
  CUtensorMap map;
  // 64 rows of 256 bytes: rows past the 4 KiB allocation are not this context's memory.
  CU_ASSERT_OK(Encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, Shape({64, 64}, 4), d, {16, 8}));
  CUresult r;
  EXPECT_EQ(Load(map, 2, {0, 0}, 512).size(), 512u);  // rows 0..7: inside the allocation
  Load(map, 2, {0, 32}, 512, &r);
  EXPECT_EQ(r, CUDA_ERROR_ILLEGAL_ADDRESS);
}

}  // namespace
