// Revision selection for cuGetProcAddress: which exported symbol a caller built against a given
// CUDA version, asking for the default or the per-thread-default-stream flavour, must receive.
#pragma once

#include <cstddef>

namespace rgpu::abi {

// One ABI revision of a driver entry point (a row of the generated proc_table.inc).
struct ProcRevision {
  const char* name;    // the name callers ask for ("cuMemAlloc")
  int version;         // the CUDA version that introduced this revision (3020)
  bool per_thread;     // a _ptds/_ptsz revision
  const char* symbol;  // the exported symbol implementing it ("cuMemAlloc_v2")
};

// Every revision, sorted by name then version.
const ProcRevision* ProcRevisions(size_t* count);

enum class ProcLookup { kFound, kNotFound, kVersionTooLow };

// Selects the newest revision of `name` introduced at or before `cuda_version`; with
// `per_thread`, the newest per-thread revision when one exists at that version, else the default
// one. Returns the index into ProcRevisions() through *index.
ProcLookup SelectRevision(const char* name, int cuda_version, bool per_thread, size_t* index);

}  // namespace rgpu::abi
