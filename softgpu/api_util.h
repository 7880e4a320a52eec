// Helpers shared by the exported driver-API functions (api_*.cc): exception firewall, current
// context tracking and handle resolution. Nothing here is exported.
#pragma once

#include <cuda.h>

#include <memory>
#include <new>

#include "softgpu/driver.h"

// Marks a definition as part of the library's public ABI.
#define SOFTGPU_EXPORT __attribute__((visibility("default")))

namespace softgpu {

// Runs `body` (returning CUresult) and converts any escaping exception into an error code, so
// that nothing propagates across the C boundary.
template <typename F>
CUresult Guard(F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  } catch (...) {
    return CUDA_ERROR_UNKNOWN;
  }
}

inline CUresult CheckInitialized() {
  return GetDriver().initialized.load() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

// The calling thread's context stack (the top is the current context).
std::vector<CUcontext>& ContextStack();

// The calling thread's current context, checked to be alive. Errors: NOT_INITIALIZED,
// INVALID_CONTEXT (none current, destroyed, or a released primary context).
CUresult CurrentContext(std::shared_ptr<Context>* out);
// As CurrentContext, and additionally returns the context's sticky error if it has one.
CUresult UsableContext(std::shared_ptr<Context>* out);

// Resolves a stream handle for `ctx`: NULL / CU_STREAM_LEGACY / CU_STREAM_PER_THREAD mean the
// default stream. A stream of another context or a destroyed one is INVALID_HANDLE.
CUresult ResolveStream(const std::shared_ptr<Context>& ctx, CUstream handle,
                       std::shared_ptr<Stream>* out);

// Resolves a CUfunction (or a CUkernel passed as one) to its handle and module instance in the
// current context.
CUresult ResolveFunction(CUfunction handle, std::shared_ptr<FunctionHandle>* function,
                         std::shared_ptr<Module>* module);

// Resolves a CUarray for `ctx`: CUDA_ERROR_INVALID_HANDLE for a handle that is not a live array
// or names an array of another context.
CUresult ResolveArray(const Context* ctx, CUarray handle, std::shared_ptr<Array>* out);
// The same for a CUmipmappedArray.
CUresult ResolveMipmappedArray(const Context* ctx, CUmipmappedArray handle,
                               std::shared_ptr<MipmappedArray>* out);

// The CUDA error for an AddressSpace allocation's result: OUT_OF_MEMORY, INVALID_VALUE, or
// success.
inline CUresult AllocationError(AddressSpace::Result r) {
  switch (r) {
    case AddressSpace::Result::kOk:
      return CUDA_SUCCESS;
    case AddressSpace::Result::kOutOfMemory:
      return CUDA_ERROR_OUT_OF_MEMORY;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

// The allocation holding [address, address + size) that `ctx` may copy to or from: its own, one
// of a context it has peer access to, or page-locked host memory (every context's); null
// otherwise (api_memory.cc).
std::shared_ptr<Allocation> DeviceRange(Context& ctx, CUdeviceptr address, size_t size);
// True when `address` lies in device memory of a live context other than `ctx`: a unified
// address naming it is another context's device memory (refused), not host memory. Another
// context's managed memory is native, host memory at that address, and a host copy reaches it
// (api_memory.cc).
bool OtherContextsMemory(const Context& ctx, CUdeviceptr address);

// Page-locked host memory (api_host.cc), as cuPointerGetAttribute describes it.
struct PageLockedRange {
  uint64_t base = 0;
  uint64_t size = 0;
  unsigned flags = 0;           // cuMemHostAlloc's or cuMemHostRegister's
  CUcontext context = nullptr;  // current at the allocation or registration
  int device = 0;
  bool mapped = false;  // allocated (native: kernels reach it at its address), not registered
};
// The allocated or registered page-locked range containing `address`; false if none.
bool FindPageLocked(uint64_t address, PageLockedRange* out);
// Frees the page-locked memory allocated in `context` and drops its registrations, as CUDA does
// when a context is destroyed (a kernel still running keeps what it reached until it ends).
void ReleasePageLockedOf(CUcontext context);

}  // namespace softgpu
