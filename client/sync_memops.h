// CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: memory whose synchronous copies and memsets have finished when
// the call returns. rgpu sends a synchronous copy to the device, or a memset, without waiting for
// the server to have made it (it runs in stream order there, as the driver's may still run after
// such a call returns); for memory with the attribute set, the call then waits for its context's
// work. The attribute is off until a program sets it (cuPointerSetAttribute).
#pragma once

#include <cuda.h>

#include <initializer_list>

namespace rgpu::client {

// Sets (`on`) or clears the attribute of the allocation holding `address`; setting it waits for
// the synchronous memory operations already issued (its context's work), as the driver does.
// CUDA_ERROR_INVALID_VALUE for memory this client does not know.
CUresult SetSyncMemops(CUdeviceptr address, bool on);

// `r`, unless r is CUDA_SUCCESS and one of `addresses` lies in memory with the attribute set:
// then what waiting for that memory's context returns. Called at the end of each synchronous
// copy or memset with the device addresses it wrote or read.
CUresult FinishSynchronousMemop(CUresult r, std::initializer_list<CUdeviceptr> addresses);

}  // namespace rgpu::client
