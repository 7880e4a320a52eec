// CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: memory whose synchronous copies and memsets have finished when
// the call returns. rgpu sends a synchronous copy to the device, or a memset, without waiting for
// the server to have made it (it runs in stream order there, as the driver's may still run after
// such a call returns); for memory with the attribute set, the call then waits for the legacy
// default stream it ran on (never for other streams' work, which a synchronous operation does
// not wait for either). The attribute is off until a program sets it (cuPointerSetAttribute).
#pragma once

#include <cuda.h>

#include <initializer_list>

namespace rgpu::client {

// Sets (`on`) or clears the attribute of the allocation holding `address`; setting it waits for
// the synchronous memory operations already issued (the legacy default streams of the current
// context and of the memory's), as the driver does; work on other streams is not waited for.
// CUDA_ERROR_INVALID_VALUE for memory this client does not know.
CUresult SetSyncMemops(CUdeviceptr address, bool on);

// `r`, unless r is CUDA_SUCCESS and one of `addresses` lies in memory with the attribute set:
// then what waiting for the legacy default stream of `issued_in` returns (the stream synchronous
// operations run on; a null `issued_in`: the current context), and for that of each flagged
// range's own context. Called at the end of each synchronous copy or memset with the addresses
// it wrote or read (device, managed, page-locked).
CUresult FinishSynchronousMemop(CUresult r, std::initializer_list<CUdeviceptr> addresses,
                                CUctx_st* issued_in = nullptr);

}  // namespace rgpu::client
