// The JIT linker: cuLinkCreate, cuLinkAddData, cuLinkAddFile, cuLinkComplete, cuLinkDestroy. The
// server's backend links (server/session_link.cc); here a CUlinkState names the server's state
// and holds a copy of the linked image, valid until cuLinkDestroy as the driver's is. The options
// that point into this process (the log buffers) and CU_JIT_WALL_TIME are served here: the
// server's logs are copied into the program's buffers, and their sizes and the wall time written
// back into the option values, when an input is added and when the link completes. Every other
// option is forwarded; the server refuses those it cannot take (addresses of this process).
#include <cstring>
#include <string>
#include <vector>

#include "client/impl.h"

using rgpu::client::ClientState;
using rgpu::client::RequireContext;
using rgpu::client::Server;
namespace calls = rgpu::calls;

// The driver's opaque link-state type, defined by rgpu.
struct CUlinkState_st {
  uint64_t remote = 0;
  CUctx_st* ctx = nullptr;
  uint64_t generation = 0;
  // The program's options, which must outlive the state (the driver writes outputs into them).
  unsigned num_options = 0;
  CUjit_option* options = nullptr;
  void** values = nullptr;
  std::vector<size_t> capacities;  // each option's value at creation (log sizes are overwritten)
  std::vector<char> image;
};

namespace {

bool ServedHere(CUjit_option option) {
  return option == CU_JIT_INFO_LOG_BUFFER || option == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES ||
         option == CU_JIT_ERROR_LOG_BUFFER || option == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES ||
         option == CU_JIT_WALL_TIME;
}

CUresult CheckLink(CUlinkState state) {
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  if (state == nullptr || !ClientState::Get().IsLive(state)) return CUDA_ERROR_INVALID_HANDLE;
  if (rgpu::client::CheckContext(state->ctx) != CUDA_SUCCESS ||
      state->generation != state->ctx->generation) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  return CUDA_SUCCESS;
}

// Copies the server's log into the program's buffer for `buffer_option`, if it gave one.
void CopyLog(CUlinkState s, CUjit_option buffer_option, CUjit_option size_option, bool errors) {
  for (unsigned i = 0; i < s->num_options; ++i) {
    if (s->options[i] != buffer_option) continue;
    for (unsigned k = 0; k < s->num_options; ++k) {
      if (s->options[k] != size_option) continue;
      const size_t capacity = s->capacities[k];
      char* buffer = static_cast<char*>(s->values[i]);
      if (buffer == nullptr || capacity == 0) return;
      size_t got = 0;
      CUresult r = Server().Call<calls::LinkGetLog>(
          s->ctx->remote, {.link = s->remote, .errors = errors, .capacity = capacity - 1}, nullptr,
          nullptr, 0, rgpu::client::ReplyBuffer{buffer, capacity - 1}, &got);
      if (r != CUDA_SUCCESS) got = 0;
      buffer[got] = '\0';
      s->values[k] = reinterpret_cast<void*>(static_cast<uintptr_t>(got + 1));
      return;
    }
  }
}

void CopyLogs(CUlinkState s) {
  CopyLog(s, CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, true);
  CopyLog(s, CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, false);
}

CUresult AddData(CUlinkState state, CUjitInputType type, const void* data, size_t size) {
  if (CUresult r = CheckLink(state); r != CUDA_SUCCESS) return r;
  if (data == nullptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  const CUresult r = Server().Call<calls::LinkAddData>(
      state->ctx->remote, {.link = state->remote, .type = static_cast<uint32_t>(type)}, nullptr,
      data, size);
  CopyLogs(state);
  return r;
}

}  // namespace

RGPU_IMPL(cuLinkCreate_v2)
(unsigned int num_options, CUjit_option* options, void** values, CUlinkState* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (num_options != 0 && (options == nullptr || values == nullptr)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUctx_st* ctx;
  CUresult r = RequireContext(&ctx);
  if (r != CUDA_SUCCESS) return r;
  std::vector<uint64_t> forwarded;
  for (unsigned i = 0; i < num_options; ++i) {
    if (ServedHere(options[i])) continue;
    forwarded.push_back(static_cast<uint64_t>(options[i]));
    forwarded.push_back(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(values[i])));
  }
  calls::LinkCreate::Results got;
  r = Server().Call<calls::LinkCreate>(ctx->remote, {}, &got, forwarded.data(),
                                       forwarded.size() * sizeof(uint64_t));
  if (r != CUDA_SUCCESS) {
    RGPU_LOG_DEBUG("cuLinkCreate refused by the server: %d", static_cast<int>(r));
    return r;
  }
  auto* state = new CUlinkState_st;
  state->remote = got.link;
  state->ctx = ctx;
  state->generation = ctx->generation;
  state->num_options = num_options;
  state->options = options;
  state->values = values;
  for (unsigned i = 0; i < num_options; ++i) {
    state->capacities.push_back(reinterpret_cast<uintptr_t>(values[i]));
  }
  ClientState::Get().Register(state);
  *out = state;
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuLinkAddData_v2)
(CUlinkState state, CUjitInputType type, void* data, size_t size, const char*, unsigned int,
 CUjit_option*, void**) {
  // Options for one input tune its compilation only; the link's own options apply to all.
  return AddData(state, type, data, size);
}

RGPU_IMPL(cuLinkAddFile_v2)
(CUlinkState state, CUjitInputType type, const char* path, unsigned int, CUjit_option*, void**) {
  if (CUresult r = CheckLink(state); r != CUDA_SUCCESS) return r;
  if (path == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::string data;
  if (!rgpu::client::ReadWholeFile(path, &data)) return CUDA_ERROR_FILE_NOT_FOUND;
  return AddData(state, type, data.data(), data.size());
}

RGPU_IMPL(cuLinkComplete)(CUlinkState state, void** image_out, size_t* size_out) {
  if (CUresult r = CheckLink(state); r != CUDA_SUCCESS) return r;
  if (image_out == nullptr || size_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  calls::LinkComplete::Results got;
  CUresult r =
      Server().Call<calls::LinkComplete>(state->ctx->remote, {.link = state->remote}, &got);
  if (r == CUDA_SUCCESS) {
    std::vector<char> image(got.image_bytes);
    size_t received = 0;
    r = Server().Call<calls::LinkGetImage>(
        state->ctx->remote, {.link = state->remote, .bytes = got.image_bytes}, nullptr, nullptr, 0,
        rgpu::client::ReplyBuffer{image.data(), image.size()}, &received);
    if (r == CUDA_SUCCESS && received != image.size()) r = CUDA_ERROR_UNKNOWN;
    if (r == CUDA_SUCCESS) state->image = std::move(image);
    for (unsigned i = 0; i < state->num_options; ++i) {
      if (state->options[i] == CU_JIT_WALL_TIME) {
        memcpy(&state->values[i], &got.wall_time_bits, sizeof got.wall_time_bits);
      }
    }
  }
  CopyLogs(state);
  if (r != CUDA_SUCCESS) return r;
  *image_out = state->image.data();
  *size_out = state->image.size();
  return CUDA_SUCCESS;
}

RGPU_IMPL(cuLinkDestroy)(CUlinkState state) {
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  if (state == nullptr || !ClientState::Get().IsLive(state)) return CUDA_ERROR_INVALID_HANDLE;
  if (CheckLink(state) == CUDA_SUCCESS) {
    r = Server().Call<calls::LinkDestroy>(state->ctx->remote, {.link = state->remote});
  }
  // A state whose context was reset or destroyed went with it; only the handle is left.
  ClientState::Get().Unregister(state);
  delete state;
  return r;
}

RGPU_SAME_AS(cuLinkCreate, cuLinkCreate_v2)
RGPU_SAME_AS(cuLinkAddData, cuLinkAddData_v2)
RGPU_SAME_AS(cuLinkAddFile, cuLinkAddFile_v2)
