// One program, devices of several servers (tests/e2e/servers.sh: server A with two devices, server
// B with one, RGPU_SERVER=A,B). Usage:
//   driver_servers check LAYOUT      LAYOUT: each device's server, e.g. "001" (devices 0 and 1 on
//                                    one server, device 2 on another); checks per-device work,
//                                    peer answers, copies both ways and event waits across
//                                    servers (which never block the program's thread), and that
//                                    a kernel cannot reach another server's memory
//   driver_servers uuids             prints each device's UUID, one line each, in ordinal order
//   driver_servers survive READY GO  works on every device, creates READY, waits for GO (the test
//                                    kills the last device's server meanwhile), then checks that
//                                    the last device fails with a CUDA error and the others go on
//   driver_servers refused READY GO  cuInit must fail (the test makes the last server refuse);
//                                    creates READY, waits for GO (the test checks meanwhile that
//                                    the servers that accepted have their sessions ended already)
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "check.h"

namespace {

// A host function that holds its stream until the program opens it.
class Gate {
 public:
  static void CUDA_CB Wait(void* self) {
    auto* g = static_cast<Gate*>(self);
    std::unique_lock<std::mutex> lock(g->mu_);
    g->cv_.wait(lock, [g] { return g->open_; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

struct Device {
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  CUmodule module = nullptr;
  CUfunction add_one = nullptr, set_all = nullptr, spin = nullptr;
};

Device Open(int ordinal) {
  Device d;
  CHECK(cuDeviceGet(&d.dev, ordinal));
  CHECK(cuDevicePrimaryCtxRetain(&d.ctx, d.dev));
  CHECK(cuCtxSetCurrent(d.ctx));
  CHECK(cuModuleLoad(&d.module, RGPU_KERNELS_FATBIN));
  CHECK(cuModuleGetFunction(&d.add_one, d.module, "add_one_f64"));
  CHECK(cuModuleGetFunction(&d.set_all, d.module, "set_all"));
  CHECK(cuModuleGetFunction(&d.spin, d.module, "spin"));
  return d;
}

// x[i] = seed + i on the device, once through add_one_f64 (2x + 1), checked on the host.
CUresult Work(const Device& d, double seed) {
  CUresult r = cuCtxSetCurrent(d.ctx);
  if (r != CUDA_SUCCESS) return r;
  const int n = 4096;
  std::vector<double> x(n);
  for (int i = 0; i < n; ++i) x[i] = seed + i;
  CUdeviceptr p;
  if ((r = cuMemAlloc(&p, n * sizeof(double))) != CUDA_SUCCESS) return r;
  if ((r = cuMemcpyHtoD(p, x.data(), n * sizeof(double))) != CUDA_SUCCESS) return r;
  int count = n;
  void* args[] = {&p, &count};
  r = cuLaunchKernel(d.add_one, (n + 127) / 128, 1, 1, 128, 1, 1, 0, nullptr, args, nullptr);
  if (r != CUDA_SUCCESS) return r;
  if ((r = cuMemcpyDtoH(x.data(), p, n * sizeof(double))) != CUDA_SUCCESS) return r;
  for (int i = 0; i < n; ++i) EXPECT_TRUE(x[i] == (seed + i) * 2.0 + 1.0);
  return cuMemFree(p);
}

// Fills n ints at p on d's stream s with `value`.
void Fill(const Device& d, CUstream s, CUdeviceptr p, int value, int n) {
  void* args[] = {&p, &value, &n};
  CHECK(cuLaunchKernel(d.set_all, (n + 255) / 256, 1, 1, 256, 1, 1, 0, s, args, nullptr));
}

// A kernel that keeps d's stream s busy for a while (so that a wait behind it really waits).
void Busy(const Device& d, CUstream s) {
  int iters = 200000;
  CUdeviceptr none = 0;
  void* args[] = {&iters, &none};
  CHECK(cuLaunchKernel(d.spin, 2, 1, 1, 64, 1, 1, 0, s, args, nullptr));
}

std::vector<int> ReadBack(const Device& d, CUdeviceptr p, int n) {
  std::vector<int> out(n, -1);
  CHECK(cuCtxSetCurrent(d.ctx));
  CHECK(cuMemcpyDtoH(out.data(), p, n * sizeof(int)));
  return out;
}

bool All(const std::vector<int>& v, int value) {
  for (int x : v) {
    if (x != value) return false;
  }
  return true;
}

int Check(const std::string& layout) {
  int count = 0;
  CHECK(cuDeviceGetCount(&count));
  EXPECT_TRUE(count == static_cast<int>(layout.size()));
  std::vector<Device> devices;
  for (int i = 0; i < count; ++i) devices.push_back(Open(i));
  // Each device is its own: UUIDs and PCI bus ids differ.
  for (int i = 0; i < count; ++i) {
    for (int j = i + 1; j < count; ++j) {
      CUuuid a, b;
      CHECK(cuDeviceGetUuid(&a, i));
      CHECK(cuDeviceGetUuid(&b, j));
      EXPECT_TRUE(memcmp(a.bytes, b.bytes, sizeof a.bytes) != 0);
      char bus_a[32], bus_b[32];
      CHECK(cuDeviceGetPCIBusId(bus_a, sizeof bus_a, i));
      CHECK(cuDeviceGetPCIBusId(bus_b, sizeof bus_b, j));
      EXPECT_TRUE(strcmp(bus_a, bus_b) != 0);
      CUdevice back;
      CHECK(cuDeviceGetByPCIBusId(&back, bus_b));
      EXPECT_TRUE(back == j);
    }
  }
  // Work on every device, one after another and interleaved.
  for (int i = 0; i < count; ++i) CHECK(Work(devices[i], 100.0 * i));
  for (int round = 0; round < 3; ++round) {
    for (int i = count - 1; i >= 0; --i) CHECK(Work(devices[i], 1000.0 * round + i));
  }
  // Memory info and pointer attributes are each device's.
  const int n = 1 << 16;
  std::vector<CUdeviceptr> buffers(count);
  for (int i = 0; i < count; ++i) {
    CHECK(cuCtxSetCurrent(devices[i].ctx));
    size_t free_bytes = 0, total = 0;
    CHECK(cuMemGetInfo(&free_bytes, &total));
    EXPECT_TRUE(total > 0 && free_bytes <= total);
    CHECK(cuMemAlloc(&buffers[i], n * sizeof(int)));
    int ordinal = -1;
    CHECK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, buffers[i]));
    EXPECT_TRUE(ordinal == i);
    CUcontext owner = nullptr;
    CHECK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, buffers[i]));
    EXPECT_TRUE(owner == devices[i].ctx);
  }
  // Device addresses of different devices never coincide (unified addressing).
  for (int i = 0; i < count; ++i) {
    for (int j = i + 1; j < count; ++j) {
      EXPECT_TRUE(buffers[i] + n * sizeof(int) <= buffers[j] ||
                  buffers[j] + n * sizeof(int) <= buffers[i]);
    }
  }
  for (int i = 0; i < count; ++i) {
    for (int j = 0; j < count; ++j) {
      if (i == j) continue;
      const bool same = layout[i] == layout[j];
      int can = -1;
      CHECK(cuDeviceCanAccessPeer(&can, i, j));
      if (!same) {
        // No peer mapping across servers, and access cannot be enabled.
        EXPECT_TRUE(can == 0);
        int supported = -1;
        CHECK(cuDeviceGetP2PAttribute(&supported, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, i, j));
        EXPECT_TRUE(supported == 0);
        CHECK(cuCtxSetCurrent(devices[i].ctx));
        EXPECT_TRUE(cuCtxEnablePeerAccess(devices[j].ctx, 0) == CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
      }
    }
  }
  // Copies between every pair of devices, both ways: synchronous peer copies, asynchronous ones
  // behind a kernel on the source's and on the destination's stream, and unified-address copies.
  for (int i = 0; i < count; ++i) {
    for (int j = 0; j < count; ++j) {
      if (i == j) continue;
      const Device &a = devices[i], &b = devices[j];
      const int tag = 10 * i + j + 1;
      CHECK(cuCtxSetCurrent(a.ctx));
      Fill(a, nullptr, buffers[i], tag, n);
      CHECK(cuCtxSynchronize());
      CHECK(cuMemcpyPeer(buffers[j], b.ctx, buffers[i], a.ctx, n * sizeof(int)));
      EXPECT_TRUE(All(ReadBack(b, buffers[j], n), tag));
      // On the source's stream, behind a kernel that writes the source.
      CHECK(cuCtxSetCurrent(a.ctx));
      CUstream sa;
      CHECK(cuStreamCreate(&sa, CU_STREAM_NON_BLOCKING));
      Busy(a, sa);
      Fill(a, sa, buffers[i], tag + 100, n);
      CHECK(cuMemcpyPeerAsync(buffers[j], b.ctx, buffers[i], a.ctx, n * sizeof(int), sa));
      CHECK(cuStreamSynchronize(sa));
      EXPECT_TRUE(All(ReadBack(b, buffers[j], n), tag + 100));
      // On the destination's stream, which waits for an event recorded behind the kernel on the
      // source's device (an event of another device, possibly of another server).
      CUevent written;
      CHECK(cuCtxSetCurrent(a.ctx));
      CHECK(cuEventCreate(&written, CU_EVENT_DISABLE_TIMING));
      Busy(a, sa);
      Fill(a, sa, buffers[i], tag + 200, n);
      CHECK(cuEventRecord(written, sa));
      CHECK(cuCtxSetCurrent(b.ctx));
      CUstream sb;
      CHECK(cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING));
      CHECK(cuStreamWaitEvent(sb, written, 0));
      CHECK(cuMemcpyPeerAsync(buffers[j], b.ctx, buffers[i], a.ctx, n * sizeof(int), sb));
      // Work behind the copy on the destination's stream sees the copied values.
      CUdeviceptr seen;
      CHECK(cuMemAlloc(&seen, n * sizeof(int)));
      CHECK(cuMemcpyDtoDAsync(seen, buffers[j], n * sizeof(int), sb));
      CHECK(cuStreamSynchronize(sb));
      EXPECT_TRUE(All(ReadBack(b, seen, n), tag + 200));
      CHECK(cuMemFree(seen));
      // The wait holds the destination stream's later work, not the program's thread: this event
      // is recorded behind a host function that returns only once this thread, past the wait,
      // opens it (a wait that blocked the thread would never return).
      {
        Gate gate;
        CUevent gated;
        CHECK(cuCtxSetCurrent(a.ctx));
        CHECK(cuEventCreate(&gated, CU_EVENT_DISABLE_TIMING));
        CHECK(cuLaunchHostFunc(sa, &Gate::Wait, &gate));
        Fill(a, sa, buffers[i], tag + 400, n);
        CHECK(cuEventRecord(gated, sa));
        CHECK(cuCtxSetCurrent(b.ctx));
        CUstream sc;
        CHECK(cuStreamCreate(&sc, CU_STREAM_NON_BLOCKING));
        CHECK(cuStreamWaitEvent(sc, gated, 0));
        CHECK(cuMemcpyPeerAsync(buffers[j], b.ctx, buffers[i], a.ctx, n * sizeof(int), sc));
        gate.Open();
        CHECK(cuStreamSynchronize(sc));
        EXPECT_TRUE(All(ReadBack(b, buffers[j], n), tag + 400));
        CHECK(cuStreamDestroy(sc));
        CHECK(cuEventDestroy(gated));
      }
      // Unified addressing: cuMemcpy between the two devices' memory, either context current.
      CHECK(cuCtxSetCurrent(a.ctx));
      Fill(a, nullptr, buffers[i], tag + 300, n);
      CHECK(cuCtxSetCurrent(b.ctx));
      CHECK(cuMemcpy(buffers[j], buffers[i], n * sizeof(int)));
      EXPECT_TRUE(All(ReadBack(b, buffers[j], n), tag + 300));
      CHECK(cuStreamDestroy(sb));
      CHECK(cuCtxSetCurrent(a.ctx));
      CHECK(cuStreamDestroy(sa));
      CHECK(cuEventDestroy(written));
    }
  }
  // A kernel of the last device given a pointer of a device on another server faults there (no
  // server reaches another's memory) and only its own context is broken: the others go on.
  const int last = count - 1;
  int other = -1;
  for (int i = 0; i < last; ++i) {
    if (layout[i] != layout[last]) other = i;
  }
  EXPECT_TRUE(other >= 0);
  CUcontext victim;
  CHECK(cuCtxCreate(&victim, nullptr, 0, devices[last].dev));
  CUmodule module;
  CHECK(cuModuleLoad(&module, RGPU_KERNELS_FATBIN));
  CUfunction set_all;
  CHECK(cuModuleGetFunction(&set_all, module, "set_all"));
  CUdeviceptr foreign = buffers[other];
  int value = 7, elements = n;
  void* args[] = {&foreign, &value, &elements};
  CUresult launched = cuLaunchKernel(set_all, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr);
  CUresult synced = launched == CUDA_SUCCESS ? cuCtxSynchronize() : launched;
  EXPECT_TRUE(synced != CUDA_SUCCESS);
  printf("servers: a kernel given another server's pointer: %d\n", (int)synced);
  CHECK(cuCtxDestroy(victim));
  EXPECT_TRUE(!All(ReadBack(devices[other], buffers[other], n), 7));
  for (int i = 0; i < count; ++i) CHECK(Work(devices[i], 5.0 + i));
  for (int i = 0; i < count; ++i) {
    CHECK(cuCtxSetCurrent(devices[i].ctx));
    CHECK(cuMemFree(buffers[i]));
    CHECK(cuModuleUnload(devices[i].module));
    CHECK(cuDevicePrimaryCtxRelease(devices[i].dev));
  }
  printf("servers: OK (%d devices, layout %s)\n", count, layout.c_str());
  return 0;
}

int Uuids() {
  int count = 0;
  CHECK(cuDeviceGetCount(&count));
  for (int i = 0; i < count; ++i) {
    CUuuid u;
    CHECK(cuDeviceGetUuid(&u, i));
    printf("GPU-");
    for (int b = 0; b < 16; ++b) {
      if (b == 4 || b == 6 || b == 8 || b == 10) printf("-");
      printf("%02x", static_cast<unsigned char>(u.bytes[b]));
    }
    printf("\n");
  }
  return 0;
}

// Creates the file `ready`, then waits (up to 30 s) for the test to create `go`.
void ReadyThenWait(const char* ready, const char* go) {
  FILE* f = fopen(ready, "w");
  EXPECT_TRUE(f != nullptr);
  fclose(f);
  for (int waited = 0; access(go, F_OK) != 0; ++waited) {
    EXPECT_TRUE(waited < 3000);
    usleep(10000);
  }
}

int Survive(const char* ready, const char* go) {
  int count = 0;
  CHECK(cuDeviceGetCount(&count));
  EXPECT_TRUE(count >= 2);
  std::vector<Device> devices;
  for (int i = 0; i < count; ++i) devices.push_back(Open(i));
  for (int i = 0; i < count; ++i) CHECK(Work(devices[i], i));
  ReadyThenWait(ready, go);
  // The last device's server is gone: its calls fail with a CUDA error, now and later.
  const CUresult lost = Work(devices[count - 1], 1.0);
  EXPECT_TRUE(lost != CUDA_SUCCESS);
  EXPECT_TRUE(Work(devices[count - 1], 2.0) != CUDA_SUCCESS);
  const char* name = nullptr;
  cuGetErrorName(lost, &name);
  printf("servers: the lost device answers %s\n", name != nullptr ? name : "?");
  // The others go on.
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < count - 1; ++i) CHECK(Work(devices[i], 10.0 * round + i));
  }
  printf("servers: OK (survived the loss of device %d)\n", count - 1);
  return 0;
}

int Refused(const char* ready, const char* go) {
  const CUresult r = cuInit(0);
  EXPECT_TRUE(r != CUDA_SUCCESS);
  ReadyThenWait(ready, go);
  const char* name = nullptr;
  cuGetErrorName(r, &name);
  printf("servers: cuInit answered %s\n", name != nullptr ? name : "?");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "refused" && argc == 4) return Refused(argv[2], argv[3]);
  CHECK(cuInit(0));
  if (mode == "check" && argc == 3) return Check(argv[2]);
  if (mode == "uuids" && argc == 2) return Uuids();
  if (mode == "survive" && argc == 4) return Survive(argv[2], argv[3]);
  fprintf(stderr, "usage: %s check LAYOUT | uuids | survive READY GO | refused READY GO\n",
          argv[0]);
  return 2;
}
