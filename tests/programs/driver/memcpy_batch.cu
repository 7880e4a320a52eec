// Batched copies (cuMemcpyBatchAsync, cuMemcpy3DBatchAsync; CUDA 13's v2 API, CUDA 12.8's v1 API
// through cuGetProcAddress, and the per-thread-stream variant): host-to-device, device-to-host
// and device-to-device copies of one batch with two sets of attributes land; a source read
// during the call (DURING_API_CALL), in page-locked memory, on the stack and in device memory, may
// change as soon as the call returns, even while the stream still waits to run the copy; 3D
// copies between pitched host memory, arrays and device memory land box for box; a batch is
// refused whole (bad counts, attribute indices, access orders, flags, the legacy stream, a copy
// past its allocation, a zero extent, a short row length, mismatched arrays), copying nothing;
// and a captured batch runs when its graph is launched, while a copy that must read its source
// during the call cannot be captured.
#include <cudaTypedefs.h>
#include <stdint.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "check.h"

namespace {

constexpr CUmemcpySrcAccessOrder kStream = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
constexpr CUmemcpySrcAccessOrder kDuringCall = CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL;
constexpr CUmemcpySrcAccessOrder kAny = CU_MEMCPY_SRC_ACCESS_ORDER_ANY;

CUmemcpyAttributes Attributes(CUmemcpySrcAccessOrder order, unsigned flags = 0) {
  CUmemcpyAttributes a = {};
  a.srcAccessOrder = order;
  a.flags = flags;
  return a;
}

std::vector<uint8_t> Read(CUdeviceptr p, size_t n) {
  std::vector<uint8_t> out(n);
  CHECK(cuMemcpyDtoH(out.data(), p, n));
  return out;
}

void ExpectBytes(const std::vector<uint8_t>& got, uint8_t (*expect)(size_t), const char* what) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != expect(i)) {
      fprintf(stderr, "%s: byte %zu is %u, expected %u\n", what, i, got[i], expect(i));
      exit(1);
    }
  }
}

uint8_t PatternA(size_t i) { return static_cast<uint8_t>(i * 7 + 1); }
uint8_t PatternB(size_t i) { return static_cast<uint8_t>(i * 13 + 5); }
uint8_t PatternC(size_t i) { return static_cast<uint8_t>(i ^ 0x5a); }
uint8_t Zero(size_t) { return 0; }

// One batch of pointer copies with one set of attributes for all.
CUresult Batch(std::vector<CUdeviceptr> dsts, std::vector<CUdeviceptr> srcs,
               std::vector<size_t> sizes, CUmemcpySrcAccessOrder order, CUstream s) {
  CUmemcpyAttributes attrs = Attributes(order);
  size_t first = 0;
  return cuMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), dsts.size(), &attrs, &first, 1,
                            s);
}

CUdeviceptr Ptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

// Sources read during the call may change once it returns, although the stream, waiting on a
// word, has not run the copies yet.
void DuringCallSources(CUstream s, CUstream other) {
  const size_t big = 2 << 20, small = 64;
  CUdeviceptr word, a, b;
  CHECK(cuMemAlloc(&word, 4));
  CHECK(cuMemsetD32(word, 0, 1));
  CHECK(cuMemAlloc(&a, big));
  CHECK(cuMemAlloc(&b, small));
  uint8_t* pinned;
  CHECK(cuMemAllocHost(reinterpret_cast<void**>(&pinned), big));
  for (size_t i = 0; i < big; ++i) pinned[i] = PatternA(i);
  uint8_t on_stack[small];
  for (size_t i = 0; i < small; ++i) on_stack[i] = PatternB(i);

  CHECK(cuStreamWaitValue32(s, word, 1, CU_STREAM_WAIT_VALUE_GEQ));
  CHECK(Batch({a, b}, {Ptr(pinned), Ptr(on_stack)}, {big, small}, kDuringCall, s));
  memset(pinned, 0xEE, big);
  memset(on_stack, 0xEE, small);
  EXPECT_TRUE(cuStreamQuery(s) == CUDA_ERROR_NOT_READY);
  CHECK(cuStreamWriteValue32(other, word, 1, 0));
  CHECK(cuStreamSynchronize(s));
  ExpectBytes(Read(a, big), PatternA, "page-locked source read during the call");
  ExpectBytes(Read(b, small), PatternB, "stack source read during the call");

  // From device memory: the source may be overwritten (on another stream) once the call returns.
  CUdeviceptr c;
  CHECK(cuMemAlloc(&c, small));
  CHECK(Batch({c}, {b}, {small}, kDuringCall, s));
  CHECK(cuMemsetD8Async(b, 0xEE, small, other));
  CHECK(cuStreamSynchronize(other));
  CHECK(cuStreamSynchronize(s));
  ExpectBytes(Read(c, small), PatternB, "device source read during the call");
  CHECK(cuMemFreeHost(pinned));
  CHECK(cuMemFree(word));
  CHECK(cuMemFree(a));
  CHECK(cuMemFree(b));
  CHECK(cuMemFree(c));
}

// Every direction in one batch, with two sets of attributes (attrsIdxs {0, 2}).
void Directions(CUstream s) {
  const size_t n = 4096;
  CUdeviceptr d1, d2, d3;
  CHECK(cuMemAlloc(&d1, n));
  CHECK(cuMemAlloc(&d2, n));
  CHECK(cuMemAlloc(&d3, n));
  std::vector<uint8_t> host(n), out(n);
  for (size_t i = 0; i < n; ++i) host[i] = PatternC(i);
  std::vector<uint8_t> b_bytes(n);
  for (size_t i = 0; i < n; ++i) b_bytes[i] = PatternB(i);
  CHECK(cuMemcpyHtoD(d2, b_bytes.data(), n));
  uint8_t* pinned_out;
  CHECK(cuMemAllocHost(reinterpret_cast<void**>(&pinned_out), n));
  memset(pinned_out, 0, n);
  CHECK(cuMemsetD8(d1, 0, n));

  std::vector<CUdeviceptr> dsts = {d1, d3, Ptr(pinned_out), Ptr(out.data())};
  std::vector<CUdeviceptr> srcs = {Ptr(host.data()), d2, d2 + n / 2, d2};
  std::vector<size_t> sizes = {n, n, n / 2, 100};
  CUmemcpyAttributes attrs[2] = {Attributes(kStream),
                                 Attributes(kAny, CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE)};
  size_t idxs[2] = {0, 2};
  CHECK(cuMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), 4, attrs, idxs, 2, s));
  CHECK(cuStreamSynchronize(s));
  ExpectBytes(Read(d1, n), PatternC, "host to device");
  ExpectBytes(Read(d3, n), PatternB, "device to device");
  for (size_t i = 0; i < n / 2; ++i) EXPECT_TRUE(pinned_out[i] == PatternB(n / 2 + i));
  for (size_t i = 0; i < 100; ++i) EXPECT_TRUE(out[i] == PatternB(i));
  EXPECT_TRUE(out[100] == 0);
  CHECK(cuMemFreeHost(pinned_out));
  CHECK(cuMemFree(d1));
  CHECK(cuMemFree(d2));
  CHECK(cuMemFree(d3));
}

// Batches refused whole: nothing of them is copied.
void Refusals(CUstream s) {
  const size_t n = 256;
  CUdeviceptr d;
  CHECK(cuMemAlloc(&d, n));
  CHECK(cuMemsetD8(d, 0, n));
  std::vector<uint8_t> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = PatternA(i);
  CUdeviceptr dsts[2] = {d, d + 128};
  CUdeviceptr srcs[2] = {Ptr(host.data()), Ptr(host.data())};
  size_t sizes[2] = {128, 128};
  CUmemcpyAttributes good[2] = {Attributes(kStream), Attributes(kStream)};
  size_t idxs[2] = {0, 1};
  const CUresult kInvalid = CUDA_ERROR_INVALID_VALUE;
  // No copies; no attributes; more attributes than copies.
  EXPECT_TRUE(cuMemcpyBatchAsync(dsts, srcs, sizes, 0, good, idxs, 1, s) == kInvalid);
  EXPECT_TRUE(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, good, idxs, 0, s) == kInvalid);
  size_t three[3] = {0, 1, 2};
  CUmemcpyAttributes three_attrs[3] = {Attributes(kStream), Attributes(kStream),
                                       Attributes(kStream)};
  EXPECT_TRUE(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, three_attrs, three, 3, s) == kInvalid);
  // Indices: not starting at 0, not increasing, past the last copy.
  size_t from_one[2] = {1, 1}, same[2] = {0, 0}, past[2] = {0, 2};
  EXPECT_TRUE(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, good, from_one, 1, s) == kInvalid);
  EXPECT_TRUE(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, good, same, 2, s) == kInvalid);
  EXPECT_TRUE(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, good, past, 2, s) == kInvalid);
  // An invalid access order or an unknown flag in the second set.
  CUmemcpyAttributes bad_order[2] = {Attributes(kStream),
                                     Attributes(CU_MEMCPY_SRC_ACCESS_ORDER_INVALID)};
  CUmemcpyAttributes bad_flags[2] = {Attributes(kStream), Attributes(kStream, 2)};
  EXPECT_TRUE(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, bad_order, idxs, 2, s) == kInvalid);
  EXPECT_TRUE(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, bad_flags, idxs, 2, s) == kInvalid);
  // The legacy default stream.
  EXPECT_TRUE(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, good, idxs, 2, nullptr) == kInvalid);
  EXPECT_TRUE(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, good, idxs, 2, CU_STREAM_LEGACY) ==
              kInvalid);
  // The second copy runs past the allocation: the first is not made either.
  size_t too_long[2] = {128, 129};
  EXPECT_TRUE(cuMemcpyBatchAsync(dsts, srcs, too_long, 2, good, idxs, 2, s) == kInvalid);
  CHECK(cuStreamSynchronize(s));
  ExpectBytes(Read(d, n), Zero, "refused batches");

  // CUDA 12.8's revision reports the failing copy.
  PFN_cuMemcpyBatchAsync_v12080 v1 = nullptr;
  CUdriverProcAddressQueryResult found;
  CHECK(cuGetProcAddress("cuMemcpyBatchAsync", reinterpret_cast<void**>(&v1), 12080,
                         CU_GET_PROC_ADDRESS_DEFAULT, &found));
  EXPECT_TRUE(found == CU_GET_PROC_ADDRESS_SUCCESS && v1 != nullptr);
  size_t fail = 0;
  EXPECT_TRUE(v1(dsts, srcs, too_long, 2, good, idxs, 2, &fail, s) == kInvalid);
  EXPECT_TRUE(fail == 1);
  CHECK(cuStreamSynchronize(s));
  ExpectBytes(Read(d, n), Zero, "refused v1 batch");
  CHECK(v1(dsts, srcs, sizes, 2, good, idxs, 2, &fail, s));
  CHECK(cuStreamSynchronize(s));
  std::vector<uint8_t> got = Read(d, n);
  for (size_t i = 0; i < n; ++i) EXPECT_TRUE(got[i] == PatternA(i % 128));

  // The per-thread variant takes the NULL stream as the thread's own.
  PFN_cuMemcpyBatchAsync_v13000 per_thread = nullptr;
  CHECK(cuGetProcAddress("cuMemcpyBatchAsync", reinterpret_cast<void**>(&per_thread), 13000,
                         CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &found));
  EXPECT_TRUE(found == CU_GET_PROC_ADDRESS_SUCCESS && per_thread != nullptr);
  CHECK(cuMemsetD8(d, 0, n));
  CHECK(per_thread(dsts, srcs, sizes, 2, good, idxs, 2, nullptr));
  CHECK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
  got = Read(d, n);
  for (size_t i = 0; i < n; ++i) EXPECT_TRUE(got[i] == PatternA(i % 128));
  CHECK(cuMemFree(d));
}

CUmemcpy3DOperand PointerOperand(CUdeviceptr p, size_t row_length, size_t layer_height) {
  CUmemcpy3DOperand o = {};
  o.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
  o.op.ptr.ptr = p;
  o.op.ptr.rowLength = row_length;
  o.op.ptr.layerHeight = layer_height;
  return o;
}

CUmemcpy3DOperand ArrayOperand(CUarray a, size_t x, size_t y, size_t z) {
  CUmemcpy3DOperand o = {};
  o.type = CU_MEMCPY_OPERAND_TYPE_ARRAY;
  o.op.array.array = a;
  o.op.array.offset = {x, y, z};
  return o;
}

CUDA_MEMCPY3D_BATCH_OP Op(CUmemcpy3DOperand src, CUmemcpy3DOperand dst, size_t w, size_t h,
                          size_t d, CUmemcpySrcAccessOrder order = kStream) {
  CUDA_MEMCPY3D_BATCH_OP op = {};
  op.src = src;
  op.dst = dst;
  op.extent = {w, h, d};
  op.srcAccessOrder = order;
  return op;
}

// 3D batches: pitched host rows into an array at an offset, the array out to device memory, and
// a box of layers between pitched host memory and device memory.
void ThreeD(CUstream s) {
  const size_t width = 16, height = 8;
  CUDA_ARRAY3D_DESCRIPTOR desc = {};
  desc.Width = width;
  desc.Height = height;
  desc.Format = CU_AD_FORMAT_FLOAT;
  desc.NumChannels = 1;
  CUarray array;
  CHECK(cuArray3DCreate(&array, &desc));
  std::vector<float> zeros(width * height, 0.0f);
  CUDA_MEMCPY3D_BATCH_OP clear =
      Op(PointerOperand(Ptr(zeros.data()), 0, 0), ArrayOperand(array, 0, 0, 0), width, height, 1);
  CHECK(cuMemcpy3DBatchAsync(1, &clear, 0, s));
  // 8 x 4 floats from host rows of 20 floats into the array at (2, 1).
  const size_t row = 20;
  std::vector<float> rows(row * 4);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(i);
  CUDA_MEMCPY3D_BATCH_OP into =
      Op(PointerOperand(Ptr(rows.data()), row, 0), ArrayOperand(array, 2, 1, 0), 8, 4, 1);
  CHECK(cuMemcpy3DBatchAsync(1, &into, 0, s));
  CUdeviceptr flat;
  CHECK(cuMemAlloc(&flat, width * height * sizeof(float)));
  CUDA_MEMCPY3D_BATCH_OP out =
      Op(ArrayOperand(array, 0, 0, 0), PointerOperand(flat, 0, 0), width, height, 1);
  CHECK(cuMemcpy3DBatchAsync(1, &out, 0, s));
  CHECK(cuStreamSynchronize(s));
  std::vector<float> got(width * height);
  CHECK(cuMemcpyDtoH(got.data(), flat, got.size() * sizeof(float)));
  for (size_t y = 0; y < height; ++y) {
    for (size_t x = 0; x < width; ++x) {
      const bool inside = x >= 2 && x < 10 && y >= 1 && y < 5;
      const float expect = inside ? static_cast<float>((y - 1) * row + (x - 2)) : 0.0f;
      if (got[y * width + x] != expect) {
        fprintf(stderr, "array (%zu, %zu): %f, expected %f\n", x, y, got[y * width + x], expect);
        exit(1);
      }
    }
  }

  // Two layers of 4 rows of 32 bytes, from host rows of 40 bytes in layers of 5 rows, into
  // tightly packed device memory, and back out into a second host box (two ops in one batch:
  // they touch different memory).
  std::vector<uint8_t> box(40 * 5 * 2), back(32 * 4 * 2, 0);
  for (size_t i = 0; i < box.size(); ++i) box[i] = PatternC(i);
  CUdeviceptr packed, packed_copy;
  CHECK(cuMemAlloc(&packed, 32 * 4 * 2));
  CHECK(cuMemAlloc(&packed_copy, 32 * 4 * 2));
  CUDA_MEMCPY3D_BATCH_OP layers = Op(PointerOperand(Ptr(box.data()), 40, 5),
                                     PointerOperand(packed, 0, 0), 32, 4, 2, kDuringCall);
  CHECK(cuMemcpy3DBatchAsync(1, &layers, 0, s));
  memset(box.data(), 0, box.size());  // read during the call
  CUDA_MEMCPY3D_BATCH_OP two[2] = {
      Op(PointerOperand(packed, 0, 0), PointerOperand(Ptr(back.data()), 0, 0), 32, 4, 2),
      Op(PointerOperand(packed, 0, 0), PointerOperand(packed_copy, 0, 0), 32, 4, 2)};
  CHECK(cuStreamSynchronize(s));
  CHECK(cuMemcpy3DBatchAsync(2, two, 0, s));
  CHECK(cuStreamSynchronize(s));
  for (size_t z = 0; z < 2; ++z) {
    for (size_t y = 0; y < 4; ++y) {
      for (size_t x = 0; x < 32; ++x) {
        EXPECT_TRUE(back[(z * 4 + y) * 32 + x] == PatternC((z * 5 + y) * 40 + x));
      }
    }
  }
  std::vector<uint8_t> copy_bytes = Read(packed_copy, back.size());
  EXPECT_TRUE(copy_bytes == back);

  // Refused: batch flags, no operations, a zero extent, a row length below the width, an
  // operand of no type, two arrays of different elements, a bad access order.
  const CUresult kInvalid = CUDA_ERROR_INVALID_VALUE;
  CUDA_MEMCPY3D_BATCH_OP ok =
      Op(PointerOperand(packed, 0, 0), PointerOperand(packed_copy, 0, 0), 32, 4, 1);
  EXPECT_TRUE(cuMemcpy3DBatchAsync(1, &ok, 1, s) == kInvalid);
  EXPECT_TRUE(cuMemcpy3DBatchAsync(0, &ok, 0, s) == kInvalid);
  CUDA_MEMCPY3D_BATCH_OP bad = ok;
  bad.extent.height = 0;
  EXPECT_TRUE(cuMemcpy3DBatchAsync(1, &bad, 0, s) == kInvalid);
  bad = ok;
  bad.src.op.ptr.rowLength = 31;
  EXPECT_TRUE(cuMemcpy3DBatchAsync(1, &bad, 0, s) == kInvalid);
  bad = ok;
  bad.dst.type = static_cast<CUmemcpy3DOperandType>(0);
  EXPECT_TRUE(cuMemcpy3DBatchAsync(1, &bad, 0, s) == kInvalid);
  bad = ok;
  bad.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_INVALID;
  EXPECT_TRUE(cuMemcpy3DBatchAsync(1, &bad, 0, s) == kInvalid);
  CUDA_ARRAY3D_DESCRIPTOR bytes_desc = desc;
  bytes_desc.Format = CU_AD_FORMAT_UNSIGNED_INT8;
  CUarray byte_array;
  CHECK(cuArray3DCreate(&byte_array, &bytes_desc));
  CUDA_MEMCPY3D_BATCH_OP mismatch =
      Op(ArrayOperand(array, 0, 0, 0), ArrayOperand(byte_array, 0, 0, 0), 4, 4, 1);
  EXPECT_TRUE(cuMemcpy3DBatchAsync(1, &mismatch, 0, s) == kInvalid);
  // A good op, then a box running past its array's last row: neither is made.
  CHECK(cuMemsetD8(flat, 0, width * height * sizeof(float)));
  std::vector<float> ones(width * height, 1.0f);
  CUDA_MEMCPY3D_BATCH_OP good_then_past_array[2] = {
      Op(PointerOperand(Ptr(ones.data()), 0, 0), PointerOperand(flat, 0, 0), 64, 1, 1),
      Op(PointerOperand(Ptr(ones.data()), 0, 0), ArrayOperand(array, 0, 5, 0), 4, 4, 1)};
  EXPECT_TRUE(cuMemcpy3DBatchAsync(2, good_then_past_array, 0, s) == kInvalid);
  CHECK(cuStreamSynchronize(s));
  ExpectBytes(Read(flat, width * height * sizeof(float)), Zero, "refused array box");
  // The box runs past the device allocation: a batch with a good first op copies nothing.
  CHECK(cuMemsetD8(packed_copy, 0, 32 * 4 * 2));
  CUDA_MEMCPY3D_BATCH_OP first_ok_then_past[2] = {
      Op(PointerOperand(packed, 0, 0), PointerOperand(packed_copy, 0, 0), 32, 4, 1),
      Op(PointerOperand(packed, 0, 0), PointerOperand(packed_copy, 0, 0), 32, 4, 3)};
  EXPECT_TRUE(cuMemcpy3DBatchAsync(2, first_ok_then_past, 0, s) == kInvalid);
  CHECK(cuStreamSynchronize(s));
  ExpectBytes(Read(packed_copy, 32 * 4 * 2), Zero, "refused 3D batch");
  CHECK(cuArrayDestroy(array));
  CHECK(cuArrayDestroy(byte_array));
  CHECK(cuMemFree(flat));
  CHECK(cuMemFree(packed));
  CHECK(cuMemFree(packed_copy));
}

// A captured batch becomes work of the graph; a source read during the call cannot be captured.
void Captured(CUstream s) {
  const size_t n = 1024;
  CUdeviceptr d1, d2;
  CHECK(cuMemAlloc(&d1, n));
  CHECK(cuMemAlloc(&d2, n));
  CHECK(cuMemsetD8(d1, 0, n));
  CHECK(cuMemsetD8(d2, 0, n));
  uint8_t* pinned;
  CHECK(cuMemAllocHost(reinterpret_cast<void**>(&pinned), n));
  for (size_t i = 0; i < n; ++i) pinned[i] = PatternA(i);
  std::vector<uint8_t> host_from(n), host_to(n, 0);
  for (size_t i = 0; i < n; ++i) host_from[i] = PatternB(i);
  CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  CHECK(Batch({d1, Ptr(host_to.data())}, {Ptr(pinned), Ptr(host_from.data())}, {n, n}, kStream, s));
  EXPECT_TRUE(Batch({d2}, {Ptr(pinned)}, {n}, kDuringCall, s) ==
              CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CUgraph graph;
  CHECK(cuStreamEndCapture(s, &graph));
  ExpectBytes(Read(d1, n), Zero, "captured, not launched");
  ExpectBytes(host_to, Zero, "captured copy between host buffers, not launched");
  CUgraphExec exec;
  CHECK(cuGraphInstantiate(&exec, graph, 0));
  CHECK(cuGraphLaunch(exec, s));
  CHECK(cuStreamSynchronize(s));
  ExpectBytes(Read(d1, n), PatternA, "captured batch");
  ExpectBytes(host_to, PatternB, "captured copy between host buffers");
  ExpectBytes(Read(d2, n), Zero, "refused during capture");
  CHECK(cuGraphExecDestroy(exec));
  CHECK(cuGraphDestroy(graph));
  CHECK(cuMemFreeHost(pinned));
  CHECK(cuMemFree(d1));
  CHECK(cuMemFree(d2));
}

std::atomic<bool> g_open{false};
void WaitUntilOpen(void*) {
  while (!g_open.load()) usleep(1000);
}

// Behind a host function the stream waits for, copies from pageable memory (a pitched copy, a
// 3D batch whose source is read during the call) take their source at the call: the program
// overwrites it before the host function lets the stream go. (A copy between host buffers would
// wait for the host function here, as CUDA's do: they are synchronous for the host.)
void HeldBehindAHostFunction(CUstream s) {
  const size_t n = 4096;
  CUdeviceptr d1, d2;
  CHECK(cuMemAlloc(&d1, n));
  CHECK(cuMemAlloc(&d2, n));
  std::vector<uint8_t> pitched(2 * n), layers(n);
  for (size_t i = 0; i < pitched.size(); ++i) pitched[i] = PatternA(i / 2);
  for (size_t i = 0; i < n; ++i) layers[i] = PatternC(i);
  g_open = false;
  CHECK(cuLaunchHostFunc(s, WaitUntilOpen, nullptr));
  // Every other byte of `pitched`: 64 rows of 64 bytes, from rows of 128.
  CUDA_MEMCPY2D copy = {};
  copy.srcMemoryType = CU_MEMORYTYPE_HOST;
  copy.srcHost = pitched.data();
  copy.srcPitch = 128;
  copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.dstDevice = d1;
  copy.dstPitch = 64;
  copy.WidthInBytes = 64;
  copy.Height = 64;
  CHECK(cuMemcpy2DAsync(&copy, s));
  CUDA_MEMCPY3D_BATCH_OP op = Op(PointerOperand(Ptr(layers.data()), 0, 0), PointerOperand(d2, 0, 0),
                                 64, 32, 2, kDuringCall);
  CHECK(cuMemcpy3DBatchAsync(1, &op, 0, s));
  std::fill(pitched.begin(), pitched.end(), 0xEE);
  std::fill(layers.begin(), layers.end(), 0xEE);
  EXPECT_TRUE(cuStreamQuery(s) == CUDA_ERROR_NOT_READY);
  g_open = true;
  CHECK(cuStreamSynchronize(s));
  std::vector<uint8_t> got = Read(d1, n);
  for (size_t row = 0; row < 64; ++row) {
    for (size_t x = 0; x < 64; ++x) EXPECT_TRUE(got[row * 64 + x] == PatternA(row * 64 + x / 2));
  }
  ExpectBytes(Read(d2, n), PatternC, "held 3D batch read during the call");
  CHECK(cuMemFree(d1));
  CHECK(cuMemFree(d2));
}

}  // namespace

int main() {
  InitContext();
  CUstream s, other;
  CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CHECK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
  DuringCallSources(s, other);
  Directions(s);
  Refusals(s);
  ThreeD(s);
  Captured(s);
  HeldBehindAHostFunction(s);
  CHECK(cuStreamDestroy(s));
  CHECK(cuStreamDestroy(other));
  printf("memcpy_batch: ok\n");
  return 0;
}
