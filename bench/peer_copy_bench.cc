// peer_copy_bench: copies between device 0 and device 1 through whatever libcuda.so.1 is loaded
// (bench/peer_copy_bench.sh: the two devices on two rgpu-servers, the copies server to server and
// through the client with RGPU_PEER_COPIES=0; and a copy out of device 0 to the host and back in
// to device 1, which is what the tenant's link alone can do: the floor a direct copy must beat).
//
//   peer_copy_bench [MiB per copy] [copies]   (default 64, 8)
//
// Prints a table and one JSON line: each way's median seconds per copy and GB/s.
#include "bench/driver_check.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? strtoull(argv[1], nullptr, 10) : 64;
  const int copies = argc > 2 ? atoi(argv[2]) : 8;
  const size_t bytes = mib << 20;
  CK(cuInit(0));
  int count = 0;
  CK(cuDeviceGetCount(&count));
  if (count < 2) {
    fprintf(stderr, "peer_copy_bench needs two devices (found %d)\n", count);
    return 1;
  }
  CUcontext ctx[2];
  CUdeviceptr buf[2];
  for (int d = 0; d < 2; ++d) {
    CK(cuDevicePrimaryCtxRetain(&ctx[d], d));
    CK(cuCtxSetCurrent(ctx[d]));
    CK(cuMemAlloc(&buf[d], bytes));
    CK(cuMemsetD8(buf[d], static_cast<unsigned char>(d + 1), bytes));
    CK(cuCtxSynchronize());
  }
  std::vector<char> host(bytes);
  std::vector<double> peer, staged;
  for (int i = 0; i < copies + 1; ++i) {  // the first of each is a warm-up
    CK(cuCtxSetCurrent(ctx[1]));
    double t = Now();
    CK(cuMemcpyPeer(buf[1], ctx[1], buf[0], ctx[0], bytes));
    if (i > 0) peer.push_back(Now() - t);
    t = Now();
    CK(cuCtxSetCurrent(ctx[0]));
    CK(cuMemcpyDtoH(host.data(), buf[0], bytes));
    CK(cuCtxSetCurrent(ctx[1]));
    CK(cuMemcpyHtoD(buf[1], host.data(), bytes));
    if (i > 0) staged.push_back(Now() - t);
  }
  const double p = Median(peer), s = Median(staged);
  printf("%zu MiB copies, median of %d\n%-28s %12s %10s\n", mib, copies, "way", "s per copy",
         "GB/s");
  printf("%-28s %12.4f %10.3f\n", "cuMemcpyPeer (device 0->1)", p, bytes / p / 1e9);
  printf("%-28s %12.4f %10.3f\n", "to the host and back", s, bytes / s / 1e9);
  printf(
      "{\"bench\":\"peer_copy\",\"mib\":%zu,\"copies\":%d,\"peer_s\":%.6f,\"peer_gbps\":%.4f,"
      "\"staged_s\":%.6f,\"staged_gbps\":%.4f,\"peer_over_staged\":%.3f}\n",
      mib, copies, p, bytes / p / 1e9, s, bytes / s / 1e9, s / p);
  return 0;
}
