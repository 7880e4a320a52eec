// Stream memory operations (cuStreamWaitValue32/64, cuStreamWriteValue32/64, cuStreamBatchMemOp):
// a stream waiting on a word holds the work queued behind it until another stream (or a kernel)
// writes the word; each comparison (GEQ, cyclic, EQ, AND, NOR) holds and releases as the driver
// documents; a batch of waits and writes runs in its order; a captured write becomes a graph node
// that writes when the graph is launched, as does a node added with cuGraphAddBatchMemOpNode
// (its parameters read back and set, on the graph and on the executable graph); a stream
// destroyed while it waits keeps its work, which another thread's cuCtxSynchronize waits for
// without holding up the calls that release it; and a misaligned word, a word outside device
// memory, managed memory, unknown flags and a batch of 256 are refused, a refused batch queuing
// nothing.
// With `hold SECONDS` (tests/e2e/migrate_stream_wait.sh) it only queues a kernel behind a wait,
// says "waiting", polls the stream for SECONDS, and then writes the word: the kernel must then run.
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <thread>

#include "check.h"

namespace {

unsigned Read32(CUdeviceptr p, CUstream s) {
  unsigned v = 0;
  CHECK(cuMemcpyDtoHAsync(&v, p, sizeof v, s));
  CHECK(cuStreamSynchronize(s));
  return v;
}

unsigned long long Read64(CUdeviceptr p, CUstream s) {
  unsigned long long v = 0;
  CHECK(cuMemcpyDtoHAsync(&v, p, sizeof v, s));
  CHECK(cuStreamSynchronize(s));
  return v;
}

// Stream `a` waits on `word` as `flags` says against `value`; it must still wait after a while
// with the word at `before`, and be done once stream `b` writes `after`.
void HoldsThenReleases(CUstream a, CUstream b, CUdeviceptr word, unsigned before, unsigned value,
                       unsigned flags, unsigned after, const char* what) {
  CHECK(cuStreamWriteValue32(b, word, before, 0));
  CHECK(cuStreamSynchronize(b));
  CHECK(cuStreamWaitValue32(a, word, value, flags));
  usleep(50000);
  if (cuStreamQuery(a) != CUDA_ERROR_NOT_READY) {
    fprintf(stderr, "%s: the stream did not wait with the word at %#x\n", what, before);
    exit(1);
  }
  CHECK(cuStreamWriteValue32(b, word, after, 0));
  CHECK(cuStreamSynchronize(a));
}

// Stream `a` waiting on `word` as `flags` says against `value`, with the word at `now`, does not
// wait.
void DoesNotHold(CUstream a, CUstream b, CUdeviceptr word, unsigned now, unsigned value,
                 unsigned flags) {
  CHECK(cuStreamWriteValue32(b, word, now, 0));
  CHECK(cuStreamSynchronize(b));
  CHECK(cuStreamWaitValue32(a, word, value, flags));
  CHECK(cuStreamSynchronize(a));
}

// The `hold` mode: a wait the program itself releases `seconds` later.
int Hold(int seconds) {
  CUcontext ctx = InitContext();
  CUmodule m;
  CHECK(cuModuleLoad(&m, RGPU_KERNELS_FATBIN));
  CUfunction add_to;
  CHECK(cuModuleGetFunction(&add_to, m, "add_to"));
  CUdeviceptr words;
  CHECK(cuMemAlloc(&words, 16));
  CHECK(cuMemsetD8(words, 0, 16));
  const CUdeviceptr flag = words, counter = words + 8;
  CUstream a, b;
  CHECK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  CHECK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CHECK(cuStreamWaitValue32(a, flag, 1, CU_STREAM_WAIT_VALUE_EQ));
  int five = 5;
  void* args[] = {(void*)&counter, &five};
  CHECK(cuLaunchKernel(add_to, 1, 1, 1, 32, 1, 1, 0, a, args, nullptr));
  EXPECT_TRUE(cuStreamQuery(a) == CUDA_ERROR_NOT_READY);
  printf("waiting\n");
  fflush(stdout);
  // Polling the stream meanwhile, as programs do: calls the client waits for.
  for (int i = 0; i < seconds * 10; ++i) {
    usleep(100000);
    EXPECT_TRUE(cuStreamQuery(a) == CUDA_ERROR_NOT_READY);
  }
  CHECK(cuStreamWriteValue32(b, flag, 1, 0));
  CHECK(cuStreamSynchronize(a));
  EXPECT_TRUE(Read32(counter, b) == 5);
  CHECK(cuCtxDestroy(ctx));
  printf("result ok\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "hold") == 0) return Hold(atoi(argv[2]));
  CUcontext ctx = InitContext();
  CUdevice dev;
  CHECK(cuCtxGetDevice(&dev));
  int wide = 0, nor = 0;
  CHECK(cuDeviceGetAttribute(&wide, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, dev));
  CHECK(cuDeviceGetAttribute(&nor, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR, dev));
  EXPECT_TRUE(wide == 1 && nor == 1);
  CUmodule m;
  CHECK(cuModuleLoad(&m, RGPU_KERNELS_FATBIN));
  CUfunction add_to, set_all;
  CHECK(cuModuleGetFunction(&add_to, m, "add_to"));
  CHECK(cuModuleGetFunction(&set_all, m, "set_all"));
  CUdeviceptr words;  // eight 64-bit words
  CHECK(cuMemAlloc(&words, 64));
  CHECK(cuMemsetD8(words, 0, 64));
  const CUdeviceptr flag = words, done = words + 8, counter = words + 16, wide_word = words + 24;
  const CUdeviceptr out = words + 32, captured = words + 40, batch_flag = words + 48;
  CUstream a, b;
  CHECK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  CHECK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));

  // Work behind a wait waits with it: a kernel and a write.
  CHECK(cuStreamWaitValue32(a, flag, 1, CU_STREAM_WAIT_VALUE_GEQ));
  int five = 5;
  void* add_args[] = {(void*)&counter, &five};
  CHECK(cuLaunchKernel(add_to, 1, 1, 1, 32, 1, 1, 0, a, add_args, nullptr));
  CHECK(cuStreamWriteValue32(a, done, 7, 0));
  usleep(100000);
  EXPECT_TRUE(cuStreamQuery(a) == CUDA_ERROR_NOT_READY);
  EXPECT_TRUE(Read32(counter, b) == 0 && Read32(done, b) == 0);
  CHECK(cuStreamWriteValue32(b, flag, 1, 0));
  CHECK(cuStreamSynchronize(a));
  EXPECT_TRUE(Read32(counter, b) == 5 && Read32(done, b) == 7);

  // A kernel on the other stream releases the wait (set_all writes 2 to the flag).
  CHECK(cuStreamWaitValue32(a, flag, 2, CU_STREAM_WAIT_VALUE_EQ));
  usleep(50000);
  EXPECT_TRUE(cuStreamQuery(a) == CUDA_ERROR_NOT_READY);
  int two = 2, one = 1;
  void* set_args[] = {(void*)&flag, &two, &one};
  CHECK(cuLaunchKernel(set_all, 1, 1, 1, 32, 1, 1, 0, b, set_args, nullptr));
  CHECK(cuStreamSynchronize(a));

  // The comparisons. GEQ is cyclic: (int32_t)(word - value) >= 0.
  HoldsThenReleases(a, b, flag, 5, 9, CU_STREAM_WAIT_VALUE_GEQ, 10, "GEQ");
  HoldsThenReleases(a, b, flag, 0x7ffffff0u, 0x80000005u, CU_STREAM_WAIT_VALUE_GEQ, 0x80000005u,
                    "GEQ across the sign");
  DoesNotHold(a, b, flag, 3, 0xfffffff0u, CU_STREAM_WAIT_VALUE_GEQ);  // 3 is after 0xfffffff0
  // Each of the others holds where GEQ would not.
  HoldsThenReleases(a, b, flag, 8, 6, CU_STREAM_WAIT_VALUE_EQ, 6, "EQ");
  DoesNotHold(a, b, flag, 6, 6, CU_STREAM_WAIT_VALUE_EQ);
  HoldsThenReleases(a, b, flag, 0x8, 0x4, CU_STREAM_WAIT_VALUE_AND, 0x5, "AND");
  DoesNotHold(a, b, flag, 0x6, 0x4, CU_STREAM_WAIT_VALUE_AND);
  // NOR: ~(word | value) != 0, so it holds while word | value has every bit set.
  HoldsThenReleases(a, b, flag, 0xffff0000u, 0x8000ffffu, CU_STREAM_WAIT_VALUE_NOR, 0x7ffe0000u,
                    "NOR");
  DoesNotHold(a, b, flag, 0x7ffe0000u, 0x8000ffffu, CU_STREAM_WAIT_VALUE_NOR);

  // 64-bit words.
  const unsigned long long big = 0x100000002ull;
  CHECK(cuStreamWaitValue64(a, wide_word, big, CU_STREAM_WAIT_VALUE_EQ));
  CHECK(cuStreamWriteValue64(a, out, 0xabcdef0123456789ull, 0));
  CHECK(cuStreamWriteValue32(b, wide_word + 4, 1, 0));  // the high half alone: not yet
  CHECK(cuStreamSynchronize(b));
  usleep(50000);
  EXPECT_TRUE(cuStreamQuery(a) == CUDA_ERROR_NOT_READY);
  CHECK(cuStreamWriteValue64(b, wide_word, big, 0));
  CHECK(cuStreamSynchronize(a));
  EXPECT_TRUE(Read64(out, b) == 0xabcdef0123456789ull);

  // A batch runs in its order: a wait, then writes behind it.
  CUstreamBatchMemOpParams ops[3] = {};
  ops[0].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
  ops[0].waitValue.address = batch_flag;
  ops[0].waitValue.value = 3;
  ops[0].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
  ops[1].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
  ops[1].writeValue.address = out;
  ops[1].writeValue.value64 = 42;
  ops[2].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  ops[2].writeValue.address = done;
  ops[2].writeValue.value = 8;
  CHECK(cuStreamBatchMemOp(a, 3, ops, 0));
  usleep(50000);
  EXPECT_TRUE(cuStreamQuery(a) == CUDA_ERROR_NOT_READY);
  EXPECT_TRUE(Read64(out, b) == 0xabcdef0123456789ull && Read32(done, b) == 7);
  CUstreamBatchMemOpParams release = {};
  release.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  release.writeValue.address = batch_flag;
  release.writeValue.value = 3;
  CHECK(cuStreamBatchMemOp(b, 1, &release, 0));
  CHECK(cuStreamSynchronize(a));
  EXPECT_TRUE(Read64(out, b) == 42 && Read32(done, b) == 8);

  // Captured, a write is a node of the graph: it writes when the graph runs, not before.
  CUgraph graph;
  CHECK(cuStreamBeginCapture(a, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  CHECK(cuStreamWriteValue32(a, captured, 11, 0));
  CHECK(cuStreamEndCapture(a, &graph));
  size_t nodes = 0;
  CHECK(cuGraphGetNodes(graph, nullptr, &nodes));
  EXPECT_TRUE(nodes == 1);
  EXPECT_TRUE(Read32(captured, b) == 0);
  CUgraphExec exec;
  CHECK(cuGraphInstantiate(&exec, graph, 0));
  CHECK(cuGraphLaunch(exec, a));
  CHECK(cuStreamSynchronize(a));
  EXPECT_TRUE(Read32(captured, b) == 11);
  CHECK(cuGraphExecDestroy(exec));
  CHECK(cuGraphDestroy(graph));

  // Added node by node: a batch memory operation node copies its operations when added, writes
  // when its graph runs, and reads back; new values set on the executable graph are written by
  // its later launches, and those set on the graph's node read back; an executable graph's node
  // cannot turn a write into a wait.
  CUstreamBatchMemOpParams write = {};
  write.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  write.writeValue.address = captured;
  write.writeValue.value = 21;
  CUDA_BATCH_MEM_OP_NODE_PARAMS node_params = {};
  node_params.ctx = ctx;
  node_params.count = 1;
  node_params.paramArray = &write;
  CHECK(cuGraphCreate(&graph, 0));
  CUgraphNode node;
  CHECK(cuGraphAddBatchMemOpNode(&node, graph, nullptr, 0, &node_params));
  write.writeValue.value = 0;
  CUDA_BATCH_MEM_OP_NODE_PARAMS got = {};
  CHECK(cuGraphBatchMemOpNodeGetParams(node, &got));
  EXPECT_TRUE(got.ctx == ctx && got.count == 1 && got.paramArray != nullptr &&
              got.paramArray[0].writeValue.address == captured &&
              got.paramArray[0].writeValue.value == 21);
  CHECK(cuGraphInstantiate(&exec, graph, 0));
  CHECK(cuGraphLaunch(exec, a));
  CHECK(cuStreamSynchronize(a));
  EXPECT_TRUE(Read32(captured, b) == 21);
  write.writeValue.value = 22;
  CHECK(cuGraphExecBatchMemOpNodeSetParams(exec, node, &node_params));
  CHECK(cuGraphLaunch(exec, a));
  CHECK(cuStreamSynchronize(a));
  EXPECT_TRUE(Read32(captured, b) == 22);
  write.writeValue.value = 23;
  CHECK(cuGraphBatchMemOpNodeSetParams(node, &node_params));
  CHECK(cuGraphBatchMemOpNodeGetParams(node, &got));
  EXPECT_TRUE(got.count == 1 && got.paramArray[0].writeValue.value == 23);
  CUstreamBatchMemOpParams wait = {};
  wait.waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
  wait.waitValue.address = captured;
  wait.waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
  CUDA_BATCH_MEM_OP_NODE_PARAMS wait_params = node_params;
  wait_params.paramArray = &wait;
  EXPECT_TRUE(cuGraphExecBatchMemOpNodeSetParams(exec, node, &wait_params) ==
              CUDA_ERROR_INVALID_VALUE);
  CHECK(cuMemsetD32(captured, 0, 1));
  CHECK(cuGraphLaunch(exec, a));
  CHECK(cuStreamSynchronize(a));
  EXPECT_TRUE(Read32(captured, b) == 22);
  CHECK(cuGraphExecDestroy(exec));
  CHECK(cuGraphDestroy(graph));

  // A stream destroyed while it waits keeps its wait and the work behind it (the destroy returns
  // at once): another thread's cuCtxSynchronize waits for that work without holding up this
  // thread's calls, and this thread's write releases it.
  {
    CUdeviceptr pair;
    CHECK(cuMemAlloc(&pair, 8));
    CHECK(cuMemsetD8(pair, 0, 8));
    CUstream doomed;
    CHECK(cuStreamCreate(&doomed, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamWaitValue32(doomed, pair, 1, CU_STREAM_WAIT_VALUE_EQ));
    CHECK(cuStreamWriteValue32(doomed, pair + 4, 7, 0));
    CHECK(cuStreamDestroy(doomed));
    std::atomic<int> synced{-1};
    std::thread syncer([&] {
      CHECK(cuCtxSetCurrent(ctx));
      synced = cuCtxSynchronize();
    });
    usleep(100000);
    EXPECT_TRUE(synced.load() == -1);
    CHECK(cuStreamWriteValue32(b, pair, 1, 0));
    CHECK(cuStreamSynchronize(b));
    syncer.join();
    EXPECT_TRUE(synced.load() == CUDA_SUCCESS);
    EXPECT_TRUE(Read32(pair + 4, b) == 7);
    CHECK(cuMemFree(pair));
  }

  // Refused: a misaligned word, a word outside device memory, unknown flags, 256 operations.
  EXPECT_TRUE(cuStreamWriteValue32(a, flag + 2, 1, 0) == CUDA_ERROR_INVALID_VALUE);
  EXPECT_TRUE(cuStreamWaitValue64(a, wide_word + 4, 1, 0) == CUDA_ERROR_INVALID_VALUE);
  EXPECT_TRUE(cuStreamWriteValue32(a, words + 64, 1, 0) == CUDA_ERROR_INVALID_VALUE);
  EXPECT_TRUE(cuStreamWriteValue64(a, words + 60, 1, 0) == CUDA_ERROR_INVALID_VALUE);
  EXPECT_TRUE(cuStreamWaitValue32(a, flag, 1, 7) == CUDA_ERROR_INVALID_VALUE);
  CUdeviceptr managed;  // which the driver documents these operations do not take
  CHECK(cuMemAllocManaged(&managed, 64, CU_MEM_ATTACH_GLOBAL));
  EXPECT_TRUE(cuStreamWriteValue32(a, managed, 1, 0) == CUDA_ERROR_INVALID_VALUE);
  EXPECT_TRUE(cuStreamWaitValue32(a, managed, 0, CU_STREAM_WAIT_VALUE_GEQ) ==
              CUDA_ERROR_INVALID_VALUE);
  CHECK(cuMemFree(managed));
  EXPECT_TRUE(cuStreamWriteValue32(a, flag, 1, 0x80) == CUDA_ERROR_INVALID_VALUE);
  static CUstreamBatchMemOpParams many[256];
  for (auto& op : many) {
    op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    op.writeValue.address = done;
    op.writeValue.value = 1;
  }
  EXPECT_TRUE(cuStreamBatchMemOp(a, 256, many, 0) == CUDA_ERROR_INVALID_VALUE);
  // A batch whose second operation is bad queues nothing, not even its first.
  CUstreamBatchMemOpParams bad[2] = {};
  bad[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  bad[0].writeValue.address = done;
  bad[0].writeValue.value = 99;
  bad[1].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  bad[1].writeValue.address = flag + 1;
  EXPECT_TRUE(cuStreamBatchMemOp(a, 2, bad, 0) == CUDA_ERROR_INVALID_VALUE);
  CHECK(cuStreamSynchronize(a));
  EXPECT_TRUE(Read32(done, b) == 8);
  // After the refusals the streams work as before.
  CHECK(cuStreamWriteValue32(a, done, 12, 0));
  CHECK(cuStreamSynchronize(a));
  EXPECT_TRUE(Read32(done, b) == 12);

  CHECK(cuStreamDestroy(a));
  CHECK(cuStreamDestroy(b));
  CHECK(cuMemFree(words));
  CHECK(cuModuleUnload(m));
  CHECK(cuCtxDestroy(ctx));
  printf("stream memory operations: waits, writes, batches and a captured write as the driver's\n");
  return 0;
}
