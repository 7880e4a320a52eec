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
// Managed memory (hipMallocManaged, hipMemAdvise, hipMemRangeGetAttribute): HIP's values, which
// follow CUDA's (abi_check.cc).
constexpr unsigned kMemAttachGlobal = 0x1;
constexpr unsigned kMemAttachHost = 0x2;
constexpr unsigned kMemAttachSingle = 0x4;
constexpr int kCpuDeviceId = -1;
constexpr int kMemAdviseSetReadMostly = 1;
constexpr int kMemAdviseUnsetAccessedBy = 6;
constexpr int kMemRangeAttributeReadMostly = 1;
constexpr int kMemRangeAttributeLastPrefetchLocation = 4;
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
struct Array;  // hipArray, below
struct Memcpy3DParms {
  Array* srcArray;
  Pos srcPos;
  PitchedPtr srcPtr;
  Array* dstArray;
  Pos dstPos;
  PitchedPtr dstPtr;
  Extent extent;
  int kind;  // MemcpyKind
};

// Memory pools and virtual memory management: where memory lives, who may access it, and how
// it is made. hipMemLocationType, hipMemAccessFlags, hipMemAllocationType,
// hipMemAllocationHandleType, hipMemPoolAttr and hipMemAllocationGranularity_flags have the
// driver's values; hipMemPoolProps and hipMemAllocationProp are laid out differently from the
// driver's structures and are translated.
struct MemLocation {
  int type;  // hipMemLocationType: kMemLocationTypeDevice
  int id;
};
struct MemAccessDesc {
  MemLocation location;
  int flags;  // hipMemAccessFlags
};
struct MemPoolProps {
  int allocType;    // hipMemAllocationType
  int handleTypes;  // hipMemAllocationHandleType
  MemLocation location;
  void* win32SecurityAttributes;
  unsigned char reserved[64];
};
struct MemAllocationProp {
  unsigned char compressionType;
  MemLocation location;
  int requestedHandleType;  // hipMemAllocationHandleType
  int type;                 // hipMemAllocationType
  unsigned short usage;
  void* win32HandleMetaData;
};
constexpr int kMemLocationTypeDevice = 1;
constexpr int kMemAllocationTypePinned = 1;
constexpr int kMemHandleTypeNone = 0;
constexpr int kMemHandleTypePosixFileDescriptor = 1;

// hipIpcMemHandle_t, hipIpcEventHandle_t and hipMemPoolPtrExportData: 64 opaque bytes, as the
// driver's handles are.
struct OpaqueHandle {
  char reserved[64];
};
constexpr unsigned kIpcMemLazyEnablePeerAccess = 0;  // hipIpcMemLazyEnablePeerAccess

// Graphs built node by node. hipHostNodeParams is the driver's CUDA_HOST_NODE_PARAMS; kernel and
// memset parameters are laid out differently and translated; a kernel node's `func` is the host
// stub of a registered kernel, as hipLaunchKernel takes it.
struct HostNodeParams {
  void (*fn)(void*);
  void* userData;
};
struct KernelNodeParams {
  Dim3 blockDim;
  void** extra;
  void* func;
  Dim3 gridDim;
  void** kernelParams;
  unsigned int sharedMemBytes;
};
struct MemsetParams {
  void* dst;
  unsigned int elementSize;
  size_t height;
  size_t pitch;
  unsigned int value;
  size_t width;
};
// hipGraphNodeType of HIP 5.2: numbered from 1 (the driver's from 0).
enum GraphNodeType : int {
  kGraphNodeTypeKernel = 1,
  kGraphNodeTypeMemcpy = 2,
  kGraphNodeTypeMemset = 3,
  kGraphNodeTypeHost = 4,
  kGraphNodeTypeGraph = 5,
  kGraphNodeTypeEmpty = 6,
  kGraphNodeTypeWaitEvent = 7,
  kGraphNodeTypeEventRecord = 8,
  kGraphNodeTypeCount = 12,
};

// Arrays. HIP hands programs a hipArray structure; rgpu's carries the driver's CUarray in `data`
// (HIP's own keeps its memory object there) and describes the array in the other fields.
// hipArray_Format has the driver's CUarray_format values; the array flags are the driver's
// CUDA_ARRAY3D_* flags.
enum ChannelFormatKind : int {
  kChannelFormatKindSigned = 0,
  kChannelFormatKindUnsigned = 1,
  kChannelFormatKindFloat = 2,
  kChannelFormatKindNone = 3,
};
struct ArrayDescriptor {  // HIP_ARRAY_DESCRIPTOR
  size_t Width;
  size_t Height;
  int Format;  // hipArray_Format
  unsigned int NumChannels;
};
struct Array3DDescriptor {  // HIP_ARRAY3D_DESCRIPTOR
  size_t Width;
  size_t Height;
  size_t Depth;
  int Format;  // hipArray_Format
  unsigned int NumChannels;
  unsigned int Flags;
};
struct Array {  // hipArray
  void* data;
  ChannelFormatDesc desc;
  unsigned int type;
  unsigned int width;
  unsigned int height;
  unsigned int depth;
  int Format;  // hipArray_Format
  unsigned int NumChannels;
  bool isDrv;
  unsigned int textureType;
};
constexpr unsigned kArrayFlagsKnown = 0x1 | 0x2 | 0x4 | 0x8;  // layered, surface, cubemap, gather

// The wrapper hipcc places in .hipFatBinSegment and passes to __hipRegisterFatBinary.
struct FatBinaryWrapper {
  uint32_t magic;  // kFatBinaryMagic
  uint32_t version;
  const void* binary;  // a clang offload bundle
  void* reserved;
};
constexpr uint32_t kFatBinaryMagic = 0x48495046;  // "HIPF"

}  // namespace rgpu::hip
