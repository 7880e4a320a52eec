// Peer access where it is not offered: every device pair reports it cannot access its peer (0, as
// on a machine without peer links), link attributes are 0, enabling it is refused with
// cudaErrorPeerAccessUnsupported, bad devices are refused, and the program carries on (a copy
// between devices through the host still works).
#include "rt_check.h"

int main() {
  int count = 0;
  CHECK(cudaGetDeviceCount(&count));
  int can = -1;
  CHECK(cudaDeviceCanAccessPeer(&can, 0, 0));
  EXPECT(can == 0, "device 0 to itself: %d", can);
  for (int peer = 1; peer < count; ++peer) {
    CHECK(cudaDeviceCanAccessPeer(&can, 0, peer));
    EXPECT(can == 0, "device 0 to %d: %d", peer, can);
    int value = -1;
    CHECK(cudaDeviceGetP2PAttribute(&value, cudaDevP2PAttrAccessSupported, 0, peer));
    EXPECT(value == 0, "access supported %d", value);
  }
  EXPECT_ERROR(cudaDeviceCanAccessPeer(&can, 0, count), cudaErrorInvalidDevice);
  (void)cudaGetLastError();
  if (count > 1) {
    CHECK(cudaSetDevice(0));
    EXPECT_ERROR(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessUnsupported);
    (void)cudaGetLastError();
  }
  int* d = nullptr;
  CHECK(cudaMalloc(&d, sizeof(int)));
  CHECK(cudaMemset(d, 0x7f, sizeof(int)));
  int h = 0;
  CHECK(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
  EXPECT(h == 0x7f7f7f7f, "after the refusals: %x", h);
  CHECK(cudaFree(d));
  printf("rt_peer_access: OK\n");
  return 0;
}
