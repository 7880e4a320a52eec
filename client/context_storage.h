// Context-local storage: values a library (NVIDIA's runtime) attaches to a context by key, with a
// destructor that runs when the context is reset or destroyed.
#pragma once

#include <cuda.h>

#include "client/objects.h"

namespace rgpu::client {

// Stores `value` under `key` in `ctx` (nullptr: the current context), replacing any earlier one
// without running its destructor. CUDA_ERROR_INVALID_CONTEXT when there is no such context.
CUresult ContextStoragePut(CUcontext ctx, void* key, void* value,
                           void (*destructor)(CUcontext, void*, void*));
// Removes `key` from `ctx` without running its destructor.
CUresult ContextStorageDelete(CUcontext ctx, void* key);
// Reads `key` of `ctx`; CUDA_ERROR_INVALID_VALUE when absent.
CUresult ContextStorageGet(void** value, CUcontext ctx, void* key);
// Runs and removes every destructor of `ctx`: called when it is reset or destroyed.
void ContextStorageRunDestructors(CUctx_st* ctx);

}  // namespace rgpu::client
