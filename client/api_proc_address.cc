// cuGetProcAddress: how NVIDIA's runtime (and any modern driver-API user) finds every entry point.
// The revision a caller gets is selected by the table generated from cudaTypedefs.h; the pointer
// handed out is this runtime's implementation of that exact ABI revision. An entry point the
// driver has but rgpu does not implement is handed out too, as the interposer's exported entry
// point, which returns CUDA_ERROR_NOT_SUPPORTED and names itself the first time it is called:
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

// The interposer's exported entry points, by EntryIndex (rgpu_client_set_face_entries): what an
// entry point this runtime lacks is handed out as, so that calling it through the pointer answers
// CUDA_ERROR_NOT_SUPPORTED and names it (with RGPU_LOG) exactly as calling it by name does. Null
// when the runtime was not loaded by the interposer.
std::atomic<void* const*> g_face_entries{nullptr};

// Parallel to rgpu::abi::ProcRevisions(): the implementation of each revision's symbol (null when
// this runtime lacks it) and the symbol's entry index.
void* const kImplementations[] = {
#define RGPU_PROC(name, version, per_thread, symbol) reinterpret_cast<void*>(&rgpu_impl_##symbol),
#include "abi/proc_table.inc"
#undef RGPU_PROC
};
const EntryIndex kEntryOf[] = {
#define RGPU_PROC(name, version, per_thread, symbol) kEntry_##symbol,
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
  void* const* face = g_face_entries.load(std::memory_order_acquire);
  if (found == rgpu::abi::ProcLookup::kFound &&
      (kImplementations[index] != nullptr || face != nullptr)) {
    *pfn = kImplementations[index] != nullptr ? kImplementations[index] : face[kEntryOf[index]];
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

// Called by the interposer right after it loads this runtime: its `count` exported entry points.
extern "C" __attribute__((visibility("default"))) void rgpu_client_set_face_entries(
    void* const* entries, size_t count) {
  if (count == kEntryCount) g_face_entries.store(entries, std::memory_order_release);
}
