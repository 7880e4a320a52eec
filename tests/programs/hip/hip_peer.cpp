// Peer access between two devices of the server: hipDeviceCanAccessPeer reports the server's
// answer; access is enabled from one device to the other (once: again is
// hipErrorPeerAccessAlreadyEnabled; to itself, hipErrorInvalidDevice) and disabled (once: again
// is hipErrorPeerAccessNotEnabled), by device and by primary context; hipMemcpyPeer and
// hipMemcpyPeerAsync copy between the devices' memories both ways; the P2P attributes answer.
// With one device, only the answers about a device and itself are checked. Prints
// "hip_peer: OK (N devices)".
#include <string.h>

#include <vector>

#include "hip_check.h"

// Deprecated entry points are among those tested.
#pragma clang diagnostic ignored "-Wdeprecated-declarations"

int main() {
  int count = 0;
  CHECK(hipGetDeviceCount(&count));
  int can = -1;
  CHECK(hipDeviceCanAccessPeer(&can, 0, 0));
  EXPECT(can == 0);
  EXPECT_ERROR(hipDeviceCanAccessPeer(&can, 0, count), hipErrorInvalidDevice);
  EXPECT_ERROR(hipDeviceEnablePeerAccess(count, 0), hipErrorInvalidDevice);
  CHECK(hipSetDevice(0));
  EXPECT_ERROR(hipDeviceEnablePeerAccess(0, 0), hipErrorInvalidDevice);
  (void)hipGetLastError();
  if (count < 2) {
    printf("hip_peer: OK (%d devices)\n", count);
    return 0;
  }

  CHECK(hipDeviceCanAccessPeer(&can, 0, 1));
  EXPECT(can == 1);
  CHECK(hipDeviceCanAccessPeer(&can, 1, 0));
  EXPECT(can == 1);
  int value = -1;
  CHECK(hipDeviceGetP2PAttribute(&value, hipDevP2PAttrAccessSupported, 0, 1));
  EXPECT(value == 1);
  CHECK(hipDeviceGetP2PAttribute(&value, hipDevP2PAttrPerformanceRank, 0, 1));
  EXPECT(value >= 0);

  // By device.
  CHECK(hipSetDevice(0));
  EXPECT_ERROR(hipDeviceEnablePeerAccess(1, 1), hipErrorInvalidValue);  // no flags are defined
  CHECK(hipDeviceEnablePeerAccess(1, 0));
  EXPECT_ERROR(hipDeviceEnablePeerAccess(1, 0), hipErrorPeerAccessAlreadyEnabled);
  EXPECT(hipGetLastError() == hipErrorPeerAccessAlreadyEnabled);
  CHECK(hipDeviceDisablePeerAccess(1));
  EXPECT_ERROR(hipDeviceDisablePeerAccess(1), hipErrorPeerAccessNotEnabled);
  (void)hipGetLastError();
  // By context: device 1's primary context, from device 0.
  hipCtx_t ctx1;
  CHECK(hipDevicePrimaryCtxRetain(&ctx1, 1));
  CHECK(hipCtxEnablePeerAccess(ctx1, 0));
  EXPECT_ERROR(hipCtxEnablePeerAccess(ctx1, 0), hipErrorPeerAccessAlreadyEnabled);
  CHECK(hipCtxDisablePeerAccess(ctx1));
  (void)hipGetLastError();
  // And from device 1 to device 0, left enabled.
  CHECK(hipSetDevice(1));
  CHECK(hipDeviceEnablePeerAccess(0, 0));

  // Copies between the devices.
  const size_t n = 1 << 18;
  std::vector<unsigned> host(n), back(n, 0);
  for (size_t i = 0; i < n; ++i) host[i] = static_cast<unsigned>(i * 2654435761u);
  void *d0, *d0b, *d1;
  CHECK(hipSetDevice(0));
  CHECK(hipMalloc(&d0, n * 4));
  CHECK(hipMalloc(&d0b, n * 4));
  CHECK(hipMemcpy(d0, host.data(), n * 4, hipMemcpyHostToDevice));
  CHECK(hipSetDevice(1));
  CHECK(hipMalloc(&d1, n * 4));
  CHECK(hipMemset(d1, 0, n * 4));
  // Synchronous, from device 0's memory to device 1's, issued while device 1 is current.
  CHECK(hipMemcpyPeer(d1, 1, d0, 0, n * 4));
  CHECK(hipMemcpy(back.data(), d1, n * 4, hipMemcpyDeviceToHost));
  EXPECT(memcmp(back.data(), host.data(), n * 4) == 0);
  // On a stream of device 0, back again (half of it) after a memset on device 1.
  CHECK(hipMemset(d1, 0x7f, n * 2));
  CHECK(hipSetDevice(0));
  hipStream_t s;
  CHECK(hipStreamCreate(&s));
  CHECK(hipMemsetAsync(d0b, 0, n * 4, s));
  CHECK(hipMemcpyPeerAsync(d0b, 0, d1, 1, n * 2, s));
  CHECK(hipMemcpyAsync(back.data(), d0b, n * 4, hipMemcpyDeviceToHost, s));
  CHECK(hipStreamSynchronize(s));
  for (size_t i = 0; i < n; ++i) EXPECT(back[i] == (i < n / 2 ? 0x7f7f7f7fu : 0u));
  // Zero bytes: nothing to do; a bad device: refused.
  CHECK(hipMemcpyPeer(d1, 1, d0, 0, 0));
  EXPECT_ERROR(hipMemcpyPeer(d1, count, d0, 0, 4), hipErrorInvalidDevice);
  (void)hipGetLastError();

  CHECK(hipStreamDestroy(s));
  CHECK(hipFree(d0));
  CHECK(hipFree(d0b));
  CHECK(hipSetDevice(1));
  CHECK(hipDeviceDisablePeerAccess(0));
  CHECK(hipFree(d1));
  printf("hip_peer: OK (%d devices)\n", count);
  return 0;
}
