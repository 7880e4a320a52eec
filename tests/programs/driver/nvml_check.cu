// NVML as a program finds it (dlopen("libnvidia-ml.so.1"), as PyTorch and vLLM do), every answer
// checked against the CUDA driver's for the same devices: the count, names, UUIDs, PCI bus ids
// (and the handles found by UUID and by bus id in both of NVML's forms), compute capability,
// the largest SM clock, MIG off, peer-to-peer status as cuDeviceCanAccessPeer, memory (v1 and v2:
// total as cuMemGetInfo's, used growing by exactly what the program allocates on each device),
// the program among the device's compute processes with its memory, utilization (with `metered`:
// above 0 after a busy kernel; without: not supported), and NVML's own errors (uninitialized, bad
// handles and indices, short buffers, a wrong struct version, an unsupported query, a second
// shutdown).
//   nvml_check [metered]
#include <dlfcn.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

namespace {

// NVML's ABI as its documentation gives it (the toolkit has no nvml.h).
typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;
constexpr nvmlReturn_t kSuccess = 0, kUninitialized = 1, kInvalidArgument = 2, kNotSupported = 3,
                       kInsufficientSize = 7, kVersionMismatch = 25;
struct PciInfo {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
static_assert(sizeof(PciInfo) == 68, "nvmlPciInfo_t");
struct Memory {
  unsigned long long total, free, used;
};
struct MemoryV2 {
  unsigned version;
  unsigned long long total, reserved, free, used;
};
static_assert(sizeof(MemoryV2) == 40, "nvmlMemory_v2_t");
constexpr unsigned kMemoryV2 = sizeof(MemoryV2) | (2u << 24);
struct Utilization {
  unsigned gpu, memory;
};
struct ProcessInfo {
  unsigned pid;
  unsigned long long usedGpuMemory;
  unsigned gpuInstanceId, computeInstanceId;
};
static_assert(sizeof(ProcessInfo) == 24, "nvmlProcessInfo_t");
constexpr unsigned long long kNotAvailable = ~0ull;

void* g_nvml = nullptr;

template <typename Fn>
Fn Get(const char* name) {
  Fn fn = reinterpret_cast<Fn>(dlsym(g_nvml, name));
  if (fn == nullptr) {
    fprintf(stderr, "libnvidia-ml.so.1 lacks %s\n", name);
    exit(1);
  }
  return fn;
}

#define NVML(name, ...) Get<nvmlReturn_t (*)(__VA_ARGS__)>(#name)
#define EXPECT_NVML(want, call)                                                            \
  do {                                                                                     \
    const nvmlReturn_t got_ = (call);                                                      \
    if (got_ != (want)) {                                                                  \
      fprintf(stderr, "%s:%d: %s returned %d, want %d\n", __FILE__, __LINE__, #call, got_, \
              (want));                                                                     \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

std::string UuidText(const CUuuid& u) {
  std::string text = "GPU-";
  char hex[3];
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    snprintf(hex, sizeof hex, "%02x", static_cast<unsigned char>(u.bytes[i]));
    text += hex;
  }
  return text;
}

// The pid's entry among the device's compute processes, or false.
bool FindProcess(nvmlDevice_t d, unsigned pid, ProcessInfo* found) {
  auto processes =
      NVML(nvmlDeviceGetComputeRunningProcesses_v3, nvmlDevice_t, unsigned*, ProcessInfo*);
  unsigned count = 0;
  const nvmlReturn_t r = processes(d, &count, nullptr);
  if (r == kSuccess) return false;  // none
  EXPECT_TRUE(r == kInsufficientSize && count > 0);
  std::vector<ProcessInfo> infos(count);
  EXPECT_NVML(kSuccess, processes(d, &count, infos.data()));
  for (unsigned i = 0; i < count; ++i) {
    if (infos[i].pid == pid) {
      *found = infos[i];
      return true;
    }
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const bool metered = argc > 1 && strcmp(argv[1], "metered") == 0;
  g_nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (g_nvml == nullptr) {
    fprintf(stderr, "cannot load libnvidia-ml.so.1: %s\n", dlerror());
    return 1;
  }
  auto error_string = Get<const char* (*)(nvmlReturn_t)>("nvmlErrorString");
  EXPECT_TRUE(strcmp(error_string(kNotSupported), "Not Supported") == 0);
  unsigned count = 0;
  EXPECT_NVML(kUninitialized, NVML(nvmlDeviceGetCount_v2, unsigned*)(&count));
  EXPECT_NVML(kSuccess, NVML(nvmlInit_v2, void)());
  CHECK(cuInit(0));
  int cuda_count = 0;
  CHECK(cuDeviceGetCount(&cuda_count));
  EXPECT_NVML(kSuccess, NVML(nvmlDeviceGetCount_v2, unsigned*)(&count));
  EXPECT_TRUE(count == static_cast<unsigned>(cuda_count));
  int nvml_cuda = 0, cuda_version = 0;
  EXPECT_NVML(kSuccess, NVML(nvmlSystemGetCudaDriverVersion_v2, int*)(&nvml_cuda));
  CHECK(cuDriverGetVersion(&cuda_version));
  EXPECT_TRUE(nvml_cuda == cuda_version);

  auto by_index = NVML(nvmlDeviceGetHandleByIndex_v2, unsigned, nvmlDevice_t*);
  std::vector<nvmlDevice_t> handles(count);
  std::vector<CUcontext> contexts(count);
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t d;
    EXPECT_NVML(kSuccess, by_index(i, &d));
    handles[i] = d;
    CUdevice dev;
    CHECK(cuDeviceGet(&dev, static_cast<int>(i)));
    unsigned index = 99;
    EXPECT_NVML(kSuccess, NVML(nvmlDeviceGetIndex, nvmlDevice_t, unsigned*)(d, &index));
    EXPECT_TRUE(index == i);

    char name[96], cuda_name[96];
    EXPECT_NVML(kSuccess, NVML(nvmlDeviceGetName, nvmlDevice_t, char*, unsigned)(d, name, 96));
    CHECK(cuDeviceGetName(cuda_name, sizeof cuda_name, dev));
    EXPECT_TRUE(strcmp(name, cuda_name) == 0);
    EXPECT_NVML(kInsufficientSize,
                NVML(nvmlDeviceGetName, nvmlDevice_t, char*, unsigned)(d, name, 1));

    char uuid[96];
    EXPECT_NVML(kSuccess, NVML(nvmlDeviceGetUUID, nvmlDevice_t, char*, unsigned)(d, uuid, 96));
    CUuuid cuda_uuid;
    CHECK(cuDeviceGetUuid_v2(&cuda_uuid, dev));
    EXPECT_TRUE(UuidText(cuda_uuid) == uuid);
    nvmlDevice_t found = nullptr;
    EXPECT_NVML(kSuccess,
                NVML(nvmlDeviceGetHandleByUUID, const char*, nvmlDevice_t*)(uuid, &found));
    EXPECT_TRUE(found == d);

    PciInfo pci;
    EXPECT_NVML(kSuccess, NVML(nvmlDeviceGetPciInfo_v3, nvmlDevice_t, PciInfo*)(d, &pci));
    char cuda_bus[32];
    CHECK(cuDeviceGetPCIBusId(cuda_bus, sizeof cuda_bus, dev));
    unsigned domain = 0, bus = 0, device = 0;
    EXPECT_TRUE(sscanf(cuda_bus, "%x:%x:%x", &domain, &bus, &device) == 3);
    int attr_bus = 0, attr_device = 0, attr_domain = 0;
    CHECK(cuDeviceGetAttribute(&attr_bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev));
    CHECK(cuDeviceGetAttribute(&attr_device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev));
    CHECK(cuDeviceGetAttribute(&attr_domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev));
    EXPECT_TRUE(pci.domain == domain && pci.bus == bus && pci.device == device);
    EXPECT_TRUE(pci.bus == static_cast<unsigned>(attr_bus) &&
                pci.device == static_cast<unsigned>(attr_device) &&
                pci.domain == static_cast<unsigned>(attr_domain));
    auto by_bus = NVML(nvmlDeviceGetHandleByPciBusId_v2, const char*, nvmlDevice_t*);
    const char* forms[] = {cuda_bus, pci.busId, pci.busIdLegacy};
    for (const char* id : forms) {
      found = nullptr;
      EXPECT_NVML(kSuccess, by_bus(id, &found));
      EXPECT_TRUE(found == d);
    }

    int major = 0, minor = 0, cuda_major = 0, cuda_minor = 0;
    EXPECT_NVML(kSuccess, NVML(nvmlDeviceGetCudaComputeCapability, nvmlDevice_t, int*, int*)(
                              d, &major, &minor));
    CHECK(cuDeviceGetAttribute(&cuda_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    CHECK(cuDeviceGetAttribute(&cuda_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    EXPECT_TRUE(major == cuda_major && minor == cuda_minor);

    unsigned mhz = 0;
    int khz = 0;
    CHECK(cuDeviceGetAttribute(&khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev));
    const nvmlReturn_t clock_r =
        NVML(nvmlDeviceGetMaxClockInfo, nvmlDevice_t, int, unsigned*)(d, 1 /* SM */, &mhz);
    if (khz > 0) {
      EXPECT_TRUE(clock_r == kSuccess && mhz == static_cast<unsigned>(khz / 1000));
    } else {
      EXPECT_TRUE(clock_r == kNotSupported);
    }

    unsigned current = 1, pending = 1;
    EXPECT_NVML(kSuccess, NVML(nvmlDeviceGetMigMode, nvmlDevice_t, unsigned*, unsigned*)(
                              d, &current, &pending));
    EXPECT_TRUE(current == 0 && pending == 0);
    // A GPU's sensor (the server's NVML) or none (the software GPU): never a made-up reading.
    unsigned temperature = 0;
    const nvmlReturn_t temperature_r =
        NVML(nvmlDeviceGetTemperature, nvmlDevice_t, int, unsigned*)(d, 0, &temperature);
    EXPECT_TRUE(temperature_r == kNotSupported ||
                (temperature_r == kSuccess && temperature > 0 && temperature < 120));
  }
  // Peer access between each pair, as CUDA says it (a device is not its own peer).
  auto p2p = NVML(nvmlDeviceGetP2PStatus, nvmlDevice_t, nvmlDevice_t, int, int*);
  for (unsigned i = 0; i < count; ++i) {
    for (unsigned j = 0; j < count; ++j) {
      int can = 0, read = -1, nvlink = -1;
      CHECK(cuDeviceCanAccessPeer(&can, static_cast<int>(i), static_cast<int>(j)));
      EXPECT_NVML(kSuccess, p2p(handles[i], handles[j], 0 /* READ */, &read));
      EXPECT_NVML(kSuccess, p2p(handles[i], handles[j], 2 /* NVLINK */, &nvlink));
      EXPECT_TRUE(read == (can ? 0 /* OK */ : 5 /* NOT_SUPPORTED */) && nvlink == 5);
    }
  }
  nvmlDevice_t bad = nullptr;
  EXPECT_NVML(kInvalidArgument, by_index(count, &bad));
  char name[96];
  EXPECT_NVML(kInvalidArgument, NVML(nvmlDeviceGetName, nvmlDevice_t, char*, unsigned)(
                                    reinterpret_cast<nvmlDevice_t>(&count), name, 96));

  // Memory and processes, device by device: a context and 64 MiB on each in turn.
  auto memory_v2 = NVML(nvmlDeviceGetMemoryInfo_v2, nvmlDevice_t, MemoryV2*);
  auto memory_v1 = NVML(nvmlDeviceGetMemoryInfo, nvmlDevice_t, Memory*);
  const unsigned long long kBytes = 64ull << 20;
  std::vector<CUdeviceptr> held(count);
  std::vector<unsigned long long> used_after(count);
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t d = handles[i];
    CUdevice dev;
    CHECK(cuDeviceGet(&dev, static_cast<int>(i)));
    CHECK(cuCtxCreate(&contexts[i], nullptr, 0, dev));
    MemoryV2 before = {};
    before.version = kMemoryV2;
    EXPECT_NVML(kSuccess, memory_v2(d, &before));
    size_t cuda_free = 0, cuda_total = 0;
    CHECK(cuMemGetInfo(&cuda_free, &cuda_total));
    EXPECT_TRUE(before.total == cuda_total);
    EXPECT_TRUE(before.free == before.total - before.used && before.reserved == 0);
    CHECK(cuMemAlloc(&held[i], kBytes));
    MemoryV2 after = {};
    after.version = kMemoryV2;
    EXPECT_NVML(kSuccess, memory_v2(d, &after));
    EXPECT_TRUE(after.total == before.total);
    // The server counts what a session holds on each device: exact on this one, and the
    // devices before it hold what they held.
    EXPECT_TRUE(after.used - before.used == kBytes);
    used_after[i] = after.used;
    for (unsigned j = 0; j < i; ++j) {
      MemoryV2 earlier = {};
      earlier.version = kMemoryV2;
      EXPECT_NVML(kSuccess, memory_v2(handles[j], &earlier));
      EXPECT_TRUE(earlier.used == used_after[j]);
    }
    Memory v1;
    EXPECT_NVML(kSuccess, memory_v1(d, &v1));
    EXPECT_TRUE(v1.total == after.total && v1.used == after.used && v1.free == after.free);
    MemoryV2 wrong = {};
    wrong.version = 1;
    EXPECT_NVML(kVersionMismatch, memory_v2(d, &wrong));

    ProcessInfo self;
    EXPECT_TRUE(FindProcess(d, static_cast<unsigned>(getpid()), &self));
    // The program's memory on this device: what it holds there (its other devices' apart).
    EXPECT_TRUE(self.usedGpuMemory >= kBytes && self.usedGpuMemory != kNotAvailable);
    EXPECT_TRUE(self.usedGpuMemory <= after.used);
    EXPECT_TRUE(self.gpuInstanceId == 0xFFFFFFFFu && self.computeInstanceId == 0xFFFFFFFFu);
    CHECK(cuCtxPopCurrent(nullptr));
  }

  // Utilization: a busy kernel on device 0, then the device's share of time.
  auto utilization = NVML(nvmlDeviceGetUtilizationRates, nvmlDevice_t, Utilization*);
  Utilization u = {};
  if (!metered) {
    EXPECT_NVML(kNotSupported, utilization(handles[0], &u));
  } else {
    CHECK(cuCtxPushCurrent(contexts[0]));
    EXPECT_NVML(kSuccess, utilization(handles[0], &u));  // the first sample
    std::string image = ReadFile(RGPU_KERNELS_FATBIN);
    CUmodule module;
    CHECK(cuModuleLoadData(&module, image.data()));
    CUfunction spin;
    CHECK(cuModuleGetFunction(&spin, module, "spin"));
    CUdeviceptr out;
    CHECK(cuMemAlloc(&out, 4));
    int iters = 2000000;
    void* args[] = {&iters, &out};
    for (int k = 0; k < 3; ++k) {
      CHECK(cuLaunchKernel(spin, 4, 1, 1, 64, 1, 1, 0, nullptr, args, nullptr));
    }
    CHECK(cuCtxSynchronize());
    EXPECT_NVML(kSuccess, utilization(handles[0], &u));
    EXPECT_TRUE(u.gpu > 0 && u.gpu <= 100 && u.memory <= 100);
    CHECK(cuMemFree(out));
    CHECK(cuModuleUnload(module));
    CHECK(cuCtxPopCurrent(nullptr));
  }

  for (unsigned i = 0; i < count; ++i) {
    CHECK(cuCtxPushCurrent(contexts[i]));
    CHECK(cuMemFree(held[i]));
    CHECK(cuCtxPopCurrent(nullptr));
    CHECK(cuCtxDestroy(contexts[i]));
  }
  ProcessInfo gone;
  EXPECT_TRUE(!FindProcess(handles[0], static_cast<unsigned>(getpid()), &gone));
  EXPECT_NVML(kSuccess, NVML(nvmlShutdown, void)());
  EXPECT_NVML(kUninitialized, NVML(nvmlShutdown, void)());
  printf("nvml_check: OK (%u devices%s)\n", count, metered ? ", metered" : "");
  return 0;
}
