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
SAME_VALUE(hipMemAttachGlobal, h::kMemAttachGlobal)
SAME_VALUE(hipMemAttachHost, h::kMemAttachHost)
SAME_VALUE(hipMemAttachSingle, h::kMemAttachSingle)
SAME_VALUE(hipCpuDeviceId, h::kCpuDeviceId)
SAME_VALUE(hipMemAdviseSetReadMostly, h::kMemAdviseSetReadMostly)
SAME_VALUE(hipMemAdviseUnsetAccessedBy, h::kMemAdviseUnsetAccessedBy)
SAME_VALUE(hipMemRangeAttributeReadMostly, h::kMemRangeAttributeReadMostly)
SAME_VALUE(hipMemRangeAttributeLastPrefetchLocation, h::kMemRangeAttributeLastPrefetchLocation)
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

// Memory pools, virtual memory management and IPC. The driver's values these must equal are
// asserted beside the code that relies on them (pool.cc, vmm.cc, peer_ipc.cc).
static_assert(sizeof(h::MemLocation) == sizeof(hipMemLocation));
static_assert(sizeof(h::MemAccessDesc) == sizeof(hipMemAccessDesc));
static_assert(offsetof(h::MemAccessDesc, flags) == offsetof(hipMemAccessDesc, flags));
static_assert(sizeof(h::MemPoolProps) == sizeof(hipMemPoolProps));
static_assert(offsetof(h::MemPoolProps, handleTypes) == offsetof(hipMemPoolProps, handleTypes));
static_assert(offsetof(h::MemPoolProps, location) == offsetof(hipMemPoolProps, location));
static_assert(offsetof(h::MemPoolProps, reserved) == offsetof(hipMemPoolProps, reserved));
static_assert(sizeof(h::MemAllocationProp) == sizeof(hipMemAllocationProp));
static_assert(offsetof(h::MemAllocationProp, location) == offsetof(hipMemAllocationProp, location));
static_assert(offsetof(h::MemAllocationProp, requestedHandleType) ==
              offsetof(hipMemAllocationProp, requestedHandleType));
static_assert(offsetof(h::MemAllocationProp, type) == offsetof(hipMemAllocationProp, type));
static_assert(offsetof(h::MemAllocationProp, usage) == offsetof(hipMemAllocationProp, usage));
static_assert(offsetof(h::MemAllocationProp, win32HandleMetaData) ==
              offsetof(hipMemAllocationProp, win32HandleMetaData));
static_assert(sizeof(h::OpaqueHandle) == sizeof(hipIpcMemHandle_t) &&
              sizeof(h::OpaqueHandle) == sizeof(hipIpcEventHandle_t) &&
              sizeof(h::OpaqueHandle) == sizeof(hipMemPoolPtrExportData));
SAME_VALUE(hipIpcMemLazyEnablePeerAccess, h::kIpcMemLazyEnablePeerAccess)
SAME_VALUE(hipMemLocationTypeDevice, h::kMemLocationTypeDevice)
SAME_VALUE(hipMemAllocationTypePinned, h::kMemAllocationTypePinned)
SAME_VALUE(hipMemHandleTypeNone, h::kMemHandleTypeNone)
SAME_VALUE(hipMemHandleTypePosixFileDescriptor, h::kMemHandleTypePosixFileDescriptor)
SAME_VALUE(hipMemHandleTypeWin32, 2)
SAME_VALUE(hipMemHandleTypeWin32Kmt, 4)
SAME_VALUE(hipMemAccessFlagsProtNone, 0)
SAME_VALUE(hipMemAccessFlagsProtRead, 1)
SAME_VALUE(hipMemAccessFlagsProtReadWrite, 3)
SAME_VALUE(hipMemPoolReuseFollowEventDependencies, 1)
SAME_VALUE(hipMemPoolReuseAllowOpportunistic, 2)
SAME_VALUE(hipMemPoolReuseAllowInternalDependencies, 3)
SAME_VALUE(hipMemPoolAttrReleaseThreshold, 4)
SAME_VALUE(hipMemPoolAttrReservedMemCurrent, 5)
SAME_VALUE(hipMemPoolAttrReservedMemHigh, 6)
SAME_VALUE(hipMemPoolAttrUsedMemCurrent, 7)
SAME_VALUE(hipMemPoolAttrUsedMemHigh, 8)
SAME_VALUE(hipMemAllocationGranularityMinimum, 0)
SAME_VALUE(hipMemAllocationGranularityRecommended, 1)
SAME_VALUE(hipDevP2PAttrPerformanceRank, 0)
SAME_VALUE(hipDevP2PAttrAccessSupported, 1)
SAME_VALUE(hipDevP2PAttrNativeAtomicSupported, 2)
SAME_VALUE(hipDevP2PAttrHipArrayAccessSupported, 3)

// Graphs built node by node.
static_assert(sizeof(h::HostNodeParams) == sizeof(hipHostNodeParams));
static_assert(offsetof(h::HostNodeParams, userData) == offsetof(hipHostNodeParams, userData));
static_assert(sizeof(h::KernelNodeParams) == sizeof(hipKernelNodeParams));
static_assert(offsetof(h::KernelNodeParams, extra) == offsetof(hipKernelNodeParams, extra));
static_assert(offsetof(h::KernelNodeParams, func) == offsetof(hipKernelNodeParams, func));
static_assert(offsetof(h::KernelNodeParams, gridDim) == offsetof(hipKernelNodeParams, gridDim));
static_assert(offsetof(h::KernelNodeParams, kernelParams) ==
              offsetof(hipKernelNodeParams, kernelParams));
static_assert(offsetof(h::KernelNodeParams, sharedMemBytes) ==
              offsetof(hipKernelNodeParams, sharedMemBytes));
static_assert(sizeof(h::MemsetParams) == sizeof(hipMemsetParams));
static_assert(offsetof(h::MemsetParams, elementSize) == offsetof(hipMemsetParams, elementSize));
static_assert(offsetof(h::MemsetParams, height) == offsetof(hipMemsetParams, height));
static_assert(offsetof(h::MemsetParams, pitch) == offsetof(hipMemsetParams, pitch));
static_assert(offsetof(h::MemsetParams, value) == offsetof(hipMemsetParams, value));
static_assert(offsetof(h::MemsetParams, width) == offsetof(hipMemsetParams, width));
SAME_VALUE(hipGraphNodeTypeKernel, h::kGraphNodeTypeKernel)
SAME_VALUE(hipGraphNodeTypeMemcpy, h::kGraphNodeTypeMemcpy)
SAME_VALUE(hipGraphNodeTypeMemset, h::kGraphNodeTypeMemset)
SAME_VALUE(hipGraphNodeTypeHost, h::kGraphNodeTypeHost)
SAME_VALUE(hipGraphNodeTypeGraph, h::kGraphNodeTypeGraph)
SAME_VALUE(hipGraphNodeTypeEmpty, h::kGraphNodeTypeEmpty)
SAME_VALUE(hipGraphNodeTypeWaitEvent, h::kGraphNodeTypeWaitEvent)
SAME_VALUE(hipGraphNodeTypeEventRecord, h::kGraphNodeTypeEventRecord)
SAME_VALUE(hipGraphNodeTypeCount, h::kGraphNodeTypeCount)
// hipGraphExecUpdateResult: the driver's CUgraphExecUpdateResult values, passed through.
SAME_VALUE(hipGraphExecUpdateSuccess, 0)
SAME_VALUE(hipGraphExecUpdateError, 1)
SAME_VALUE(hipGraphExecUpdateErrorTopologyChanged, 2)
SAME_VALUE(hipGraphExecUpdateErrorNodeTypeChanged, 3)
SAME_VALUE(hipGraphExecUpdateErrorFunctionChanged, 4)
SAME_VALUE(hipGraphExecUpdateErrorParametersChanged, 5)
SAME_VALUE(hipGraphExecUpdateErrorNotSupported, 6)
SAME_VALUE(hipGraphExecUpdateErrorUnsupportedFunctionChange, 7)

// Arrays.
static_assert(sizeof(h::Array) == sizeof(hipArray));
static_assert(offsetof(h::Array, desc) == offsetof(hipArray, desc));
static_assert(offsetof(h::Array, width) == offsetof(hipArray, width));
static_assert(offsetof(h::Array, Format) == offsetof(hipArray, Format));
static_assert(offsetof(h::Array, isDrv) == offsetof(hipArray, isDrv));
static_assert(offsetof(h::Array, textureType) == offsetof(hipArray, textureType));
static_assert(sizeof(h::ArrayDescriptor) == sizeof(HIP_ARRAY_DESCRIPTOR));
static_assert(offsetof(h::ArrayDescriptor, NumChannels) ==
              offsetof(HIP_ARRAY_DESCRIPTOR, NumChannels));
static_assert(sizeof(h::Array3DDescriptor) == sizeof(HIP_ARRAY3D_DESCRIPTOR));
static_assert(offsetof(h::Array3DDescriptor, Format) == offsetof(HIP_ARRAY3D_DESCRIPTOR, Format));
static_assert(offsetof(h::Array3DDescriptor, Flags) == offsetof(HIP_ARRAY3D_DESCRIPTOR, Flags));
static_assert(offsetof(h::Memcpy3DParms, srcArray) == offsetof(hipMemcpy3DParms, srcArray));
static_assert(offsetof(h::Memcpy3DParms, dstArray) == offsetof(hipMemcpy3DParms, dstArray));
SAME_VALUE(hipChannelFormatKindSigned, h::kChannelFormatKindSigned)
SAME_VALUE(hipChannelFormatKindUnsigned, h::kChannelFormatKindUnsigned)
SAME_VALUE(hipChannelFormatKindFloat, h::kChannelFormatKindFloat)
SAME_VALUE(hipChannelFormatKindNone, h::kChannelFormatKindNone)
SAME_VALUE(HIP_AD_FORMAT_UNSIGNED_INT8, 0x01)
SAME_VALUE(HIP_AD_FORMAT_UNSIGNED_INT16, 0x02)
SAME_VALUE(HIP_AD_FORMAT_UNSIGNED_INT32, 0x03)
SAME_VALUE(HIP_AD_FORMAT_SIGNED_INT8, 0x08)
SAME_VALUE(HIP_AD_FORMAT_SIGNED_INT16, 0x09)
SAME_VALUE(HIP_AD_FORMAT_SIGNED_INT32, 0x0a)
SAME_VALUE(HIP_AD_FORMAT_HALF, 0x10)
SAME_VALUE(HIP_AD_FORMAT_FLOAT, 0x20)
static_assert((hipArrayLayered | hipArraySurfaceLoadStore | hipArrayCubemap |
               hipArrayTextureGather) == h::kArrayFlagsKnown);
SAME_VALUE(hipTextureType1D, 1)
SAME_VALUE(hipTextureType2D, 2)
SAME_VALUE(hipTextureType3D, 3)
