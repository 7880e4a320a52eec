// What HIP knows of pointers (attributes, allocation ranges), stream callbacks in stream order,
// device limits and peer access.
#include <string.h>

#include <atomic>
#include <vector>

#include "hip_check.h"

struct CallbackCheck {
  const unsigned char* host;  // filled by the copy the callback follows
  size_t bytes;
  unsigned char expected;
  std::atomic<int> calls{0};
  std::atomic<bool> saw_data{false};
  hipError_t status = hipErrorUnknown;
};

static void OnStream(hipStream_t, hipError_t status, void* data) {
  auto* c = static_cast<CallbackCheck*>(data);
  bool all = true;
  for (size_t i = 0; i < c->bytes; ++i) all = all && c->host[i] == c->expected;
  c->status = status;
  c->saw_data = all;
  c->calls++;
}

int main() {
  const size_t n = 1 << 20;
  void* dev;
  CHECK(hipMalloc(&dev, n));
  void* pinned;
  CHECK(hipHostMalloc(&pinned, n, hipHostMallocDefault));

  hipPointerAttribute_t a;
  CHECK(hipPointerGetAttributes(&a, static_cast<char*>(dev) + 100));
  EXPECT(a.memoryType == hipMemoryTypeDevice);
  EXPECT(a.devicePointer == static_cast<char*>(dev) + 100);
  EXPECT(a.device == 0);
  CHECK(hipPointerGetAttributes(&a, pinned));
  EXPECT(a.memoryType == hipMemoryTypeHost);
  EXPECT(a.hostPointer == pinned);
  int on_stack = 0;
  EXPECT_ERROR(hipPointerGetAttributes(&a, &on_stack), hipErrorInvalidValue);
  (void)hipGetLastError();

  hipDeviceptr_t base = nullptr;
  size_t size = 0;
  CHECK(hipMemGetAddressRange(&base, &size, static_cast<char*>(dev) + 12345));
  EXPECT(base == dev && size == n);
  size = 0;
  CHECK(hipMemPtrGetInfo(dev, &size));
  EXPECT(size == n);

  // A callback runs after the work before it on its stream, and before the work after it.
  hipStream_t s;
  CHECK(hipStreamCreate(&s));
  CallbackCheck check;
  check.host = static_cast<unsigned char*>(pinned);
  check.bytes = n;
  check.expected = 0x3c;
  CHECK(hipMemsetAsync(dev, 0x3c, n, s));
  CHECK(hipMemcpyAsync(pinned, dev, n, hipMemcpyDeviceToHost, s));
  CHECK(hipStreamAddCallback(s, OnStream, &check, 0));
  CHECK(hipStreamSynchronize(s));
  EXPECT(check.calls == 1);
  EXPECT(check.saw_data);
  EXPECT(check.status == hipSuccess);
  EXPECT_ERROR(hipStreamAddCallback(s, nullptr, nullptr, 0), hipErrorInvalidValue);
  (void)hipGetLastError();
  CHECK(hipStreamDestroy(s));

  size_t heap = 0;
  CHECK(hipDeviceGetLimit(&heap, hipLimitMallocHeapSize));
  EXPECT(heap > 0);
  int count = 0;
  CHECK(hipGetDeviceCount(&count));
  int can = -1;
  CHECK(hipDeviceCanAccessPeer(&can, 0, count - 1));
  EXPECT(can == 0);
  EXPECT_ERROR(hipDeviceCanAccessPeer(&can, 0, count), hipErrorInvalidDevice);
  (void)hipGetLastError();

  CHECK(hipHostFree(pinned));
  CHECK(hipFree(dev));
  puts("hip_pointer_info: ok");
  return 0;
}
