// Batched copies (cuMemcpyBatchAsync, cuMemcpy3DBatchAsync) on the software GPU: every direction
// in one batch, sources read during the call, 3D boxes between pitched host memory, arrays and
// device memory, and batches refused whole.
#include <cuda.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "test_util.h"

namespace {

class MemcpyBatchTest : public softgpu_test::KernelTest {
 protected:
  void SetUp() override {
    KernelTest::SetUp();
    if (ctx_ == nullptr) return;
    CU_ASSERT_OK(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
  }
  void TearDown() override {
    if (stream_ != nullptr) EXPECT_EQ(cuStreamDestroy(stream_), CUDA_SUCCESS);
    KernelTest::TearDown();
  }

  static CUmemcpyAttributes Attributes(CUmemcpySrcAccessOrder order, unsigned flags = 0) {
    CUmemcpyAttributes a = {};
    a.srcAccessOrder = order;
    a.flags = flags;
    return a;
  }
  static CUdeviceptr Ptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

  CUstream stream_ = nullptr;
};

std::vector<uint8_t> Pattern(size_t n, unsigned seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * seed + 3);
  return v;
}

TEST_F(MemcpyBatchTest, CopiesEveryDirectionWithTwoSetsOfAttributes) {
  const size_t n = 4096;
  const std::vector<uint8_t> a = Pattern(n, 7), b = Pattern(n, 13);
  CUdeviceptr d1, d2 = Upload(b), d3;
  CU_ASSERT_OK(cuMemAlloc(&d1, n));
  CU_ASSERT_OK(cuMemAlloc(&d3, n));
  std::vector<uint8_t> out(n, 0);
  CUdeviceptr dsts[3] = {d1, d3, Ptr(out.data())};
  CUdeviceptr srcs[3] = {Ptr(a.data()), d2, d2 + 1000};
  size_t sizes[3] = {n, n, 100};
  CUmemcpyAttributes attrs[2] = {
      Attributes(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM),
      Attributes(CU_MEMCPY_SRC_ACCESS_ORDER_ANY, CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE)};
  size_t idxs[2] = {0, 1};
  CU_ASSERT_OK(cuMemcpyBatchAsync(dsts, srcs, sizes, 3, attrs, idxs, 2, stream_));
  CU_ASSERT_OK(cuStreamSynchronize(stream_));
  EXPECT_EQ(Download<uint8_t>(d1, n), a);
  EXPECT_EQ(Download<uint8_t>(d3, n), b);
  for (size_t i = 0; i < 100; ++i) ASSERT_EQ(out[i], b[1000 + i]) << i;
  EXPECT_EQ(out[100], 0);
}

// A device source read during the call may be overwritten (here on another stream) as soon as
// the call returns, and a host source changed.
TEST_F(MemcpyBatchTest, SourcesReadDuringTheCallMayChangeWhenItReturns) {
  const size_t n = 1 << 20;
  std::vector<uint8_t> host = Pattern(n, 5);
  const std::vector<uint8_t> host_before = host, device_before = Pattern(n, 11);
  CUdeviceptr from_host, from_device, source = Upload(device_before);
  CU_ASSERT_OK(cuMemAlloc(&from_host, n));
  CU_ASSERT_OK(cuMemAlloc(&from_device, n));
  CUstream other;
  CU_ASSERT_OK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
  CUdeviceptr dsts[2] = {from_host, from_device};
  CUdeviceptr srcs[2] = {Ptr(host.data()), source};
  size_t sizes[2] = {n, n};
  CUmemcpyAttributes attrs = Attributes(CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL);
  size_t first = 0;
  CU_ASSERT_OK(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, &attrs, &first, 1, stream_));
  memset(host.data(), 0xEE, n);
  CU_ASSERT_OK(cuMemsetD8Async(source, 0xEE, n, other));
  CU_ASSERT_OK(cuStreamSynchronize(other));
  CU_ASSERT_OK(cuStreamSynchronize(stream_));
  EXPECT_EQ(Download<uint8_t>(from_host, n), host_before);
  EXPECT_EQ(Download<uint8_t>(from_device, n), device_before);
  CU_ASSERT_OK(cuStreamDestroy(other));
}

TEST_F(MemcpyBatchTest, ABatchIsRefusedWholeAndCopiesNothing) {
  const size_t n = 256;
  CUdeviceptr d;
  CU_ASSERT_OK(cuMemAlloc(&d, n));
  CU_ASSERT_OK(cuMemsetD8(d, 0, n));
  const std::vector<uint8_t> host = Pattern(n, 3);
  CUdeviceptr dsts[2] = {d, d + 128};
  CUdeviceptr srcs[2] = {Ptr(host.data()), Ptr(host.data())};
  size_t sizes[2] = {128, 128}, too_long[2] = {128, 129};
  CUmemcpyAttributes good[2] = {Attributes(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM),
                                Attributes(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM)};
  CUmemcpyAttributes bad[2] = {Attributes(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM),
                               Attributes(CU_MEMCPY_SRC_ACCESS_ORDER_INVALID)};
  size_t idxs[2] = {0, 1}, unordered[2] = {0, 0}, past[2] = {0, 2};
  EXPECT_EQ(cuMemcpyBatchAsync(dsts, srcs, too_long, 2, good, idxs, 2, stream_),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, bad, idxs, 2, stream_),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, good, unordered, 2, stream_),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, good, past, 2, stream_),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpyBatchAsync(dsts, srcs, sizes, 0, good, idxs, 1, stream_),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, good, idxs, 2, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuStreamSynchronize(stream_));
  EXPECT_EQ(Download<uint8_t>(d, n), std::vector<uint8_t>(n, 0));
}

CUmemcpy3DOperand PointerOperand(CUdeviceptr p, size_t row_length, size_t layer_height) {
  CUmemcpy3DOperand o = {};
  o.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
  o.op.ptr.ptr = p;
  o.op.ptr.rowLength = row_length;
  o.op.ptr.layerHeight = layer_height;
  return o;
}

CUmemcpy3DOperand ArrayOperand(CUarray a, size_t x, size_t y) {
  CUmemcpy3DOperand o = {};
  o.type = CU_MEMCPY_OPERAND_TYPE_ARRAY;
  o.op.array.array = a;
  o.op.array.offset = {x, y, 0};
  return o;
}

CUDA_MEMCPY3D_BATCH_OP Op(CUmemcpy3DOperand src, CUmemcpy3DOperand dst, size_t w, size_t h,
                          size_t d) {
  CUDA_MEMCPY3D_BATCH_OP op = {};
  op.src = src;
  op.dst = dst;
  op.extent = {w, h, d};
  op.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  return op;
}

TEST_F(MemcpyBatchTest, ThreeDimensionalBoxesThroughAnArray) {
  // 16 x 8 two-byte elements (two 8-bit channels); host rows of 12 elements, 6 x 3 of them into
  // the array at (4, 2), then the whole array out to device memory.
  CUDA_ARRAY3D_DESCRIPTOR desc = {};
  desc.Width = 16;
  desc.Height = 8;
  desc.Format = CU_AD_FORMAT_UNSIGNED_INT8;
  desc.NumChannels = 2;
  CUarray array;
  CU_ASSERT_OK(cuArray3DCreate(&array, &desc));
  const std::vector<uint8_t> zeros(16 * 8 * 2, 0);
  CUDA_MEMCPY3D_BATCH_OP clear =
      Op(PointerOperand(Ptr(zeros.data()), 0, 0), ArrayOperand(array, 0, 0), 16, 8, 1);
  const std::vector<uint8_t> rows = Pattern(12 * 2 * 3, 9);
  CUDA_MEMCPY3D_BATCH_OP into =
      Op(PointerOperand(Ptr(rows.data()), 12, 0), ArrayOperand(array, 4, 2), 6, 3, 1);
  CU_ASSERT_OK(cuMemcpy3DBatchAsync(1, &clear, 0, stream_));
  CU_ASSERT_OK(cuMemcpy3DBatchAsync(1, &into, 0, stream_));
  CUdeviceptr flat;
  CU_ASSERT_OK(cuMemAlloc(&flat, zeros.size()));
  CUDA_MEMCPY3D_BATCH_OP out = Op(ArrayOperand(array, 0, 0), PointerOperand(flat, 0, 0), 16, 8, 1);
  CU_ASSERT_OK(cuMemcpy3DBatchAsync(1, &out, 0, stream_));
  CU_ASSERT_OK(cuStreamSynchronize(stream_));
  const std::vector<uint8_t> got = Download<uint8_t>(flat, zeros.size());
  for (size_t y = 0; y < 8; ++y) {
    for (size_t x = 0; x < 16 * 2; ++x) {
      const bool inside = x >= 8 && x < 20 && y >= 2 && y < 5;
      const uint8_t expect = inside ? rows[(y - 2) * 24 + (x - 8)] : 0;
      ASSERT_EQ(got[y * 32 + x], expect) << x << "," << y;
    }
  }
  // Refused: a zero extent, a row length below the width, batch flags, arrays whose elements
  // differ, and a box past the device allocation (after a good op: nothing is copied).
  CUDA_MEMCPY3D_BATCH_OP bad = out;
  bad.extent.depth = 0;
  EXPECT_EQ(cuMemcpy3DBatchAsync(1, &bad, 0, stream_), CUDA_ERROR_INVALID_VALUE);
  bad = into;
  bad.src.op.ptr.rowLength = 5;
  EXPECT_EQ(cuMemcpy3DBatchAsync(1, &bad, 0, stream_), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpy3DBatchAsync(1, &out, 1, stream_), CUDA_ERROR_INVALID_VALUE);
  CUDA_ARRAY3D_DESCRIPTOR float_desc = desc;
  float_desc.Format = CU_AD_FORMAT_FLOAT;
  float_desc.NumChannels = 1;
  CUarray floats;
  CU_ASSERT_OK(cuArray3DCreate(&floats, &float_desc));
  CUDA_MEMCPY3D_BATCH_OP mismatch =
      Op(ArrayOperand(array, 0, 0), ArrayOperand(floats, 0, 0), 2, 2, 1);
  EXPECT_EQ(cuMemcpy3DBatchAsync(1, &mismatch, 0, stream_), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuMemsetD8(flat, 0, zeros.size()));
  CUDA_MEMCPY3D_BATCH_OP good_then_past[2] = {
      Op(PointerOperand(Ptr(rows.data()), 0, 0), PointerOperand(flat, 0, 0), 24, 1, 1),
      Op(PointerOperand(Ptr(zeros.data()), 0, 0), PointerOperand(flat, 0, 0), 32, 8, 2)};
  EXPECT_EQ(cuMemcpy3DBatchAsync(2, good_then_past, 0, stream_), CUDA_ERROR_INVALID_VALUE);
  CUDA_MEMCPY3D_BATCH_OP good_then_past_array[2] = {
      good_then_past[0],
      Op(PointerOperand(Ptr(zeros.data()), 0, 0), ArrayOperand(array, 12, 0), 5, 1, 1)};
  EXPECT_EQ(cuMemcpy3DBatchAsync(2, good_then_past_array, 0, stream_), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuStreamSynchronize(stream_));
  EXPECT_EQ(Download<uint8_t>(flat, zeros.size()), zeros);
  CU_ASSERT_OK(cuArrayDestroy(array));
  CU_ASSERT_OK(cuArrayDestroy(floats));
}

}  // namespace
