// Peer access between the devices of a server (run with one device, and with two software GPUs):
// a device never reports access to itself; two devices of the software GPU reach each other
// (access and native atomics reported); with access enabled a kernel on device 0 reads, writes and
// atomically adds to device 1's memory; cudaMemcpyPeer, cudaMemcpyPeerAsync and unified-address
// cudaMemcpy copy between the devices, exactly; enabling twice and disabling what is not enabled
// give their errors, bad devices are refused, and the program carries on.
#include <vector>

#include "rt_check.h"

namespace {

// out[i] = peer[i] + 1 for each i, and atomically adds 1 to *counter on the peer.
__global__ void ReadPeer(const int* peer, int* out, int* counter, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = peer[i] + 1;
    atomicAdd(counter, 1);
  }
}

std::vector<int> Download(const int* d, int n) {
  std::vector<int> h(n);
  CHECK(cudaMemcpy(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost));
  return h;
}

void TwoDevices() {
  const int n = 1000;
  int can = -1;
  CHECK(cudaDeviceCanAccessPeer(&can, 0, 1));
  EXPECT(can == 1, "device 0 to 1: %d", can);
  CHECK(cudaDeviceCanAccessPeer(&can, 1, 0));
  EXPECT(can == 1, "device 1 to 0: %d", can);
  int value = -1;
  CHECK(cudaDeviceGetP2PAttribute(&value, cudaDevP2PAttrAccessSupported, 0, 1));
  EXPECT(value == 1, "access supported %d", value);
  CHECK(cudaDeviceGetP2PAttribute(&value, cudaDevP2PAttrNativeAtomicSupported, 0, 1));
  EXPECT(value == 1, "native atomics %d", value);
  EXPECT_ERROR(cudaDeviceGetP2PAttribute(&value, cudaDevP2PAttrAccessSupported, 1, 1),
               cudaErrorInvalidDevice);
  (void)cudaGetLastError();

  // Memory on device 1.
  CHECK(cudaSetDevice(1));
  int *on1, *counter;
  CHECK(cudaMalloc(&on1, n * sizeof(int)));
  CHECK(cudaMalloc(&counter, sizeof(int)));
  CHECK(cudaMemset(counter, 0, sizeof(int)));
  std::vector<int> seed(n);
  for (int i = 0; i < n; ++i) seed[i] = 3 * i;
  CHECK(cudaMemcpy(on1, seed.data(), n * sizeof(int), cudaMemcpyHostToDevice));

  // Device 0 reaches it once access is enabled.
  CHECK(cudaSetDevice(0));
  EXPECT_ERROR(cudaDeviceDisablePeerAccess(1), cudaErrorPeerAccessNotEnabled);
  (void)cudaGetLastError();
  CHECK(cudaDeviceEnablePeerAccess(1, 0));
  EXPECT_ERROR(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled);
  (void)cudaGetLastError();
  int* on0;
  CHECK(cudaMalloc(&on0, n * sizeof(int)));
  ReadPeer<<<(n + 127) / 128, 128>>>(on1, on0, counter, n);
  CHECK_SYNC();
  std::vector<int> got = Download(on0, n);
  for (int i = 0; i < n; ++i) EXPECT(got[i] == 3 * i + 1, "element %d: %d", i, got[i]);
  CHECK(cudaSetDevice(1));
  EXPECT(Download(counter, 1)[0] == n, "the peer's counter: %d", Download(counter, 1)[0]);

  // Copies between the devices: explicit, on a stream, and by unified address.
  CHECK(cudaSetDevice(0));
  CHECK(cudaMemcpyPeer(on1, 1, on0, 0, n * sizeof(int)));
  CHECK(cudaSetDevice(1));
  got = Download(on1, n);
  for (int i = 0; i < n; ++i) EXPECT(got[i] == 3 * i + 1, "peer copy %d: %d", i, got[i]);
  CHECK(cudaSetDevice(0));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  CHECK(cudaMemsetAsync(on0, 0, n * sizeof(int), s));
  CHECK(cudaMemcpyPeerAsync(on0 + 10, 0, on1, 1, 20 * sizeof(int), s));
  CHECK(cudaStreamSynchronize(s));
  got = Download(on0, n);
  for (int i = 0; i < n; ++i) {
    const int want = i >= 10 && i < 30 ? 3 * (i - 10) + 1 : 0;
    EXPECT(got[i] == want, "async peer copy %d: %d, expected %d", i, got[i], want);
  }
  CHECK(cudaMemcpy(on1, on0, n * sizeof(int), cudaMemcpyDefault));
  CHECK(cudaSetDevice(1));
  std::vector<int> back = Download(on1, n);
  for (int i = 0; i < n; ++i) EXPECT(back[i] == got[i], "unified copy %d", i);
  // Past the end of the peer's memory: refused.
  CHECK(cudaSetDevice(0));
  EXPECT_ERROR(cudaMemcpyPeer(on1, 1, on0, 0, (n + 1) * sizeof(int)), cudaErrorInvalidValue);
  (void)cudaGetLastError();

  CHECK(cudaDeviceDisablePeerAccess(1));
  EXPECT_ERROR(cudaDeviceDisablePeerAccess(1), cudaErrorPeerAccessNotEnabled);
  (void)cudaGetLastError();
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(on0));
  CHECK(cudaSetDevice(1));
  CHECK(cudaFree(on1));
  CHECK(cudaFree(counter));
  CHECK(cudaSetDevice(0));
}

}  // namespace

int main() {
  int count = 0;
  CHECK(cudaGetDeviceCount(&count));
  int can = -1;
  CHECK(cudaDeviceCanAccessPeer(&can, 0, 0));
  EXPECT(can == 0, "device 0 to itself: %d", can);
  EXPECT_ERROR(cudaDeviceCanAccessPeer(&can, 0, count), cudaErrorInvalidDevice);
  (void)cudaGetLastError();
  if (count > 1) TwoDevices();
  int* d = nullptr;
  CHECK(cudaMalloc(&d, sizeof(int)));
  CHECK(cudaMemset(d, 0x7f, sizeof(int)));
  int h = 0;
  CHECK(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
  EXPECT(h == 0x7f7f7f7f, "at the end: %x", h);
  CHECK(cudaFree(d));
  printf("rt_peer_access: OK (%d device%s)\n", count, count > 1 ? "s" : "");
  return 0;
}
