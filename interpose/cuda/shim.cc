// librgpu-cuda.so (SONAME libcuda.so.1): the thin exported face of rgpu in a tenant's process.
//
// It exports every CUDA driver entry point that the toolkit's cuda.h declares (generated list in
// entry_points.inc) and nothing else. It has no dependencies beyond libc: on the first driver
// call it loads the client runtime (librgpu-client.so, with protobuf and UCX) into a private link
// namespace with dlmopen(LM_ID_NEWLM), so that a program carrying its own protobuf, UCX or
// libstdc++ never sees rgpu's. Each entry point forwards to the runtime's `rgpu_impl_<name>`; an
// entry point the runtime does not implement returns CUDA_ERROR_NOT_SUPPORTED and logs its name
// once (when RGPU_LOG enables logging); the runtime's cuGetProcAddress hands these same entry
// points out for the ones it lacks (rgpu_client_set_face_entries).
//
// A process that never calls the driver (LD_PRELOAD is inherited by every child) pays nothing.
#include <cuda.h>
// Entries are defined by their exported names, not cuda.h's macro-mapped ones.
#include "abi/entry_undefs.inc"
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>

#include "interpose/common/private_runtime.h"

#define RGPU_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

enum EntryIndex {
#define RGPU_ENTRY(name, params, args) kEntry_##name,
#include "abi/entry_points.inc"
#undef RGPU_ENTRY
  kEntryCount
};

const char* const kEntryNames[] = {
#define RGPU_ENTRY(name, params, args) #name,
#include "abi/entry_points.inc"
#undef RGPU_ENTRY
};

std::atomic<void*> g_slots[kEntryCount];
std::atomic<bool> g_reported[kEntryCount];
pthread_once_t g_load_once = PTHREAD_ONCE_INIT;
void* g_runtime = nullptr;

// This library's exported entry points, by EntryIndex (defined at the end of the file).
extern void* const kFaceEntries[];

void LoadRuntime() {
  g_runtime =
      rgpu::interpose::LoadPrivateRuntime("RGPU_CLIENT_LIBRARY", "librgpu-client.so",
                                          reinterpret_cast<void*>(&LoadRuntime), "client runtime",
                                          /*shared=*/true);
  // cuGetProcAddress hands out these for the entry points the runtime lacks, so a program that
  // finds them that way is answered (and told) exactly as one that calls them by name.
  // The runtime's libc is a private copy with its own environment: what it must set for the
  // program's libraries to read (CUDA_FORCE_PTX_JIT on the software GPU) goes through this
  // library's setenv, which is the program's.
  using Setter = void (*)(void* const*, size_t);
  using SetenvSetter = void (*)(int (*)(const char*, const char*, int));
  if (g_runtime != nullptr) {
    if (auto set = reinterpret_cast<Setter>(dlsym(g_runtime, "rgpu_client_set_face_entries"))) {
      set(kFaceEntries, kEntryCount);
    }
    if (auto set =
            reinterpret_cast<SetenvSetter>(dlsym(g_runtime, "rgpu_client_set_program_setenv"))) {
      set(&setenv);
    }
#ifdef RGPU_DEFAULT_SERVER
    // This face is built for one server (lib/softgpu-local/libcuda.so.1: the software GPU in
    // this process), used when RGPU_SERVER does not name another.
    using DefaultSetter = void (*)(const char*);
    if (auto set =
            reinterpret_cast<DefaultSetter>(dlsym(g_runtime, "rgpu_client_set_default_server"))) {
      set(RGPU_DEFAULT_SERVER);
    }
#endif
  }
}

// The implementation of entry `index`, or `fallback` when the runtime has none.
void* Resolve(int index, void* fallback) {
  pthread_once(&g_load_once, LoadRuntime);
  void* impl = nullptr;
  if (g_runtime != nullptr) {
    char symbol[256];
    snprintf(symbol, sizeof symbol, "rgpu_impl_%s", kEntryNames[index]);
    impl = dlsym(g_runtime, symbol);
  }
  if (impl == nullptr) impl = fallback;
  g_slots[index].store(impl, std::memory_order_release);
  return impl;
}

CUresult Unsupported(int index) {
  if (!g_reported[index].exchange(true) && rgpu::interpose::LoggingEnabled()) {
    fprintf(stderr, "rgpu: %s is not supported; returning CUDA_ERROR_NOT_SUPPORTED\n",
            kEntryNames[index]);
  }
  return CUDA_ERROR_NOT_SUPPORTED;
}

}  // namespace

#define RGPU_ENTRY(name, params, args)                                             \
  static CUresult Unsupported_##name params { return Unsupported(kEntry_##name); } \
  RGPU_EXPORT CUresult name params {                                               \
    void* impl = g_slots[kEntry_##name].load(std::memory_order_acquire);           \
    if (impl == nullptr) {                                                         \
      impl = Resolve(kEntry_##name, reinterpret_cast<void*>(&Unsupported_##name)); \
    }                                                                              \
    return reinterpret_cast<decltype(&Unsupported_##name)>(impl) args;             \
  }
#include "abi/entry_points.inc"
#undef RGPU_ENTRY

namespace {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored \
    "-Wdeprecated-declarations"  // deprecated entry points are exported too
void* const kFaceEntries[] = {
#define RGPU_ENTRY(name, params, args) reinterpret_cast<void*>(&name),
#include "abi/entry_points.inc"
#undef RGPU_ENTRY
};
#pragma GCC diagnostic pop
}  // namespace
