// Threads of one program do not wait for each other's waits (client/connection.h, lanes):
// thread A synchronizes on a stream whose kernel runs until the main thread's work sets a flag;
// meanwhile the main thread launches, synchronizes and checks 20 rounds on its own stream, then
// sets the flag. Waits on the connection itself would hold it for A, and the main thread's calls
// would never be served (the program then hangs). Then the order of waits across threads: the
// main thread writes a value with a kernel, records an event and tells thread C (a host condition
// variable) without synchronizing; C's cuEventSynchronize must come after that record, so that
// what C then reads is the value. Then cuCtxSynchronize from a third thread while A waits again;
// last, A copies a result out (cuMemcpyDtoHAsync, which waits for its stream) behind a kernel that
// only the main thread's later rounds end, and reads what that kernel's stream wrote before it.
// Then synchronous memsets and copies on the legacy default stream behind such a kernel.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "check.h"

int main() {
  CUcontext ctx = InitContext();
  std::string ptx = ReadFile(RGPU_KERNELS_PTX);
  CUmodule module;
  CHECK(cuModuleLoadData(&module, ptx.data()));
  CUfunction wait_for_flag, add_to, set_all;
  CHECK(cuModuleGetFunction(&wait_for_flag, module, "wait_for_flag"));
  CHECK(cuModuleGetFunction(&add_to, module, "add_to"));
  CHECK(cuModuleGetFunction(&set_all, module, "set_all"));
  const int n = 4096;
  CUdeviceptr flag, counter, data;
  CHECK(cuMemAlloc(&flag, sizeof(int)));
  CHECK(cuMemAlloc(&counter, sizeof(int)));
  CHECK(cuMemAlloc(&data, n * sizeof(int)));
  CHECK(cuMemsetD32(flag, 0, 1));
  CHECK(cuMemsetD32(counter, 0, 1));
  CHECK(cuMemsetD32(data, 0, n));
  CUstream sa, sb, sc;
  CHECK(cuStreamCreate(&sa, CU_STREAM_NON_BLOCKING));
  CHECK(cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING));
  CHECK(cuStreamCreate(&sc, CU_STREAM_NON_BLOCKING));

  // 20 rounds on sb (a launch adding 1 to counter, its value copied out, checked), then the flag
  // set, which ends the other thread's kernel.
  auto RoundsThenRelease = [&]() {
    CHECK(cuMemsetD32Async(counter, 0, 1, sb));
    for (int round = 1; round <= 20; ++round) {
      int one = 1;
      void* args[] = {&counter, &one};
      CHECK(cuLaunchKernel(add_to, 1, 1, 1, 32, 1, 1, 0, sb, args, nullptr));
      int value = 0;
      CHECK(cuMemcpyDtoHAsync(&value, counter, sizeof value, sb));
      CHECK(cuStreamSynchronize(sb));
      if (value != round) {
        fprintf(stderr, "lanes: round %d read %d\n", round, value);
        return false;
      }
    }
    int one = 1, count = 1;
    void* args[] = {&flag, &one, &count};
    CHECK(cuLaunchKernel(set_all, 1, 1, 1, 1, 1, 1, 0, sb, args, nullptr));
    CHECK(cuStreamSynchronize(sb));
    return true;
  };

  // 1. A waits on a kernel that only the main thread's later work ends.
  auto wait_on_flag = [&](CUresult* result, std::atomic<bool>* waiting) {
    CHECK(cuCtxSetCurrent(ctx));
    void* args[] = {&flag};
    CHECK(cuLaunchKernel(wait_for_flag, 1, 1, 1, 1, 1, 1, 0, sa, args, nullptr));
    waiting->store(true);
    *result = cuStreamSynchronize(sa);
  };
  CUresult a_result = CUDA_ERROR_UNKNOWN;
  std::atomic<bool> a_waiting{false};
  std::thread a(wait_on_flag, &a_result, &a_waiting);
  while (!a_waiting.load()) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // A's wait reaches the server
  if (!RoundsThenRelease()) return 1;
  a.join();
  CHECK(a_result);

  // 2. A wait on another thread comes after what this thread did before telling it.
  CUevent written;
  CHECK(cuEventCreate(&written, CU_EVENT_DEFAULT));
  std::mutex mu;
  std::condition_variable cv;
  bool recorded = false;
  int mismatches = -1;
  std::thread c([&] {
    CHECK(cuCtxSetCurrent(ctx));
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return recorded; });
    }
    CHECK(cuEventSynchronize(written));
    std::vector<int> host(n, 0);
    CHECK(cuMemcpyDtoHAsync(host.data(), data, n * sizeof(int), sc));
    CHECK(cuStreamSynchronize(sc));
    mismatches = 0;
    for (int v : host) mismatches += v != 7;
  });
  {
    int seven = 7, count = n;
    void* args[] = {&data, &seven, &count};
    CHECK(cuLaunchKernel(set_all, n / 128, 1, 1, 128, 1, 1, 0, sb, args, nullptr));
    CHECK(cuEventRecord(written, sb));
    std::lock_guard<std::mutex> lock(mu);
    recorded = true;
  }
  cv.notify_one();
  c.join();
  if (mismatches != 0) {
    fprintf(stderr, "lanes: %d words not written when the event was waited for\n", mismatches);
    return 1;
  }

  // 3. The context's synchronize from one thread while another waits on a stream of it.
  CHECK(cuMemsetD32(flag, 0, 1));
  a_waiting.store(false);
  std::thread a2(wait_on_flag, &a_result, &a_waiting);
  while (!a_waiting.load()) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CUresult ctx_result = CUDA_ERROR_UNKNOWN;
  std::thread d([&] {
    CHECK(cuCtxSetCurrent(ctx));
    ctx_result = cuCtxSynchronize();  // returns once A's kernel has ended, after the flag
  });
  {
    int one = 1, count = 1;
    void* args[] = {&flag, &one, &count};
    CHECK(cuLaunchKernel(set_all, 1, 1, 1, 1, 1, 1, 0, sb, args, nullptr));
    CHECK(cuStreamSynchronize(sb));
  }
  a2.join();
  d.join();
  CHECK(a_result);
  CHECK(ctx_result);

  // 4. A copy out behind long work waits without holding up the main thread's rounds.
  CHECK(cuMemsetD32(flag, 0, 1));
  int copied = -1;
  CUresult copy_result = CUDA_ERROR_UNKNOWN;
  std::atomic<bool> copying{false};
  std::thread e([&] {
    CHECK(cuCtxSetCurrent(ctx));
    void* wait_args[] = {&flag};
    CHECK(cuLaunchKernel(wait_for_flag, 1, 1, 1, 1, 1, 1, 0, sa, wait_args, nullptr));
    int five = 5, count = 1;
    void* set_args[] = {&data, &five, &count};
    CHECK(cuLaunchKernel(set_all, 1, 1, 1, 1, 1, 1, 0, sa, set_args, nullptr));
    copying.store(true);
    copy_result = cuMemcpyDtoHAsync(&copied, data, sizeof copied, sa);
    if (copy_result == CUDA_SUCCESS) copy_result = cuStreamSynchronize(sa);
  });
  while (!copying.load()) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the copy reaches the server
  if (!RoundsThenRelease()) return 1;
  e.join();
  CHECK(copy_result);
  if (copied != 5) {
    fprintf(stderr, "lanes: the copy behind the long kernel read %d, not 5\n", copied);
    return 1;
  }
  // 5. Synchronous memsets and copies behind long work on the legacy default stream: a memset
  // and a copy between device memory are queued (CUDA's are asynchronous to the host), a copy in
  // waits for the kernel as CUDA's does; none of them holds up the main thread's rounds.
  CHECK(cuMemsetD32(flag, 0, 1));
  CHECK(cuCtxSynchronize());
  int out[3] = {-1, -1, -1};
  CUresult sync_result = CUDA_ERROR_UNKNOWN;
  std::atomic<bool> syncing{false};
  std::thread f([&] {
    CHECK(cuCtxSetCurrent(ctx));
    void* wait_args[] = {&flag};
    CHECK(cuLaunchKernel(wait_for_flag, 1, 1, 1, 1, 1, 1, 0, nullptr, wait_args, nullptr));
    syncing.store(true);
    const int seven = 7;
    sync_result = cuMemsetD32(data + sizeof(int), 9, 1);
    if (sync_result == CUDA_SUCCESS) {
      sync_result = cuMemcpyDtoD(data + 2 * sizeof(int), data + sizeof(int), sizeof(int));
    }
    if (sync_result == CUDA_SUCCESS) sync_result = cuMemcpyHtoD(data, &seven, sizeof seven);
    if (sync_result == CUDA_SUCCESS) sync_result = cuMemcpyDtoH(out, data, sizeof out);
  });
  while (!syncing.load()) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the calls reach the server
  if (!RoundsThenRelease()) return 1;
  f.join();
  CHECK(sync_result);
  if (out[0] != 7 || out[1] != 9 || out[2] != 9) {
    fprintf(stderr, "lanes: synchronous calls behind the long kernel gave %d %d %d, not 7 9 9\n",
            out[0], out[1], out[2]);
    return 1;
  }
  for (CUstream s : {sa, sb, sc}) CHECK(cuStreamDestroy(s));
  CHECK(cuEventDestroy(written));
  printf(
      "lanes: 20 rounds while another thread waited, copied or set memory; waits ordered across "
      "threads: OK\n");
  return 0;
}
