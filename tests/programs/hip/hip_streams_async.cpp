// Stream-ordered copies on several streams with pinned host memory; streams wait on events.
#include <string.h>

#include "hip_check.h"

int main() {
  const int kStreams = 4;
  const size_t n = 256 * 1024;
  hipStream_t streams[kStreams];
  unsigned* host_in[kStreams];
  unsigned* host_out[kStreams];
  void* dev[kStreams];
  for (int s = 0; s < kStreams; ++s) {
    CHECK(s % 2 ? hipStreamCreateWithFlags(&streams[s], hipStreamNonBlocking)
                : hipStreamCreate(&streams[s]));
    CHECK(hipHostMalloc(reinterpret_cast<void**>(&host_in[s]), n * 4, hipHostMallocDefault));
    CHECK(hipHostMalloc(reinterpret_cast<void**>(&host_out[s]), n * 4, hipHostMallocDefault));
    CHECK(hipMalloc(&dev[s], n * 4));
    for (size_t i = 0; i < n; ++i) host_in[s][i] = static_cast<unsigned>(i * 31 + s);
    memset(host_out[s], 0, n * 4);
  }
  unsigned flags = 99;
  CHECK(hipStreamGetFlags(streams[1], &flags));
  EXPECT(flags == hipStreamNonBlocking);
  for (int s = 0; s < kStreams; ++s) {
    CHECK(hipMemcpyAsync(dev[s], host_in[s], n * 4, hipMemcpyHostToDevice, streams[s]));
  }
  // Stream s+1 copies stream s's buffer back once s's upload is done.
  hipEvent_t uploaded[kStreams];
  for (int s = 0; s < kStreams; ++s) {
    CHECK(hipEventCreateWithFlags(&uploaded[s], hipEventDisableTiming));
    CHECK(hipEventRecord(uploaded[s], streams[s]));
  }
  for (int s = 0; s < kStreams; ++s) {
    const int next = (s + 1) % kStreams;
    CHECK(hipStreamWaitEvent(streams[next], uploaded[s], 0));
    CHECK(hipMemcpyAsync(host_out[s], dev[s], n * 4, hipMemcpyDeviceToHost, streams[next]));
  }
  for (int s = 0; s < kStreams; ++s) CHECK(hipStreamSynchronize(streams[s]));
  for (int s = 0; s < kStreams; ++s) {
    EXPECT(hipStreamQuery(streams[s]) == hipSuccess);
    EXPECT(memcmp(host_in[s], host_out[s], n * 4) == 0);
  }
  // The null stream and hipMemcpyWithStream.
  CHECK(hipMemcpyAsync(dev[0], host_in[1], n * 4, hipMemcpyHostToDevice, nullptr));
  CHECK(hipMemcpyWithStream(host_out[0], dev[0], n * 4, hipMemcpyDeviceToHost, nullptr));
  EXPECT(memcmp(host_in[1], host_out[0], n * 4) == 0);
  int least = 0, greatest = 0;
  CHECK(hipDeviceGetStreamPriorityRange(&least, &greatest));
  hipStream_t prio;
  CHECK(hipStreamCreateWithPriority(&prio, hipStreamDefault, greatest));
  int got = 12345;
  CHECK(hipStreamGetPriority(prio, &got));
  EXPECT(got == greatest);
  CHECK(hipStreamDestroy(prio));
  for (int s = 0; s < kStreams; ++s) {
    CHECK(hipEventDestroy(uploaded[s]));
    CHECK(hipStreamDestroy(streams[s]));
    CHECK(hipHostFree(host_in[s]));
    CHECK(hipHostFree(host_out[s]));
    CHECK(hipFree(dev[s]));
  }
  CHECK(hipDeviceSynchronize());
  puts("hip_streams_async: ok");
  return 0;
}
