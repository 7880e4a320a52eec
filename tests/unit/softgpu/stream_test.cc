// Stream ordering, the legacy default stream, events and host functions.
#include <cuda.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "test_util.h"

namespace {

using softgpu_test::KernelTest;

// A host function that blocks its stream until the test opens it.
class Gate {
 public:
  static void Wait(void* self) {
    auto* g = static_cast<Gate*>(self);
    std::unique_lock lock(g->mu_);
    g->cv_.wait(lock, [&] { return g->open_; });
  }
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

class StreamTest : public KernelTest {
 protected:
  // flag := value on `stream`.
  void SetFlag(CUstream stream, CUdeviceptr flag, int value) {
    long long iterations = 10;
    ASSERT_EQ(Launch(Function("spin"), 1, 1, {&flag, &value, &iterations}, 0, stream),
              CUDA_SUCCESS);
  }
  // dst := *src on `stream`.
  void CopyFlag(CUstream stream, CUdeviceptr src, CUdeviceptr dst) {
    ASSERT_EQ(Launch(Function("copy_flag"), 1, 1, {&src, &dst}, 0, stream), CUDA_SUCCESS);
  }
  int Read(CUdeviceptr p) { return Download<int>(p, 1)[0]; }
  // A zeroed 32-bit word of page-locked host memory (`host`, freed with cuMemFreeHost) and its
  // device address.
  static void HostWord(void** host, uint32_t** word, CUdeviceptr* device) {
    ASSERT_EQ(cuMemHostAlloc(host, 16, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE),
              CUDA_SUCCESS);
    *word = static_cast<uint32_t*>(*host);
    **word = 0;
    ASSERT_EQ(cuMemHostGetDevicePointer(device, *host, 0), CUDA_SUCCESS);
  }
};

TEST_F(StreamTest, QueryAndSynchronize) {
  CUstream s;
  CU_ASSERT_OK(cuStreamCreate(&s, 0));
  CUdeviceptr flag;
  CU_ASSERT_OK(cuMemAlloc(&flag, 4));
  CU_ASSERT_OK(cuMemsetD32(flag, 0, 1));
  Gate gate;
  CU_ASSERT_OK(cuLaunchHostFunc(s, &Gate::Wait, &gate));
  SetFlag(s, flag, 7);
  CUevent e;
  CU_ASSERT_OK(cuEventCreate(&e, 0));
  CU_ASSERT_OK(cuEventRecord(e, s));
  CU_EXPECT_EQ(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
  CU_EXPECT_EQ(cuEventQuery(e), CUDA_ERROR_NOT_READY);
  gate.Open();
  CU_ASSERT_OK(cuStreamSynchronize(s));
  CU_ASSERT_OK(cuStreamQuery(s));
  CU_ASSERT_OK(cuEventQuery(e));
  EXPECT_EQ(Read(flag), 7);
  CU_ASSERT_OK(cuEventDestroy(e));
  CU_ASSERT_OK(cuStreamDestroy(s));
  CU_EXPECT_EQ(cuStreamDestroy(s), CUDA_ERROR_INVALID_HANDLE);
  CU_EXPECT_EQ(cuEventDestroy(e), CUDA_ERROR_INVALID_HANDLE);
}

// cuStreamQuery looks a named stream up in place (no references taken); it must refuse what the
// other stream calls refuse, with the same errors.
TEST_F(StreamTest, QueryRefusesWhatTheOtherStreamCallsRefuse) {
  CU_EXPECT_EQ(cuStreamQuery(reinterpret_cast<CUstream>(0x1234)), CUDA_ERROR_INVALID_HANDLE);
  CUstream s;
  CU_ASSERT_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CU_ASSERT_OK(cuStreamQuery(s));
  CU_ASSERT_OK(cuStreamDestroy(s));
  CU_EXPECT_EQ(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
  // A stream of a context destroyed since.
  CUcontext current, other;
  CU_ASSERT_OK(cuCtxGetCurrent(&current));
  CUdevice device;
  CU_ASSERT_OK(cuCtxGetDevice(&device));
  CU_ASSERT_OK(cuCtxCreate(&other, nullptr, 0, device));
  CUstream orphan;
  CU_ASSERT_OK(cuStreamCreate(&orphan, 0));
  CU_ASSERT_OK(cuStreamQuery(orphan));
  CU_ASSERT_OK(cuCtxDestroy(other));
  CU_ASSERT_OK(cuCtxSetCurrent(current));
  const CUresult synchronized = cuStreamSynchronize(orphan);
  EXPECT_NE(synchronized, CUDA_SUCCESS);
  CU_EXPECT_EQ(cuStreamQuery(orphan), synchronized);
}

TEST_F(StreamTest, WaitEventOrdersAcrossStreams) {
  CUstream s1, s2;
  CU_ASSERT_OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  CU_ASSERT_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CUdeviceptr flag, out;
  CU_ASSERT_OK(cuMemAlloc(&flag, 4));
  CU_ASSERT_OK(cuMemAlloc(&out, 4));
  CU_ASSERT_OK(cuMemsetD32(flag, 0, 1));
  Gate gate;
  CU_ASSERT_OK(cuLaunchHostFunc(s1, &Gate::Wait, &gate));
  SetFlag(s1, flag, 11);
  CUevent e;
  CU_ASSERT_OK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  CU_ASSERT_OK(cuEventRecord(e, s1));
  CU_ASSERT_OK(cuStreamWaitEvent(s2, e, 0));
  CopyFlag(s2, flag, out);
  CU_EXPECT_EQ(cuStreamQuery(s2), CUDA_ERROR_NOT_READY);
  gate.Open();
  CU_ASSERT_OK(cuStreamSynchronize(s2));
  EXPECT_EQ(Read(out), 11);
  CU_ASSERT_OK(cuCtxSynchronize());
}

TEST_F(StreamTest, LegacyDefaultStreamWaitsForBlockingStreamsOnly) {
  CUstream blocking, nonblocking;
  CU_ASSERT_OK(cuStreamCreate(&blocking, 0));
  CU_ASSERT_OK(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));
  CUdeviceptr flag, out;
  CU_ASSERT_OK(cuMemAlloc(&flag, 4));
  CU_ASSERT_OK(cuMemAlloc(&out, 4));
  CU_ASSERT_OK(cuMemsetD32(flag, 1, 1));

  // A kernel on the NULL stream waits for earlier work on a blocking stream.
  Gate g1;
  CU_ASSERT_OK(cuLaunchHostFunc(blocking, &Gate::Wait, &g1));
  SetFlag(blocking, flag, 2);
  CopyFlag(nullptr, flag, out);
  CU_EXPECT_EQ(cuStreamQuery(nullptr), CUDA_ERROR_NOT_READY);
  g1.Open();
  CU_ASSERT_OK(cuStreamSynchronize(nullptr));
  EXPECT_EQ(Read(out), 2);

  // ... but not for a non-blocking stream.
  Gate g2;
  CU_ASSERT_OK(cuLaunchHostFunc(nonblocking, &Gate::Wait, &g2));
  SetFlag(nonblocking, flag, 3);
  CopyFlag(nullptr, flag, out);
  CU_ASSERT_OK(cuStreamSynchronize(nullptr));
  EXPECT_EQ(Read(out), 2);
  g2.Open();
  CU_ASSERT_OK(cuStreamSynchronize(nonblocking));
  EXPECT_EQ(Read(flag), 3);

  // Work on a blocking stream waits for earlier NULL-stream work.
  Gate g3;
  CU_ASSERT_OK(cuLaunchHostFunc(nullptr, &Gate::Wait, &g3));
  SetFlag(nullptr, flag, 4);
  CopyFlag(blocking, flag, out);
  CU_EXPECT_EQ(cuStreamQuery(blocking), CUDA_ERROR_NOT_READY);
  g3.Open();
  CU_ASSERT_OK(cuStreamSynchronize(blocking));
  EXPECT_EQ(Read(out), 4);

  // A synchronous copy waits for blocking streams.
  Gate g4;
  CU_ASSERT_OK(cuLaunchHostFunc(blocking, &Gate::Wait, &g4));
  SetFlag(blocking, flag, 5);
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    g4.Open();
  });
  EXPECT_EQ(Read(flag), 5);
  opener.join();
}

void SleepTwentyMs(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }

// A small asynchronous copy (or memset) runs at once on an idle stream, but never ahead of its
// stream's queued work or of the legacy default stream's order: behind a closed gate it waits (and
// its source was taken when it was issued), and once the gate opens it lands in order.
TEST_F(StreamTest, ShortCopiesRunAtOnceOnlyWhenNothingIsAheadOfThem) {
  CUstream s, other;
  CU_ASSERT_OK(cuStreamCreate(&s, 0));
  CU_ASSERT_OK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
  CUdeviceptr word;
  CU_ASSERT_OK(cuMemAlloc(&word, 4));
  CU_ASSERT_OK(cuMemsetD32(word, 0, 1));
  CUdeviceptr second;
  CU_ASSERT_OK(cuMemAlloc(&second, 8));
  CU_ASSERT_OK(cuMemsetD32(second, 0, 2));
  // Idle: done when the call returns.
  int value = 5;
  CU_ASSERT_OK(cuMemcpyHtoDAsync(word, &value, 4, s));
  CU_ASSERT_OK(cuStreamQuery(s));
  EXPECT_EQ(Read(word), 5);
  // Behind a closed gate: queued, with the source as it was when issued.
  Gate gate;
  CU_ASSERT_OK(cuLaunchHostFunc(s, &Gate::Wait, &gate));
  value = 6;
  CU_ASSERT_OK(cuMemcpyHtoDAsync(word, &value, 4, s));
  value = 99;  // the caller may reuse its buffer once the call returns
  // A memset and a copy within the device, behind the gate too.
  CU_ASSERT_OK(cuMemsetD32Async(second, 7, 1, s));
  CU_ASSERT_OK(cuMemcpyDtoDAsync(second + 4, word, 4, s));
  int seen = -1;
  int seen_second[2] = {-1, -1};
  CU_ASSERT_OK(cuMemcpyDtoHAsync(&seen, word, 4, other));
  CU_ASSERT_OK(cuMemcpyDtoHAsync(seen_second, second, 8, other));
  CU_ASSERT_OK(cuStreamSynchronize(other));
  EXPECT_EQ(seen, 5) << "the copy ran ahead of the gate";
  EXPECT_EQ(seen_second[0], 0) << "the memset ran ahead of the gate";
  EXPECT_EQ(seen_second[1], 0) << "the device copy ran ahead of the gate";
  // The legacy default stream waits for the blocking stream's gate too.
  int from_default = -1;
  CU_ASSERT_OK(cuMemcpyDtoHAsync(&from_default, word, 4, nullptr));
  CU_EXPECT_EQ(cuStreamQuery(nullptr), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(from_default, -1);
  gate.Open();
  CU_ASSERT_OK(cuCtxSynchronize());
  EXPECT_EQ(Read(word), 6);
  EXPECT_EQ(from_default, 6);
  const std::vector<int> after = Download<int>(second, 2);
  EXPECT_EQ(after[0], 7);
  EXPECT_EQ(after[1], 6);
  CU_ASSERT_OK(cuMemFree(second));
  CU_ASSERT_OK(cuStreamDestroy(s));
  CU_ASSERT_OK(cuStreamDestroy(other));
  CU_ASSERT_OK(cuMemFree(word));
}

TEST_F(StreamTest, EventElapsedTime) {
  CUstream s;
  CU_ASSERT_OK(cuStreamCreate(&s, 0));
  CUevent start, end, untimed, never;
  CU_ASSERT_OK(cuEventCreate(&start, CU_EVENT_DEFAULT));
  CU_ASSERT_OK(cuEventCreate(&end, CU_EVENT_BLOCKING_SYNC));
  CU_ASSERT_OK(cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING));
  CU_ASSERT_OK(cuEventCreate(&never, 0));
  CU_ASSERT_OK(cuEventQuery(never));  // never recorded counts as complete
  Gate gate;
  CU_ASSERT_OK(cuEventRecord(start, s));
  CU_ASSERT_OK(cuLaunchHostFunc(s, &Gate::Wait, &gate));
  CU_ASSERT_OK(cuLaunchHostFunc(s, &SleepTwentyMs, nullptr));
  CU_ASSERT_OK(cuEventRecordWithFlags(end, s, CU_EVENT_RECORD_DEFAULT));
  CU_ASSERT_OK(cuEventRecord(untimed, s));
  float ms = -1;
  CU_EXPECT_EQ(cuEventElapsedTime(&ms, start, end), CUDA_ERROR_NOT_READY);
  gate.Open();
  CU_ASSERT_OK(cuEventSynchronize(end));
  CU_ASSERT_OK(cuEventElapsedTime(&ms, start, end));
  EXPECT_GE(ms, 19.0f);
  EXPECT_LT(ms, 5000.0f);
  CU_ASSERT_OK(cuEventSynchronize(untimed));
  CU_EXPECT_EQ(cuEventElapsedTime(&ms, start, untimed), CUDA_ERROR_INVALID_HANDLE);
  CU_EXPECT_EQ(cuEventElapsedTime(&ms, start, never), CUDA_ERROR_INVALID_HANDLE);
  CU_EXPECT_EQ(cuEventElapsedTime(nullptr, start, end), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuEventCreate(&never, 0x100), CUDA_ERROR_INVALID_VALUE);
}

void Append(void* arg) {
  auto* v = static_cast<std::vector<int>*>(arg);
  v->push_back(static_cast<int>(v->size()));
}

TEST_F(StreamTest, HostFunctionsRunInOrder) {
  CUstream s;
  CU_ASSERT_OK(cuStreamCreate(&s, 0));
  std::vector<int> order;
  for (int i = 0; i < 50; ++i) CU_ASSERT_OK(cuLaunchHostFunc(s, &Append, &order));
  CU_ASSERT_OK(cuStreamSynchronize(s));
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[i], i);
}

TEST_F(StreamTest, StreamProperties) {
  CUstream s;
  CU_EXPECT_EQ(cuStreamCreate(&s, 0x80), CUDA_ERROR_INVALID_VALUE);
  int least = 1, greatest = 1;
  CU_ASSERT_OK(cuCtxGetStreamPriorityRange(&least, &greatest));
  EXPECT_EQ(least, 0);
  EXPECT_LT(greatest, 0);
  CU_ASSERT_OK(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, greatest));
  unsigned flags = 0;
  int priority = 0;
  CU_ASSERT_OK(cuStreamGetFlags(s, &flags));
  EXPECT_EQ(flags, static_cast<unsigned>(CU_STREAM_NON_BLOCKING));
  CU_ASSERT_OK(cuStreamGetPriority(s, &priority));
  EXPECT_EQ(priority, greatest);
  CUcontext c;
  CU_ASSERT_OK(cuStreamGetCtx(s, &c));
  EXPECT_EQ(c, ctx_);

  // A stream of another context cannot carry this context's work.
  CUcontext other;
  CU_ASSERT_OK(cuCtxCreate(&other, nullptr, 0, 0));
  CUstream foreign;
  CU_ASSERT_OK(cuStreamCreate(&foreign, 0));
  CU_ASSERT_OK(cuCtxPopCurrent(nullptr));
  CUdeviceptr d;
  CU_ASSERT_OK(cuMemAlloc(&d, 4));
  CU_EXPECT_EQ(cuMemsetD8Async(d, 0, 4, foreign), CUDA_ERROR_INVALID_HANDLE);
  CU_ASSERT_OK(cuCtxDestroy(other));
  CU_EXPECT_EQ(cuStreamSynchronize(foreign), CUDA_ERROR_INVALID_HANDLE);
  CU_ASSERT_OK(cuStreamDestroy(s));
}

// A stream waits for a word of page-locked host memory that the host writes, and writes words of
// device memory in its order; kernels behind the wait do not run before it is satisfied.
TEST_F(StreamTest, WaitValueHoldsTheStreamUntilTheHostWritesTheWord) {
  CUstream s;
  CU_ASSERT_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  void* host = nullptr;
  uint32_t* gate = nullptr;
  CUdeviceptr gate_d = 0;
  ASSERT_NO_FATAL_FAILURE(HostWord(&host, &gate, &gate_d));
  CUdeviceptr flag, word64;
  CU_ASSERT_OK(cuMemAlloc(&flag, 4));
  CU_ASSERT_OK(cuMemAlloc(&word64, 8));
  CU_ASSERT_OK(cuMemsetD32(flag, 0, 1));
  CU_ASSERT_OK(cuStreamWaitValue32(s, gate_d, 2, CU_STREAM_WAIT_VALUE_GEQ));
  SetFlag(s, flag, 5);
  CU_ASSERT_OK(cuStreamWriteValue64(s, word64, 0x1234567890ull, 0));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CU_EXPECT_EQ(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(Read(flag), 0);
  std::atomic_ref<uint32_t>(*gate).store(1);  // not yet: GEQ 2
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CU_EXPECT_EQ(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
  std::atomic_ref<uint32_t>(*gate).store(2);
  CU_ASSERT_OK(cuStreamSynchronize(s));
  EXPECT_EQ(Read(flag), 5);
  EXPECT_EQ(Download<uint64_t>(word64, 1)[0], 0x1234567890ull);

  // A batch: write then wait on the same word (satisfied by the write), EQ/AND/NOR comparisons.
  CUstreamBatchMemOpParams ops[4] = {};
  ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  ops[0].writeValue.address = flag;
  ops[0].writeValue.value = 6;
  ops[1].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
  ops[1].waitValue.address = flag;
  ops[1].waitValue.value = 6;
  ops[1].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
  ops[2].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
  ops[2].waitValue.address = flag;
  ops[2].waitValue.value = 2;
  ops[2].waitValue.flags = CU_STREAM_WAIT_VALUE_AND;
  ops[3].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
  ops[3].waitValue.address = word64;
  ops[3].waitValue.value64 = 0;
  ops[3].waitValue.flags = CU_STREAM_WAIT_VALUE_NOR;
  CU_ASSERT_OK(cuStreamBatchMemOp(s, 4, ops, 0));
  CU_ASSERT_OK(cuStreamSynchronize(s));
  EXPECT_EQ(Read(flag), 6);

  // Refused before anything is queued: unaligned, outside any allocation, unknown flags, a flush.
  CU_EXPECT_EQ(cuStreamWaitValue32(s, flag + 1, 0, 0), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuStreamWriteValue64(s, flag, 0, 0), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuStreamWaitValue32(s, 0x10, 0, 0), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuStreamWaitValue32(s, flag, 0, 7), CUDA_ERROR_INVALID_VALUE);
  CU_EXPECT_EQ(cuStreamWaitValue32(s, flag, 0, CU_STREAM_WAIT_VALUE_FLUSH),
               CUDA_ERROR_NOT_SUPPORTED);
  ops[0].writeValue.address = flag + 2;  // the batch's first write is bad: nothing runs
  ops[1].waitValue.value = 7;
  CU_EXPECT_EQ(cuStreamBatchMemOp(s, 2, ops, 0), CUDA_ERROR_INVALID_VALUE);
  CU_ASSERT_OK(cuStreamSynchronize(s));
  EXPECT_EQ(Read(flag), 6);
  CU_ASSERT_OK(cuMemFreeHost(host));
  CU_ASSERT_OK(cuStreamDestroy(s));
}

// Waits on device memory are bounded per context (64 queued or waiting at once), and the bound
// is the device's only: waits on page-locked host memory, which rgpu-server's kernel turns queue
// one per kernel, are not counted. Released, device waits make room again.
TEST_F(StreamTest, AContextHoldsAtMost64WaitsOnDeviceMemory) {
  CUstream s;
  CU_ASSERT_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  void* host = nullptr;
  uint32_t* gate = nullptr;
  CUdeviceptr gate_d = 0;
  ASSERT_NO_FATAL_FAILURE(HostWord(&host, &gate, &gate_d));
  for (int i = 0; i < 100; ++i) {
    CU_ASSERT_OK(cuStreamWaitValue32(s, gate_d, 1, CU_STREAM_WAIT_VALUE_EQ));
  }
  CUdeviceptr word;
  CU_ASSERT_OK(cuMemAlloc(&word, 4));
  CU_ASSERT_OK(cuMemsetD32(word, 0, 1));
  for (int i = 0; i < 64; ++i) {
    CU_ASSERT_OK(cuStreamWaitValue32(s, word, 1, CU_STREAM_WAIT_VALUE_EQ));
  }
  CU_EXPECT_EQ(cuStreamWaitValue32(s, word, 1, CU_STREAM_WAIT_VALUE_EQ), CUDA_ERROR_OUT_OF_MEMORY);
  std::atomic_ref<uint32_t>(*gate).store(1);
  CUstream other;
  CU_ASSERT_OK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
  CU_ASSERT_OK(cuStreamWriteValue32(other, word, 1, 0));
  CU_ASSERT_OK(cuStreamSynchronize(s));
  CU_ASSERT_OK(cuStreamWaitValue32(s, word, 1, CU_STREAM_WAIT_VALUE_EQ));
  CU_ASSERT_OK(cuStreamSynchronize(s));
  CU_ASSERT_OK(cuStreamDestroy(other));
  CU_ASSERT_OK(cuMemFree(word));
  CU_ASSERT_OK(cuMemFreeHost(host));
  CU_ASSERT_OK(cuStreamDestroy(s));
}

// cuStreamDestroy returns at once, as CUDA's does: a stream destroyed behind a wait keeps its
// work, which runs once another stream releases the wait, and cuCtxSynchronize waits for it.
// (Before, the destroy waited for the stream: a server serving both calls in order stalled
// until the kernel bound failed the context.)
TEST_F(StreamTest, ADestroyedStreamsWorkStillRuns) {
  CUdeviceptr word, flag;
  CU_ASSERT_OK(cuMemAlloc(&word, 4));
  CU_ASSERT_OK(cuMemsetD32(word, 0, 1));
  CU_ASSERT_OK(cuMemAlloc(&flag, 4));
  CU_ASSERT_OK(cuMemsetD32(flag, 0, 1));
  CUstream s, other;
  CU_ASSERT_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CU_ASSERT_OK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
  CU_ASSERT_OK(cuStreamWaitValue32(s, word, 1, CU_STREAM_WAIT_VALUE_EQ));
  SetFlag(s, flag, 9);
  CU_ASSERT_OK(cuStreamDestroy(s));
  CU_EXPECT_EQ(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(Read(flag), 0);
  CU_ASSERT_OK(cuStreamWriteValue32(other, word, 1, 0));
  CU_ASSERT_OK(cuCtxSynchronize());
  EXPECT_EQ(Read(flag), 9);
  // A stream made later shuts the finished one down; its work is all there is to run.
  CUstream later;
  CU_ASSERT_OK(cuStreamCreate(&later, 0));
  CU_ASSERT_OK(cuStreamDestroy(later));
  CU_ASSERT_OK(cuStreamDestroy(other));
  CU_ASSERT_OK(cuMemFree(word));
  CU_ASSERT_OK(cuMemFree(flag));
}

// A wait nobody satisfies ends when its context is destroyed.
TEST_F(StreamTest, AnUnsatisfiedWaitEndsWithItsContext) {
  CUcontext other;
  CU_ASSERT_OK(cuCtxCreate(&other, nullptr, 0, 0));
  CUstream s;
  CU_ASSERT_OK(cuStreamCreate(&s, 0));
  CUdeviceptr word;
  CU_ASSERT_OK(cuMemAlloc(&word, 4));
  CU_ASSERT_OK(cuMemsetD32(word, 0, 1));
  CU_ASSERT_OK(cuStreamWaitValue32(s, word, 1, CU_STREAM_WAIT_VALUE_EQ));
  CU_EXPECT_EQ(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
  CU_ASSERT_OK(cuCtxPopCurrent(nullptr));
  CU_ASSERT_OK(cuCtxDestroy(other));
}

}  // namespace
