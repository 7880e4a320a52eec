#include "client/client_state.h"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "client/thread_setup.h"
#include "client/visible_devices.h"
#include "common/log.h"

extern "C" void rgpu_client_prepare_thread() {
  thread_local bool ready = false;
  if (ready) return;
  ready = true;
  using InitFn = void (*)();
  static const InitFn init = reinterpret_cast<InitFn>(dlsym(RTLD_DEFAULT, "__ctype_init"));
  if (init != nullptr) init();
}

namespace rgpu::client {
namespace {
std::atomic<ClientState*> created_state{nullptr};

// The program's setenv (its own libc's, not the one in this runtime's private namespace), handed
// over by the interposer; nullptr when the runtime was loaded some other way (then this
// runtime's own setenv is the program's).
using SetenvFn = int (*)(const char*, const char*, int);
std::atomic<SetenvFn> program_setenv{nullptr};

// The software GPU runs only PTX: it ignores SASS, as a driver does with CUDA_FORCE_PTX_JIT=1.
// NVIDIA's libraries read that variable to choose their kernels (cuBLASLt, at cublasCreate,
// picks kernels that carry PTX instead of SASS-only ones for the device's architecture), so the
// program is told so, unless it set the variable itself. Runs inside cuInit, before any library
// can have read it.
void AnnouncePtxOnly() {
  SetenvFn set = program_setenv.load(std::memory_order_acquire);
  if (set == nullptr) set = &::setenv;
  if (set("CUDA_FORCE_PTX_JIT", "1", /*overwrite=*/0) == 0) {
    RGPU_LOG_INFO("software GPU: CUDA_FORCE_PTX_JIT=1 for the program's libraries, unless set");
  }
}

// In the private link namespace the interposer loads this runtime into, the C library is a copy
// whose environment is the program's environment array as it was at load time. The program's
// setenv may later free that array (and the strings it put there), which would leave every
// getenv of this namespace (the runtime's, the in-process server's, softgpu's) reading freed
// memory. So the namespace keeps a copy of its own, taken at load: variables the program sets
// afterwards are not seen here. In the program's own namespace (RGPU_NO_DLMOPEN=1) nothing
// changes.
__attribute__((constructor)) void KeepOwnEnvironment() {
  Dl_info info;
  struct link_map* map = nullptr;
  Lmid_t namespace_id = LM_ID_BASE;
  if (dladdr1(reinterpret_cast<void*>(&KeepOwnEnvironment), &info, reinterpret_cast<void**>(&map),
              RTLD_DL_LINKMAP) == 0 ||
      map == nullptr || dlinfo(map, RTLD_DI_LMID, &namespace_id) != 0 ||
      namespace_id == LM_ID_BASE || environ == nullptr) {
    return;
  }
  size_t count = 0;
  while (environ[count] != nullptr) ++count;
  char** copy = static_cast<char**>(calloc(count + 1, sizeof(char*)));  // never freed
  if (copy == nullptr) return;
  for (size_t i = 0; i < count; ++i) {
    copy[i] = strdup(environ[i]);
    if (copy[i] == nullptr) return;  // the copy is incomplete: keep the original
  }
  environ = copy;
}

// Runs when the process exits (or the library is unloaded), before the transport libraries'
// own destructors: a batch still waiting for its delay leaves now, from this thread, instead of
// from the delay thread while UCX is being torn down.
__attribute__((destructor)) void StopBatchingAtUnload() {
  if (ClientState* state = created_state.load()) state->StopBatching();
}
}  // namespace

// Called by the interposer right after it loads this runtime: the program's own setenv.
extern "C" __attribute__((visibility("default"))) void rgpu_client_set_program_setenv(
    int (*fn)(const char*, const char*, int)) {
  program_setenv.store(fn, std::memory_order_release);
}

namespace {
// The server used when RGPU_SERVER is not set (rgpu_client_set_default_server), or nullptr.
std::atomic<const char*> default_server{nullptr};
}  // namespace

// Called by an interposer built for one server (lib/softgpu-local/libcuda.so.1: "local") right
// after it loads this runtime: the server to use when RGPU_SERVER is not set. `url` must stay
// valid for the life of the process.
extern "C" __attribute__((visibility("default"))) void rgpu_client_set_default_server(
    const char* url) {
  default_server.store(url, std::memory_order_release);
}

ClientState& ClientState::Get() {
  // Never destroyed: the tenant's exit handlers may still call into the driver.
  static ClientState* state = [] {
    auto* s = new ClientState();
    created_state.store(s);
    return s;
  }();
  return *state;
}

void ClientState::StopBatching() {
  // A thread still connecting holds mu_; at exit that connection is not waited for.
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock() || servers_.size() == 0) return;
  constexpr int kWaitMs = 100;
  servers_.StopBatching(kWaitMs);
}

namespace {

// `text` cut at commas, each piece without surrounding spaces.
std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    std::string piece = text.substr(start, comma == std::string::npos ? comma : comma - start);
    const size_t b = piece.find_first_not_of(" \t"), e = piece.find_last_not_of(" \t");
    out.push_back(b == std::string::npos ? "" : piece.substr(b, e - b + 1));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

// The device is remote: whatever needs it to reach this process's memory is not available,
// whatever the backend itself could do.
void HideHostAccess(wire::DeviceInfo* d) {
  for (CUdevice_attribute a :
       {CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY,
        CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS,
        CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES,
        CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST,
        CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED,
        CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM,
        CU_DEVICE_ATTRIBUTE_INTEGRATED}) {
    if (a < d->attributes_size()) d->set_attributes(a, 0);
  }
}

}  // namespace

CUresult ClientState::Initialize() {
  rgpu_client_prepare_thread();
  std::lock_guard<std::mutex> lock(mu_);
  if (init_done_) return init_result_;
  init_done_ = true;
  const char* list = getenv("RGPU_SERVER");
  if (list == nullptr || *list == '\0') list = default_server.load(std::memory_order_acquire);
  if (list == nullptr || *list == '\0') {
    RGPU_LOG_ERROR("RGPU_SERVER is not set; no remote GPU to use");
    init_result_ = CUDA_ERROR_NO_DEVICE;
    return init_result_;
  }
  const std::vector<std::string> urls = SplitList(list);
  const char* token_text = getenv("RGPU_TOKEN");
  std::vector<std::string> tokens(1, token_text != nullptr ? token_text : "");
  if (urls.size() > 1) tokens = SplitList(tokens[0]);
  // Always said when the program is about to see "no device": the reason is only here.
  auto refuse = [this](CUresult r) {
    init_result_ = r;
    return r;
  };
  auto say = [] {
    if (!LogEnabled(LogLevel::kError)) SetLogLevel(LogLevel::kError);
  };
  if (urls.size() > static_cast<size_t>(ServerSet::kMaxServers)) {
    say();
    RGPU_LOG_ERROR("RGPU_SERVER names %zu servers; at most %d", urls.size(),
                   ServerSet::kMaxServers);
    return refuse(CUDA_ERROR_NO_DEVICE);
  }
  if (tokens.size() != 1 && tokens.size() != urls.size()) {
    say();
    RGPU_LOG_ERROR("RGPU_TOKEN has %zu tokens for %zu servers (give one each, or one for all)",
                   tokens.size(), urls.size());
    return refuse(CUDA_ERROR_NOT_PERMITTED);
  }
  int timeout_ms = 10000;
  if (const char* t = getenv("RGPU_CONNECT_TIMEOUT_MS")) timeout_ms = atoi(t);
  std::vector<wire::DeviceInfo> all;
  std::vector<ServerSet::DeviceSlot> slots;
  std::vector<std::string> uuids;
  bool softgpu = false;
  // The sessions opened so far: joined to the set only once every server accepted, so that when
  // one refuses (or cannot be reached) the others' sessions end here, not at the program's exit.
  std::vector<std::unique_ptr<Connection>> opened;
  for (size_t i = 0; i < urls.size(); ++i) {
    const std::string& url = urls[i];
    std::unique_ptr<Connection> connection;
    Status s = url.empty() ? InvalidArgument("an empty server URL in RGPU_SERVER")
                           : Connection::Open(url, tokens.size() == 1 ? tokens[0] : tokens[i],
                                              timeout_ms, &connection);
    if (!s.ok()) {
      say();
      RGPU_LOG_ERROR("cannot use the GPU server at %s: %s", url.c_str(), s.ToString().c_str());
      return refuse(s.code() == Status::Code::kPermissionDenied    ? CUDA_ERROR_NOT_PERMITTED
                    : s.code() == Status::Code::kResourceExhausted ? CUDA_ERROR_DEVICE_UNAVAILABLE
                                                                   : CUDA_ERROR_NO_DEVICE);
    }
    const wire::Welcome& w = connection->welcome();
    for (int d = 0; d < w.devices_size(); ++d) {
      all.push_back(w.devices(d));
      HideHostAccess(&all.back());
      slots.push_back({static_cast<int>(i), d});
      uuids.push_back(w.devices(d).uuid());
    }
    softgpu = softgpu || w.backend() == "softgpu";
    RGPU_LOG_INFO("connected to %s (%s backend, %d device(s), session %llu)", url.c_str(),
                  w.backend().c_str(), w.devices_size(), (unsigned long long)w.session_id());
    if (LogEnabled(LogLevel::kDebug)) {
      RGPU_LOG_DEBUG("transport: %s", connection->DescribeTransport().c_str());
    }
    opened.push_back(std::move(connection));
  }
  for (auto& connection : opened) servers_.Add(std::move(connection));
  std::vector<int> order(all.size());
  for (size_t d = 0; d < order.size(); ++d) order[d] = static_cast<int>(d);
  if (const char* visible = getenv("CUDA_VISIBLE_DEVICES"); visible != nullptr) {
    order = SelectVisibleDevices(visible, uuids);
    RGPU_LOG_INFO("CUDA_VISIBLE_DEVICES=%s: %zu of %zu device(s)", visible, order.size(),
                  all.size());
  }
  std::vector<ServerSet::DeviceSlot> visible_slots;
  for (int d : order) {
    devices_.push_back(all[d]);
    visible_slots.push_back(slots[d]);
  }
  servers_.SetDevices(std::move(visible_slots));
  for (size_t i = 0; i < devices_.size(); ++i) {
    auto p = std::make_unique<CUctx_st>();
    p->device = static_cast<int>(i);
    p->primary = true;
    Register(p.get());
    primaries_.push_back(std::move(p));
  }
  if (softgpu) AnnouncePtxOnly();
  init_result_ = CUDA_SUCCESS;
  initialized_.store(true, std::memory_order_release);
  return init_result_;
}

CUresult ClientState::CheckInitialized() const {
  if (initialized_.load(std::memory_order_acquire)) return CUDA_SUCCESS;
  std::lock_guard<std::mutex> lock(mu_);
  return init_done_ && init_result_ == CUDA_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

const wire::DeviceInfo* ClientState::device(CUdevice d) const {
  if (d < 0 || d >= static_cast<int>(devices_.size())) return nullptr;
  return &devices_[d];
}

int ClientState::driver_version() const { return CUDA_VERSION; }

std::string ClientState::backend(CUdevice d) {
  const ServerSet::DeviceSlot* slot = servers_.device(d);
  return slot != nullptr ? servers_.at(slot->server).welcome().backend() : "";
}

CUctx_st* ClientState::primary_context(CUdevice d) {
  if (d < 0 || d >= static_cast<int>(primaries_.size())) return nullptr;
  return primaries_[d].get();
}

void ClientState::Register(const void* object) {
  std::lock_guard<std::mutex> lock(registry_mu_);
  live_.insert(object);
}

void ClientState::Unregister(const void* object) {
  std::lock_guard<std::mutex> lock(registry_mu_);
  live_.erase(object);
  unregistered_.fetch_add(1, std::memory_order_release);
}

bool ClientState::IsLive(const void* object) {
  if (object == nullptr) return false;
  std::lock_guard<std::mutex> lock(registry_mu_);
  return live_.count(object) > 0;
}

CUresult ClientState::CheckStream(CUstream stream) {
  if (stream == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  // The stream (and so its context) this thread last found live, and the count of
  // unregistrations it read first: while the count stays, neither has gone.
  thread_local CUstream t_live_stream = nullptr;
  thread_local uint64_t t_unregistered = 0;
  const uint64_t unregistered = unregistered_.load(std::memory_order_acquire);
  if (stream == t_live_stream && unregistered == t_unregistered) {
    return stream->ctx->remote != 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
  }
  std::lock_guard<std::mutex> lock(registry_mu_);
  if (live_.count(stream) == 0 || stream->kind != ObjectKind::kStream) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  // As CheckContext: a context that is gone, or an inactive primary context.
  if (stream->ctx == nullptr || live_.count(stream->ctx) == 0) return CUDA_ERROR_INVALID_CONTEXT;
  t_live_stream = stream;
  t_unregistered = unregistered;
  return stream->ctx->remote != 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

std::vector<CUctx_st*>& ContextStack() {
  thread_local std::vector<CUctx_st*> stack;
  return stack;
}

CUctx_st* CurrentContext() {
  auto& stack = ContextStack();
  return stack.empty() ? nullptr : stack.back();
}

CUresult CheckContext(CUctx_st* ctx) {
  if (ctx == nullptr || !ClientState::Get().IsLive(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx->remote == 0) return CUDA_ERROR_INVALID_CONTEXT;  // an inactive primary context
  return CUDA_SUCCESS;
}

CUresult RequireContext(CUctx_st** out) {
  CUresult r = ClientState::Get().CheckInitialized();
  if (r != CUDA_SUCCESS) return r;
  CUctx_st* ctx = CurrentContext();
  r = CheckContext(ctx);
  if (r != CUDA_SUCCESS) return r;
  *out = ctx;
  return CUDA_SUCCESS;
}

}  // namespace rgpu::client
