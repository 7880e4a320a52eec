// The HIP 5.2 runtime ABI that rgpu implements: the types, constants and structure layouts its
// entry points take, written from HIP 5.2's public headers (hip_runtime_api.h, driver_types.h).
// Declared here rather than included so that rgpu builds without ROCm; abi_check.cc compares every
// value and layout below with the installed headers where they exist.
// Handles are the CUDA driver's (hipStream_t is a CUstream, ...): the runtime passes them through.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace rgpu::hip {

// hipError_t: the values HIP 5.2 defines (error_codes.def lists them with their names).
enum Error : int {
#define HIP_ERROR(name, value, text) name = value,
#include "interpose/hip/error_codes.def"
#undef HIP_ERROR
};

// hiprtcResult values the fallbacks return.
constexpr int kHiprtcErrorInternal = 11;

struct Dim3 {
  uint32_t x, y, z;
};

// hipMemcpyKind.
enum MemcpyKind : int {
  kHostToHost = 0,
  kHostToDevice = 1,
  kDeviceToHost = 2,
  kDeviceToDevice = 3,
  kDefault = 4,
};

// hipHostMalloc / hipHostRegister flags.
constexpr unsigned kHostMallocPortable = 0x1;
constexpr unsigned kHostMallocMapped = 0x2;
constexpr unsigned kHostMallocWriteCombined = 0x4;
constexpr unsigned kHostMallocNumaUser = 0x20000000;
constexpr unsigned kHostMallocCoherent = 0x40000000;
constexpr unsigned kHostMallocNonCoherent = 0x80000000;
constexpr unsigned kHostRegisterPortable = 0x1;
constexpr unsigned kHostRegisterMapped = 0x2;
constexpr unsigned kHostRegisterIoMemory = 0x4;
constexpr unsigned kExtHostRegisterCoarseGrained = 0x8;

// Stream and event flags.
constexpr unsigned kStreamNonBlocking = 0x1;
constexpr unsigned kEventBlockingSync = 0x1;
constexpr unsigned kEventDisableTiming = 0x2;
constexpr unsigned kEventInterprocess = 0x4;

// hipModuleLaunchKernel's `extra` keys.
inline void* const kLaunchParamBufferPointer = reinterpret_cast<void*>(0x01);
inline void* const kLaunchParamBufferSize = reinterpret_cast<void*>(0x02);
inline void* const kLaunchParamEnd = reinterpret_cast<void*>(0x03);

// hipDeviceAttribute_t: the CUDA-compatible block is numbered from 0 in declaration order.
enum DeviceAttribute : int {
#define HIP_ATTRIBUTE(name, value, cu) name = value,
#include "interpose/hip/device_attributes.def"
#undef HIP_ATTRIBUTE
};

// hipDeviceProp_t of HIP 5.2 (hipGetDeviceProperties). `arch` is hipDeviceArch_t, a word of
// one-bit feature flags.
struct DeviceProp {
  char name[256];
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  int regsPerBlock;
  int warpSize;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int clockRate;
  int memoryClockRate;
  int memoryBusWidth;
  size_t totalConstMem;
  int major;
  int minor;
  int multiProcessorCount;
  int l2CacheSize;
  int maxThreadsPerMultiProcessor;
  int computeMode;
  int clockInstructionRate;
  uint32_t arch;
  int concurrentKernels;
  int pciDomainID;
  int pciBusID;
  int pciDeviceID;
  size_t maxSharedMemoryPerMultiProcessor;
  int isMultiGpuBoard;
  int canMapHostMemory;
  int gcnArch;
  char gcnArchName[256];
  int integrated;
  int cooperativeLaunch;
  int cooperativeMultiDeviceLaunch;
  int maxTexture1DLinear;
  int maxTexture1D;
  int maxTexture2D[2];
  int maxTexture3D[3];
  unsigned int* hdpMemFlushCntl;
  unsigned int* hdpRegFlushCntl;
  size_t memPitch;
  size_t textureAlignment;
  size_t texturePitchAlignment;
  int kernelExecTimeoutEnabled;
  int ECCEnabled;
  int tccDriver;
  int cooperativeMultiDeviceUnmatchedFunc;
  int cooperativeMultiDeviceUnmatchedGridDim;
  int cooperativeMultiDeviceUnmatchedBlockDim;
  int cooperativeMultiDeviceUnmatchedSharedMem;
  int isLargeBar;
  int asicRevision;
  int managedMemory;
  int directManagedMemAccessFromHost;
  int concurrentManagedAccess;
  int pageableMemoryAccess;
  int pageableMemoryAccessUsesHostPageTables;
};

// hipChannelFormatDesc (hipCreateChannelDesc returns it by value).
struct ChannelFormatDesc {
  int x, y, z, w;
  int f;  // hipChannelFormatKind
};

// hipMemoryType, as hipPointerGetAttributes reports it.
enum MemoryType : int {
  kMemoryTypeHost = 0,
  kMemoryTypeDevice = 1,
  kMemoryTypeArray = 2,
  kMemoryTypeUnified = 3,
};

// hipPointerAttribute_t.
struct PointerAttribute {
  int memoryType;  // MemoryType
  int device;
  void* devicePointer;
  void* hostPointer;
  int isManaged;
  unsigned allocationFlags;
};

// hipFuncAttributes (hipFuncGetAttributes).
struct FuncAttributes {
  int binaryVersion;
  int cacheModeCA;
  size_t constSizeBytes;
  size_t localSizeBytes;
  int maxDynamicSharedSizeBytes;
  int maxThreadsPerBlock;
  int numRegs;
  int preferredShmemCarveout;
  int ptxVersion;
  size_t sharedSizeBytes;
};

// hipPitchedPtr, hipExtent, hipPos and hipMemcpy3DParms (3D allocations and copies).
struct PitchedPtr {
  void* ptr;
  size_t pitch;
  size_t xsize;
  size_t ysize;
};
struct Extent {
  size_t width;  // bytes, for linear memory
  size_t height;
  size_t depth;
};
struct Pos {
  size_t x, y, z;
};
struct Memcpy3DParms {
  void* srcArray;  // hipArray_t: arrays are not supported
  Pos srcPos;
  PitchedPtr srcPtr;
  void* dstArray;
  Pos dstPos;
  PitchedPtr dstPtr;
  Extent extent;
  int kind;  // MemcpyKind
};

// The wrapper hipcc places in .hipFatBinSegment and passes to __hipRegisterFatBinary.
struct FatBinaryWrapper {
  uint32_t magic;  // kFatBinaryMagic
  uint32_t version;
  const void* binary;  // a clang offload bundle
  void* reserved;
};
constexpr uint32_t kFatBinaryMagic = 0x48495046;  // "HIPF"

}  // namespace rgpu::hip
