// cuGetProcAddress: how NVIDIA's runtime (and any modern driver-API user) finds every entry point.
// The revision a caller gets is selected by the table generated from cudaTypedefs.h; the pointer
// handed out is this runtime's implementation of that exact ABI revision. Entry points rgpu does
// not implement answer NOT_FOUND, so the caller learns at once rather than at the first call.
#include <cstring>

#include "client/abi/proc_select.h"
#include "client/impl.h"

// Every implementation this runtime might have, weakly: absent ones are null. Declared by their
// exported names, not cuda.h's macro-mapped ones.
#include "abi/entry_undefs.inc"
#define RGPU_ENTRY(name, params, args) \
  extern "C" __attribute__((weak)) CUresult rgpu_impl_##name params;
#include "abi/entry_points.inc"
#undef RGPU_ENTRY

namespace {

// Parallel to rgpu::abi::ProcRevisions(): the implementation of each revision's symbol.
void* const kImplementations[] = {
#define RGPU_PROC(name, version, per_thread, symbol) reinterpret_cast<void*>(&rgpu_impl_##symbol),
#include "abi/proc_table.inc"
#undef RGPU_PROC
};

CUresult Lookup(const char* symbol, void** pfn, int version, cuuint64_t flags,
                CUdriverProcAddressQueryResult* status) {
  if (pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  size_t index = 0;
  auto found = rgpu::abi::SelectRevision(symbol, version, per_thread, &index);
  if (found == rgpu::abi::ProcLookup::kFound && kImplementations[index] != nullptr) {
    *pfn = kImplementations[index];
    if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
  }
  if (status != nullptr) {
    *status = found == rgpu::abi::ProcLookup::kVersionTooLow
                  ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                  : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  }
  if (found == rgpu::abi::ProcLookup::kFound && symbol != nullptr && *symbol != '\0') {
    RGPU_LOG_DEBUG("cuGetProcAddress(%s, %d): not implemented by rgpu (slot %p)", symbol, version,
                   static_cast<void*>(pfn));
  }
  return CUDA_ERROR_NOT_FOUND;
}

}  // namespace

RGPU_IMPL(cuGetProcAddress_v2)
(const char* symbol, void** pfn, int version, cuuint64_t flags,
 CUdriverProcAddressQueryResult* status) {
  return Lookup(symbol, pfn, version, flags, status);
}

// The CUDA 11.3 revision, without the status argument.
extern "C" __attribute__((visibility("default"))) CUresult rgpu_impl_cuGetProcAddress(
    const char* symbol, void** pfn, int version, cuuint64_t flags) {
  return Lookup(symbol, pfn, version, flags, nullptr);
}
