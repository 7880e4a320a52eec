// librgpu-hip.so (SONAME libamdhip64.so.5): the thin exported face of rgpu in a HIP program.
//
// It exports every hip*/__hip* entry point of HIP 5.2's libamdhip64.so.5 under the version node
// the real library defines it in (hip_api.def; version script generated from it) and nothing
// else, and depends on nothing but libc. On the first HIP call it loads the HIP runtime
// (librgpu-hip-runtime.so, which links the client runtime with protobuf and UCX) into a private
// link namespace with dlmopen(LM_ID_NEWLM), so a program carrying its own libraries never sees
// rgpu's. Each entry point is a small x86-64 trampoline that jumps to the runtime's
// `rgpu_hip_<name>` with the caller's registers and stack untouched, so the face needs no
// signatures: arguments of any kind (structures by value, hidden result pointers) pass through.
// An entry point the runtime does not implement gets a fallback (hip_api.def says which) that
// logs its name once when RGPU_LOG enables logging.
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>

#include "interpose/common/private_runtime.h"

#if !defined(__x86_64__)
#error "the HIP face's trampolines are written for x86-64 (HIP 5.2 ships for x86-64 only)"
#endif

namespace {

enum EntryIndex {
#define HIP_ENTRY(node, name, fallback) kEntry_##name,
#include "interpose/hip/hip_api.def"
#undef HIP_ENTRY
  kEntryCount
};

const char* const kEntryNames[] = {
#define HIP_ENTRY(node, name, fallback) #name,
#include "interpose/hip/hip_api.def"
#undef HIP_ENTRY
};

std::atomic<bool> g_reported[kEntryCount];
pthread_once_t g_load_once = PTHREAD_ONCE_INIT;
void* g_runtime = nullptr;

void LoadRuntime() {
  g_runtime =
      rgpu::interpose::LoadPrivateRuntime("RGPU_HIP_RUNTIME_LIBRARY", "librgpu-hip-runtime.so",
                                          reinterpret_cast<void*>(&LoadRuntime), "HIP runtime");
}

void Report(int index, const char* answer) {
  if (!g_reported[index].exchange(true) && rgpu::interpose::LoggingEnabled()) {
    fprintf(stderr, "rgpu: %s is not supported; returning %s\n", kEntryNames[index], answer);
  }
}

// The runtime's hook that makes an error the thread's last error (hipGetLastError).
using RecordErrorFn = void (*)(int);
std::atomic<RecordErrorFn> g_record_error{nullptr};

// What an entry point answers when rgpu does not implement it (hip_api.def's fallback kinds).
long FallbackStatus(int index) {
  Report(index, "hipErrorNotSupported");
  constexpr int kNotSupported = 801;  // hipErrorNotSupported
  if (RecordErrorFn record = g_record_error.load(std::memory_order_acquire)) record(kNotSupported);
  return kNotSupported;
}
long FallbackRtc(int index) {
  Report(index, "HIPRTC_ERROR_INTERNAL_ERROR");
  return 11;
}
long FallbackNull(int index) {
  Report(index, "NULL");
  return 0;
}
long FallbackInt(int index) {
  Report(index, "-1");
  return -1;
}
long FallbackBool(int index) {
  Report(index, "false");
  return 0;
}
long FallbackVoid(int index) {
  Report(index, "nothing");
  return 0;
}
const char* FallbackText(int index) {
  Report(index, "a description");
  return "hipErrorNotSupported (rgpu: not supported, or the HIP runtime could not be loaded)";
}
// hipChannelFormatDesc, returned by value (through the caller's result pointer).
struct ChannelDesc {
  int x, y, z, w, f;
};
ChannelDesc FallbackChannelDesc(int index) {
  Report(index, "an empty channel description");
  return ChannelDesc{0, 0, 0, 0, 0};
}

}  // namespace

// The implementation of entry `index` (the runtime's, else its fallback); stored in `*slot` so
// that later calls jump there directly.
extern "C" __attribute__((visibility("hidden"))) void* rgpu_hip_face_resolve(int index, void** slot,
                                                                             void* fallback) {
  pthread_once(&g_load_once, LoadRuntime);
  void* impl = nullptr;
  if (g_runtime != nullptr) {
    char symbol[256];
    snprintf(symbol, sizeof symbol, "rgpu_hip_%s", kEntryNames[index]);
    impl = dlsym(g_runtime, symbol);
    if (g_record_error.load(std::memory_order_relaxed) == nullptr) {
      g_record_error.store(
          reinterpret_cast<RecordErrorFn>(dlsym(g_runtime, "rgpu_hip_record_error")),
          std::memory_order_release);
    }
  }
  if (impl == nullptr) impl = fallback;
  __atomic_store_n(slot, impl, __ATOMIC_RELEASE);
  return impl;
}

// Per entry: its slot, a resolver that knows its index and fallback, and the exported
// trampoline. The trampoline jumps through the slot; while it is empty it saves the argument
// registers (rdi rsi rdx rcx r8 r9, rax for varargs, xmm0-7), resolves, restores and jumps.
#define HIP_ENTRY(node, name, fallback)                                                    \
  extern "C" {                                                                             \
  __attribute__((visibility("hidden"))) void* rgpu_hip_slot_##name = nullptr;              \
  }                                                                                        \
  namespace {                                                                              \
  auto Fallback_##name() { return Fallback##fallback(kEntry_##name); }                     \
  }                                                                                        \
  extern "C" __attribute__((visibility("hidden"), used)) void* rgpu_hip_resolve_##name() { \
    return rgpu_hip_face_resolve(kEntry_##name, &rgpu_hip_slot_##name,                     \
                                 reinterpret_cast<void*>(&Fallback_##name));               \
  }                                                                                        \
  asm(".text\n.globl " #name "\n.type " #name ",@function\n.p2align 4\n" #name             \
      ":\n"                                                                                \
      "  movq rgpu_hip_slot_" #name                                                        \
      "(%rip), %rax\n  testq %rax, %rax\n  jz 1f\n"                                        \
      "  jmp *%rax\n1:\n  pushq %rbp\n  movq %rsp, %rbp\n"                                 \
      "  pushq %rdi\n  pushq %rsi\n  pushq %rdx\n  pushq %rcx\n  pushq %r8\n  pushq %r9\n" \
      "  pushq %rax\n  subq $136, %rsp\n"                                                  \
      "  movdqu %xmm0, 0(%rsp)\n  movdqu %xmm1, 16(%rsp)\n  movdqu %xmm2, 32(%rsp)\n"      \
      "  movdqu %xmm3, 48(%rsp)\n  movdqu %xmm4, 64(%rsp)\n  movdqu %xmm5, 80(%rsp)\n"     \
      "  movdqu %xmm6, 96(%rsp)\n  movdqu %xmm7, 112(%rsp)\n"                              \
      "  call rgpu_hip_resolve_" #name                                                     \
      "\n  movq %rax, %r11\n"                                                              \
      "  movdqu 0(%rsp), %xmm0\n  movdqu 16(%rsp), %xmm1\n  movdqu 32(%rsp), %xmm2\n"      \
      "  movdqu 48(%rsp), %xmm3\n  movdqu 64(%rsp), %xmm4\n  movdqu 80(%rsp), %xmm5\n"     \
      "  movdqu 96(%rsp), %xmm6\n  movdqu 112(%rsp), %xmm7\n"                              \
      "  addq $136, %rsp\n  popq %rax\n  popq %r9\n  popq %r8\n  popq %rcx\n  popq %rdx\n" \
      "  popq %rsi\n  popq %rdi\n  popq %rbp\n  jmp *%r11\n.size " #name ", .-" #name "\n");
#include "interpose/hip/hip_api.def"
#undef HIP_ENTRY
