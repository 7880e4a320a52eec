#include "transport/ucx/ucx_context.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace rgpu::ucx {

Status FromUcs(ucs_status_t status, const char* what) {
  std::string m = std::string(what) + ": " + ucs_status_string(status);
  if (status == UCS_ERR_CONNECTION_RESET || status == UCS_ERR_ENDPOINT_TIMEOUT ||
      status == UCS_ERR_UNREACHABLE || status == UCS_ERR_REJECTED || status == UCS_ERR_CANCELED ||
      status == UCS_ERR_NOT_CONNECTED || status == UCS_ERR_IO_ERROR) {
    return Unavailable(m);
  }
  return Internal(m);
}

namespace {

// The kinds of context: tcp://'s and shm://'s.
enum class ContextKind { kTcp, kSharedMemory };

Status CreateContext(ContextKind kind, const std::string& net_device, ucp_context_h* out) {
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) return FromUcs(st, "ucp_config_read");
  const bool shm = kind == ContextKind::kSharedMemory;
  // Shared memory through POSIX segments, which UCX shares as /proc/PID/fd links of unlinked
  // files (UCX_POSIX_USE_PROC_LINK, y by default): another process can map one only if it may
  // ptrace its owner (the same user, or root). SysV segments (mode 0660: any process of the
  // group could attach) are not used.
  if (getenv("UCX_TLS") == nullptr) ucp_config_modify(config, "TLS", shm ? "posix,self" : "tcp");
  if (!shm && !net_device.empty() && getenv("UCX_NET_DEVICES") == nullptr) {
    ucp_config_modify(config, "NET_DEVICES", net_device.c_str());
  }
  if (shm) {
    // Rendezvous data goes as shared-memory active-message fragments.
    if (getenv("UCX_RNDV_SCHEME") == nullptr) ucp_config_modify(config, "RNDV_SCHEME", "am");
    // A worker's receive buffers grow RX_BUFS_GROW at a time, 512 by default: 4 MiB written at
    // every worker's creation, 1.3 ms of each session's start on both sides. 128 is twice the
    // FIFO they back.
    if (getenv("UCX_POSIX_RX_BUFS_GROW") == nullptr && getenv("UCX_MM_RX_BUFS_GROW") == nullptr) {
      ucp_config_modify(config, "MM_RX_BUFS_GROW", "128");
    }
  }
  if (getenv("UCX_KEEPALIVE_INTERVAL") == nullptr) {
    const char* ms = getenv("RGPU_KEEPALIVE_MS");
    std::string value = std::string(ms ? ms : "2000") + "ms";
    ucp_config_modify(config, "KEEPALIVE_INTERVAL", value.c_str());
  }
  ucp_params_t params = {};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 1;
  st = ucp_init(&params, config, out);
  ucp_config_release(config);
  if (st != UCS_OK) return FromUcs(st, "ucp_init");
  return Status::Ok();
}

Status GetContextOfKind(ContextKind kind, const std::string& net_device, ucp_context_h* out) {
  static std::mutex mu;
  static ucp_context_h contexts[2] = {nullptr, nullptr};
  std::lock_guard<std::mutex> lock(mu);
  ucp_context_h& slot = contexts[static_cast<int>(kind)];
  if (slot == nullptr) {
    Status s = CreateContext(kind, net_device, &slot);
    if (!s.ok()) return s;
  }
  *out = slot;
  return Status::Ok();
}

}  // namespace

Status GetTcpContext(const std::string& net_device, ucp_context_h* out) {
  return GetContextOfKind(ContextKind::kTcp, net_device, out);
}

Status GetSharedMemoryDataContext(ucp_context_h* out) {
  return GetContextOfKind(ContextKind::kSharedMemory, "", out);
}

namespace {
bool SameAddress(const sockaddr* a, const sockaddr* b) {
  if (a == nullptr || b == nullptr || a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  }
  if (a->sa_family == AF_INET6) {
    return memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                  &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
  }
  return false;
}
}  // namespace

std::string InterfaceFor(const sockaddr_storage& peer, socklen_t len, bool listening) {
  sockaddr_storage local = {};
  if (listening) {
    local = peer;
  } else {
    // The address this host would send from: a connected UDP socket (no packet leaves).
    int fd = socket(peer.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return "";
    socklen_t local_len = sizeof local;
    const bool ok = connect(fd, reinterpret_cast<const sockaddr*>(&peer), len) == 0 &&
                    getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) == 0;
    close(fd);
    if (!ok) return "";
  }
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string name;
  for (ifaddrs* i = list; i != nullptr && name.empty(); i = i->ifa_next) {
    if (SameAddress(i->ifa_addr, reinterpret_cast<const sockaddr*>(&local))) name = i->ifa_name;
  }
  freeifaddrs(list);
  return name;  // "" for a wildcard listen address: no interface holds it
}

Status CreateWorker(ucp_context_h context, ucp_worker_h* out) {
  ucp_worker_params_t params = {};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SINGLE;
  ucs_status_t st = ucp_worker_create(context, &params, out);
  if (st != UCS_OK) return FromUcs(st, "ucp_worker_create");
  return Status::Ok();
}

}  // namespace rgpu::ucx
