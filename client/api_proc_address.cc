// cuGetProcAddress: how NVIDIA's runtime (and any modern driver-API user) finds every entry point.
// The revision a caller gets is selected by the table generated from cudaTypedefs.h; the pointer
// handed out is this runtime's implementation of that exact ABI revision. An entry point the
// driver has but rgpu does not implement is handed out too, as a stand-in that returns
// CUDA_ERROR_NOT_SUPPORTED and names itself at warn level the first time the program calls it:
// the program learns which call failed and the user which entry point it needed (answering
// NOT_FOUND instead would let NVIDIA's runtime turn it into cudaErrorCallRequiresNewerDriver
// with no name, for each of the ~245 entry points it looks up at start-up, needed or not).
#include <atomic>
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

enum EntryIndex {
#define RGPU_ENTRY(name, params, args) kEntry_##name,
#include "abi/entry_points.inc"
#undef RGPU_ENTRY
  kEntryCount
};

std::atomic<bool> g_missing_reported[kEntryCount];

CUresult Missing(EntryIndex index, const char* name) {
  if (!g_missing_reported[index].exchange(true, std::memory_order_relaxed)) {
    RGPU_LOG_WARN(
        "the program called %s, which rgpu does not implement yet; it returns "
        "CUDA_ERROR_NOT_SUPPORTED",
        name);
  }
  return CUDA_ERROR_NOT_SUPPORTED;
}

// The stand-in of every entry point, for those this runtime lacks.
#define RGPU_ENTRY(name, params, args) \
  CUresult Missing_##name params { return Missing(kEntry_##name, #name); }
#include "abi/entry_points.inc"
#undef RGPU_ENTRY

// Parallel to rgpu::abi::ProcRevisions(): the implementation of each revision's symbol, or its
// stand-in.
void* const kImplementations[] = {
#define RGPU_PROC(name, version, per_thread, symbol)                            \
  &rgpu_impl_##symbol != nullptr ? reinterpret_cast<void*>(&rgpu_impl_##symbol) \
                                 : reinterpret_cast<void*>(&Missing_##symbol),
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
  if (found == rgpu::abi::ProcLookup::kFound) {
    *pfn = kImplementations[index];
    if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
  }
  if (status != nullptr) {
    *status = found == rgpu::abi::ProcLookup::kVersionTooLow
                  ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                  : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
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
