// Device query: cudaGetDeviceCount, cudaGetDeviceProperties (name non-empty, sane limits), the
// same values through cudaDeviceGetAttribute, versions, PCI bus id round trip, and a kernel
// launched with the largest block the device reports.
#include "rt_check.h"

#include <cstring>

__global__ void WriteIndex(int* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = i * 3 + (int)gridDim.x;
}

static int Attr(cudaDeviceAttr attr, int dev) {
  int value = -1;
  CHECK(cudaDeviceGetAttribute(&value, attr, dev));
  return value;
}

int main() {
  int runtime = 0, driver = 0;
  CHECK(cudaRuntimeGetVersion(&runtime));
  CHECK(cudaDriverGetVersion(&driver));
  EXPECT(runtime >= 13000, "runtime version %d", runtime);
  EXPECT(driver >= runtime, "driver version %d older than runtime %d", driver, runtime);

  int count = 0;
  CHECK(cudaGetDeviceCount(&count));
  EXPECT(count >= 1, "device count %d", count);
  CHECK(cudaSetDevice(0));
  int current = -1;
  CHECK(cudaGetDevice(&current));
  EXPECT(current == 0, "current device %d", current);

  for (int dev = 0; dev < count; ++dev) {
    cudaDeviceProp p;
    memset(&p, 0, sizeof p);
    CHECK(cudaGetDeviceProperties(&p, dev));
    EXPECT(strnlen(p.name, sizeof p.name) > 0, "device %d has an empty name", dev);
    EXPECT(strnlen(p.name, sizeof p.name) < sizeof p.name, "name not NUL-terminated");
    EXPECT(p.totalGlobalMem > (size_t)0, "totalGlobalMem 0");
    EXPECT(p.major >= 7 && (p.major > 7 || p.minor >= 5), "compute capability %d.%d < 7.5", p.major,
           p.minor);
    EXPECT(p.warpSize == 32, "warpSize %d", p.warpSize);
    EXPECT(p.maxThreadsPerBlock >= 512 && p.maxThreadsPerBlock <= 4096, "maxThreadsPerBlock %d",
           p.maxThreadsPerBlock);
    EXPECT(p.maxThreadsDim[0] >= 512 && p.maxThreadsDim[1] >= 512 && p.maxThreadsDim[2] >= 1,
           "maxThreadsDim %d %d %d", p.maxThreadsDim[0], p.maxThreadsDim[1], p.maxThreadsDim[2]);
    EXPECT(p.maxGridSize[0] >= 65535 && p.maxGridSize[1] >= 65535 && p.maxGridSize[2] >= 65535,
           "maxGridSize %d %d %d", p.maxGridSize[0], p.maxGridSize[1], p.maxGridSize[2]);
    EXPECT(p.multiProcessorCount >= 1, "multiProcessorCount %d", p.multiProcessorCount);
    EXPECT(p.sharedMemPerBlock >= 16 * 1024, "sharedMemPerBlock %zu", p.sharedMemPerBlock);
    EXPECT(p.sharedMemPerBlockOptin >= p.sharedMemPerBlock, "sharedMemPerBlockOptin %zu < %zu",
           p.sharedMemPerBlockOptin, p.sharedMemPerBlock);
    EXPECT(p.sharedMemPerMultiprocessor >= p.sharedMemPerBlock, "sharedMemPerMultiprocessor %zu",
           p.sharedMemPerMultiprocessor);
    EXPECT(p.regsPerBlock > 0 && p.regsPerMultiprocessor >= p.regsPerBlock,
           "regsPerBlock %d regsPerMultiprocessor %d", p.regsPerBlock, p.regsPerMultiprocessor);
    EXPECT(p.totalConstMem >= 64 * 1024, "totalConstMem %zu", p.totalConstMem);
    EXPECT(p.maxThreadsPerMultiProcessor >= p.maxThreadsPerBlock, "maxThreadsPerMultiProcessor %d",
           p.maxThreadsPerMultiProcessor);
    EXPECT(p.maxBlocksPerMultiProcessor >= 1, "maxBlocksPerMultiProcessor %d",
           p.maxBlocksPerMultiProcessor);
    EXPECT(p.unifiedAddressing == 1, "unifiedAddressing %d", p.unifiedAddressing);
    EXPECT(p.memPitch > 0 && p.textureAlignment > 0, "memPitch %zu textureAlignment %zu",
           p.memPitch, p.textureAlignment);

    // The same facts through cudaDeviceGetAttribute.
    EXPECT(Attr(cudaDevAttrComputeCapabilityMajor, dev) == p.major, "major differs");
    EXPECT(Attr(cudaDevAttrComputeCapabilityMinor, dev) == p.minor, "minor differs");
    EXPECT(Attr(cudaDevAttrMultiProcessorCount, dev) == p.multiProcessorCount, "SM count differs");
    EXPECT(Attr(cudaDevAttrMaxThreadsPerBlock, dev) == p.maxThreadsPerBlock, "threads differ");
    EXPECT(Attr(cudaDevAttrMaxBlockDimX, dev) == p.maxThreadsDim[0], "block dim x differs");
    EXPECT(Attr(cudaDevAttrMaxBlockDimY, dev) == p.maxThreadsDim[1], "block dim y differs");
    EXPECT(Attr(cudaDevAttrMaxBlockDimZ, dev) == p.maxThreadsDim[2], "block dim z differs");
    EXPECT(Attr(cudaDevAttrMaxGridDimX, dev) == p.maxGridSize[0], "grid dim x differs");
    EXPECT(Attr(cudaDevAttrMaxGridDimY, dev) == p.maxGridSize[1], "grid dim y differs");
    EXPECT(Attr(cudaDevAttrMaxGridDimZ, dev) == p.maxGridSize[2], "grid dim z differs");
    EXPECT(Attr(cudaDevAttrWarpSize, dev) == p.warpSize, "warp size differs");
    EXPECT((size_t)Attr(cudaDevAttrMaxSharedMemoryPerBlock, dev) == p.sharedMemPerBlock,
           "shared memory per block differs");
    EXPECT((size_t)Attr(cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) == p.sharedMemPerBlockOptin,
           "opt-in shared memory differs");
    EXPECT(Attr(cudaDevAttrMaxRegistersPerBlock, dev) == p.regsPerBlock, "registers differ");
    EXPECT((size_t)Attr(cudaDevAttrTotalConstantMemory, dev) == p.totalConstMem,
           "constant memory differs");
    EXPECT(Attr(cudaDevAttrMaxThreadsPerMultiProcessor, dev) == p.maxThreadsPerMultiProcessor,
           "threads per SM differ");
    EXPECT(Attr(cudaDevAttrL2CacheSize, dev) == p.l2CacheSize, "L2 size differs");
    EXPECT(Attr(cudaDevAttrPciBusId, dev) == p.pciBusID, "PCI bus differs");
    EXPECT(Attr(cudaDevAttrPciDeviceId, dev) == p.pciDeviceID, "PCI device differs");
    EXPECT(Attr(cudaDevAttrPciDomainId, dev) == p.pciDomainID, "PCI domain differs");
    EXPECT(Attr(cudaDevAttrUnifiedAddressing, dev) == p.unifiedAddressing, "UVA differs");
    EXPECT(Attr(cudaDevAttrConcurrentKernels, dev) == p.concurrentKernels, "concurrency differs");
    EXPECT(Attr(cudaDevAttrAsyncEngineCount, dev) == p.asyncEngineCount, "copy engines differ");
  }

  // The device runs a block of the maximum size it reports.
  cudaDeviceProp p;
  CHECK(cudaGetDeviceProperties(&p, 0));
  const int block = p.maxThreadsPerBlock > 1024 ? 1024 : p.maxThreadsPerBlock;
  const int grid = 4, n = grid * block;
  int* d = nullptr;
  CHECK(cudaMalloc(&d, n * sizeof(int)));
  WriteIndex<<<grid, block>>>(d);
  CHECK_SYNC();
  int* h = new int[n];
  CHECK(cudaMemcpy(h, d, n * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) EXPECT(h[i] == i * 3 + grid, "out[%d] = %d", i, h[i]);
  delete[] h;
  CHECK(cudaFree(d));

  // PCI bus id string round trip.
  for (int dev = 0; dev < count; ++dev) {
    // PCI bus id string round trip.
    char bus[64] = {0};
    CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, dev));
    EXPECT(strlen(bus) > 0, "empty PCI bus id");
    int found = -1;
    CHECK(cudaDeviceGetByPCIBusId(&found, bus));
    EXPECT(found == dev, "bus id %s maps to device %d, not %d", bus, found, dev);
  }
  printf("rt_device_query: OK (%d device(s), %s, cc %d.%d, %d SMs)\n", count, p.name, p.major,
         p.minor, p.multiProcessorCount);
  return 0;
}
