// Session's handlers for the JIT linker (proto/calls.def: The JIT linker). The backend's linker
// runs here, on the tenant's inputs: only scalar JIT options pass (pointers the tenant names
// would be this process's memory), the log buffers are the session's own, and a state's inputs
// together are bounded like a module image. The image the link produces stays the backend's
// until the state is destroyed; the client reads a copy.
#include <cstring>

#include "server/require_fn.h"
#include "server/session.h"

namespace rgpu::server {
namespace {

constexpr size_t kLogBytes = 64 * 1024;
constexpr size_t kMaxOptions = 32;

// The JIT options a tenant may set: values, never addresses.
bool ScalarOption(uint64_t option) {
  switch (option) {
    case CU_JIT_MAX_REGISTERS:
    case CU_JIT_THREADS_PER_BLOCK:
    case CU_JIT_OPTIMIZATION_LEVEL:
    case CU_JIT_TARGET_FROM_CUCONTEXT:
    case CU_JIT_TARGET:
    case CU_JIT_FALLBACK_STRATEGY:
    case CU_JIT_GENERATE_DEBUG_INFO:
    case CU_JIT_LOG_VERBOSE:
    case CU_JIT_GENERATE_LINE_INFO:
    case CU_JIT_CACHE_MODE:
    case CU_JIT_POSITION_INDEPENDENT_CODE:
    case CU_JIT_MIN_CTA_PER_SM:
    case CU_JIT_MAX_THREADS_PER_BLOCK:
    case CU_JIT_OVERRIDE_DIRECTIVE_VALUES:
      return true;
    default:
      return false;
  }
}

// Where the linker wrote how much of a log it filled (the value of its size option).
size_t LogFill(const LinkRecord& link, CUjit_option size_option, size_t capacity) {
  for (size_t i = 0; i < link.options.size(); ++i) {
    if (link.options[i] == size_option) {
      return std::min(reinterpret_cast<uintptr_t>(link.values[i]), uintptr_t{capacity});
    }
  }
  return 0;
}

}  // namespace

CUresult Session::HandleLinkCreate(CallState& cs, const LinkCreateIn&,
                                   calls::LinkCreate::Results* out) {
  REQUIRE_FN(cuLinkCreate);
  REQUIRE_FN(cuLinkDestroy);
  if (CUresult r = RoomFor(cs, links_.size(), limits_.max_links, "link states");
      r != CUDA_SUCCESS) {
    return r;
  }
  if (cs.payload_size % 16 != 0 || cs.payload_size / 16 > kMaxOptions) {
    cs.detail = "JIT options must be at most 32 (option, value) pairs";
    return CUDA_ERROR_INVALID_VALUE;
  }
  LinkRecord rec;
  rec.ctx = cs.ctx_id;
  for (size_t i = 0; i < cs.payload_size / 16; ++i) {
    uint64_t option, value;
    memcpy(&option, cs.payload + i * 16, 8);
    memcpy(&value, cs.payload + i * 16 + 8, 8);
    if (!ScalarOption(option)) {
      cs.detail = "JIT option " + std::to_string(option) + " cannot be forwarded";
      return CUDA_ERROR_INVALID_VALUE;
    }
    rec.options.push_back(static_cast<CUjit_option>(option));
    rec.values.push_back(reinterpret_cast<void*>(static_cast<uintptr_t>(value)));
  }
  rec.info_log.assign(kLogBytes, '\0');
  rec.error_log.assign(kLogBytes, '\0');
  auto add = [&rec](CUjit_option option, void* value) {
    rec.options.push_back(option);
    rec.values.push_back(value);
  };
  add(CU_JIT_INFO_LOG_BUFFER, rec.info_log.data());
  add(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, reinterpret_cast<void*>(uintptr_t{kLogBytes}));
  add(CU_JIT_ERROR_LOG_BUFFER, rec.error_log.data());
  add(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, reinterpret_cast<void*>(uintptr_t{kLogBytes}));
  add(CU_JIT_WALL_TIME, nullptr);
  const uint64_t id = links_.Insert(std::move(rec));
  LinkRecord* link = links_.Find(id);  // its arrays now have their final addresses
  const CUresult r = drv_.cuLinkCreate(static_cast<unsigned>(link->options.size()),
                                       link->options.data(), link->values.data(), &link->state);
  if (r != CUDA_SUCCESS) {
    links_.Erase(id);
    return r;
  }
  out->link = id;
  return CUDA_SUCCESS;
}

CUresult Session::HandleLinkAddData(CallState& cs, const LinkAddDataIn& in,
                                    calls::LinkAddData::Results*) {
  REQUIRE_FN(cuLinkAddData);
  LinkRecord& link = *in.link.record;
  if (link.image != nullptr) {
    cs.detail = "the link is complete";
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (cs.payload_size == 0 || cs.payload_size > limits_.max_module_bytes - link.input_bytes) {
    cs.detail = "the link's inputs exceed the module bound (" +
                std::to_string(limits_.max_module_bytes) + " bytes)";
    return cs.payload_size == 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_IMAGE;
  }
  if (in.type >= CU_JIT_NUM_INPUT_TYPES) return CUDA_ERROR_INVALID_VALUE;
  // The linker reads text inputs up to a NUL: one must end the tenant's bytes (the client sends
  // PTX with its NUL); only an input without one is copied to add it.
  const char* data = cs.payload;
  size_t size = cs.payload_size;
  std::vector<char> terminated;
  if (cs.payload[size - 1] != '\0') {
    terminated.assign(cs.payload, cs.payload + size);
    terminated.push_back('\0');
    data = terminated.data();
    size = terminated.size();
  }
  const CUresult r =
      drv_.cuLinkAddData(link.state, static_cast<CUjitInputType>(in.type), const_cast<char*>(data),
                         size, "input", 0, nullptr, nullptr);
  if (r == CUDA_SUCCESS) link.input_bytes += cs.payload_size;
  return r;
}

CUresult Session::HandleLinkComplete(CallState& cs, const LinkCompleteIn& in,
                                     calls::LinkComplete::Results* out) {
  REQUIRE_FN(cuLinkComplete);
  LinkRecord& link = *in.link.record;
  if (link.image == nullptr) {
    void* image = nullptr;
    size_t bytes = 0;
    if (CUresult r = drv_.cuLinkComplete(link.state, &image, &bytes); r != CUDA_SUCCESS) {
      return r;
    }
    if (image == nullptr || bytes == 0 || bytes > limits_.max_module_bytes) {
      cs.detail = "the linked image is empty or exceeds the module bound";
      return CUDA_ERROR_INVALID_IMAGE;
    }
    link.image = image;
    link.image_bytes = bytes;
  }
  out->image_bytes = link.image_bytes;
  uint32_t bits = 0;
  memcpy(&bits, &link.values.back(), sizeof bits);  // CU_JIT_WALL_TIME's float, in its slot
  out->wall_time_bits = bits;
  return CUDA_SUCCESS;
}

CUresult Session::HandleLinkGetImage(CallState& cs, const LinkGetImageIn& in,
                                     calls::LinkGetImage::Results*) {
  const LinkRecord& link = *in.link.record;
  if (link.image == nullptr || in.bytes != link.image_bytes) {
    cs.detail = "no linked image of that size";
    return CUDA_ERROR_INVALID_VALUE;
  }
  cs.out_payload = OutputBuffer(link.image_bytes);
  if (cs.out_payload == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  memcpy(cs.out_payload, link.image, link.image_bytes);
  cs.out_size = link.image_bytes;
  return CUDA_SUCCESS;
}

CUresult Session::HandleLinkGetLog(CallState& cs, const LinkGetLogIn& in,
                                   calls::LinkGetLog::Results*) {
  const LinkRecord& link = *in.link.record;
  const std::vector<char>& log = in.errors ? link.error_log : link.info_log;
  // The text up to its NUL, within what the linker says it filled and what the client can take.
  size_t n = LogFill(
      link, in.errors ? CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES : CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
      log.size());
  n = strnlen(log.data(), std::min<uint64_t>({n, log.size(), in.capacity}));
  cs.out_payload = OutputBuffer(n == 0 ? 1 : n);
  if (cs.out_payload == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  memcpy(cs.out_payload, log.data(), n);
  cs.out_size = n;
  return CUDA_SUCCESS;
}

CUresult Session::HandleLinkDestroy(CallState&, const LinkDestroyIn& in,
                                    calls::LinkDestroy::Results*) {
  const CUresult r = drv_.cuLinkDestroy(in.link->state);
  links_.Erase(in.link.id);
  return r;
}

void Session::DestroyLinks(uint64_t ctx_id) {
  for (auto it = links_.records().begin(); it != links_.records().end();) {
    if (ctx_id == 0 || it->second.ctx == ctx_id) {
      if (drv_.cuLinkDestroy != nullptr) drv_.cuLinkDestroy(it->second.state);
      it = links_.records().erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace rgpu::server
