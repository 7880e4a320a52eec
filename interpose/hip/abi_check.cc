// Compile-time proof that hip_types.h matches the installed HIP headers: every error value,
// device attribute value and hipDeviceProp_t field offset. Built where the headers exist.
#include <hip/hip_runtime_api.h>
#include <stddef.h>

#include "interpose/hip/hip_types.h"

// The driver's limits, by value (cuda.h is not included here).
constexpr int CU_LIMIT_PRINTF_FIFO_SIZE_VALUE = 0x01;
constexpr int CU_LIMIT_MALLOC_HEAP_SIZE_VALUE = 0x02;

namespace h = rgpu::hip;

#define HIP_ERROR(name, value, text) \
  static_assert(static_cast<int>(::name) == value, #name " differs from HIP's");
#include "interpose/hip/error_codes.def"
#undef HIP_ERROR

#define HIP_ATTRIBUTE(name, value, cu) \
  static_assert(static_cast<int>(::name) == value, #name " differs from HIP's");
#include "interpose/hip/device_attributes.def"
#undef HIP_ATTRIBUTE

static_assert(sizeof(h::DeviceProp) == sizeof(hipDeviceProp_t));
#define SAME_OFFSET(field) \
  static_assert(offsetof(h::DeviceProp, field) == offsetof(hipDeviceProp_t, field), #field);
SAME_OFFSET(totalGlobalMem)
SAME_OFFSET(regsPerBlock)
SAME_OFFSET(maxThreadsDim)
SAME_OFFSET(totalConstMem)
SAME_OFFSET(major)
SAME_OFFSET(clockInstructionRate)
SAME_OFFSET(arch)
SAME_OFFSET(concurrentKernels)
SAME_OFFSET(maxSharedMemoryPerMultiProcessor)
SAME_OFFSET(gcnArch)
SAME_OFFSET(gcnArchName)
SAME_OFFSET(integrated)
SAME_OFFSET(maxTexture3D)
SAME_OFFSET(hdpMemFlushCntl)
SAME_OFFSET(memPitch)
SAME_OFFSET(kernelExecTimeoutEnabled)
SAME_OFFSET(isLargeBar)
SAME_OFFSET(pageableMemoryAccessUsesHostPageTables)
static_assert(sizeof(hipDeviceArch_t) == sizeof(uint32_t));
static_assert(sizeof(h::Dim3) == sizeof(dim3));
static_assert(sizeof(h::ChannelFormatDesc) == sizeof(hipChannelFormatDesc));
static_assert(sizeof(h::FatBinaryWrapper) == 24);
#define SAME_VALUE(hip, ours) \
  static_assert(static_cast<long>(hip) == static_cast<long>(ours), #hip);
SAME_VALUE(hipMemcpyHostToHost, h::kHostToHost)
SAME_VALUE(hipMemcpyHostToDevice, h::kHostToDevice)
SAME_VALUE(hipMemcpyDeviceToHost, h::kDeviceToHost)
SAME_VALUE(hipMemcpyDeviceToDevice, h::kDeviceToDevice)
SAME_VALUE(hipMemcpyDefault, h::kDefault)
static_assert(hipHostMallocPortable == h::kHostMallocPortable &&
              hipHostMallocMapped == h::kHostMallocMapped &&
              hipHostMallocWriteCombined == h::kHostMallocWriteCombined &&
              hipHostMallocNumaUser == h::kHostMallocNumaUser &&
              hipHostMallocCoherent == h::kHostMallocCoherent &&
              hipHostMallocNonCoherent == h::kHostMallocNonCoherent);
static_assert(hipHostRegisterPortable == h::kHostRegisterPortable &&
              hipHostRegisterMapped == h::kHostRegisterMapped &&
              hipHostRegisterIoMemory == h::kHostRegisterIoMemory &&
              hipExtHostRegisterCoarseGrained == h::kExtHostRegisterCoarseGrained);
static_assert(hipStreamNonBlocking == h::kStreamNonBlocking &&
              hipEventBlockingSync == h::kEventBlockingSync &&
              hipEventDisableTiming == h::kEventDisableTiming &&
              hipEventInterprocess == h::kEventInterprocess);
static_assert(sizeof(h::PointerAttribute) == sizeof(hipPointerAttribute_t));
static_assert(offsetof(h::PointerAttribute, allocationFlags) ==
              offsetof(hipPointerAttribute_t, allocationFlags));
static_assert(sizeof(h::FuncAttributes) == sizeof(hipFuncAttributes));
static_assert(offsetof(h::FuncAttributes, sharedSizeBytes) ==
              offsetof(hipFuncAttributes, sharedSizeBytes));
static_assert(offsetof(h::FuncAttributes, numRegs) == offsetof(hipFuncAttributes, numRegs));
SAME_VALUE(hipMemoryTypeHost, h::kMemoryTypeHost)
SAME_VALUE(hipMemoryTypeDevice, h::kMemoryTypeDevice)
SAME_VALUE(hipMemoryTypeUnified, h::kMemoryTypeUnified)
SAME_VALUE(hipLimitPrintfFifoSize, CU_LIMIT_PRINTF_FIFO_SIZE_VALUE)
SAME_VALUE(hipLimitMallocHeapSize, CU_LIMIT_MALLOC_HEAP_SIZE_VALUE)
SAME_VALUE(hipStreamCaptureModeGlobal, 0)
SAME_VALUE(hipStreamCaptureModeThreadLocal, 1)
SAME_VALUE(hipStreamCaptureModeRelaxed, 2)
SAME_VALUE(hipStreamCaptureStatusNone, 0)
SAME_VALUE(hipStreamCaptureStatusActive, 1)
SAME_VALUE(hipStreamCaptureStatusInvalidated, 2)
SAME_VALUE(hipFuncAttributeMaxDynamicSharedMemorySize, 8)
SAME_VALUE(hipFuncAttributePreferredSharedMemoryCarveout, 9)
SAME_VALUE(hipFuncCachePreferNone, 0)
SAME_VALUE(hipFuncCachePreferShared, 1)
SAME_VALUE(hipFuncCachePreferL1, 2)
SAME_VALUE(hipFuncCachePreferEqual, 3)
static_assert(sizeof(h::PitchedPtr) == sizeof(hipPitchedPtr));
static_assert(sizeof(h::Extent) == sizeof(hipExtent));
static_assert(sizeof(h::Memcpy3DParms) == sizeof(hipMemcpy3DParms));
static_assert(offsetof(h::Memcpy3DParms, dstPtr) == offsetof(hipMemcpy3DParms, dstPtr));
static_assert(offsetof(h::Memcpy3DParms, extent) == offsetof(hipMemcpy3DParms, extent));
static_assert(offsetof(h::Memcpy3DParms, kind) == offsetof(hipMemcpy3DParms, kind));
