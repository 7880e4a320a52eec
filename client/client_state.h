// ClientState: everything the client runtime holds for the tenant process: its servers' connections
// (opened lazily by cuInit, client/server_set.h), the devices they described, the primary contexts,
// the registry of live shadow objects and each thread's context stack.
#pragma once

#include <cuda.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "client/objects.h"
#include "client/server_set.h"

namespace rgpu::client {

class ClientState {
 public:
  static ClientState& Get();

  // Connects to the servers named by RGPU_SERVER (URLs separated by commas; else the interposer's
  // default, if it set one: rgpu_client_set_default_server) on first call, presenting RGPU_TOKEN
  // (with several servers: one token each, separated by commas, or one for all); later calls
  // return the first call's result. The program's devices are the servers' in that order, as
  // CUDA_VISIBLE_DEVICES selects them. CUDA_ERROR_NO_DEVICE when a server cannot be reached.
  CUresult Initialize();
  // CUDA_SUCCESS once Initialize succeeded, else CUDA_ERROR_NOT_INITIALIZED.
  CUresult CheckInitialized() const;

  ServerSet& servers() { return servers_; }
  // Sends what the connections have batched and stops their batch-delay threads
  // (Connection::StopBatching, waiting at most 100 ms for another thread's call in progress);
  // for the library's unload path.
  void StopBatching();
  int device_count() const { return static_cast<int>(devices_.size()); }
  // The device's description, or nullptr for an invalid ordinal.
  const wire::DeviceInfo* device(CUdevice d) const;
  // The backend of the server of device `d` ("softgpu", "cuda", ...; "" for an invalid ordinal).
  std::string backend(CUdevice d);
  int driver_version() const;

  // The stable handle of a device's primary context (inactive until retained).
  CUctx_st* primary_context(CUdevice d);

  // Live-object registry: handles the program passes back are checked against it.
  void Register(const void* object);
  void Unregister(const void* object);
  bool IsLive(const void* object);
  // CUDA_SUCCESS when `stream` is a live stream whose context is live and active,
  // CUDA_ERROR_INVALID_HANDLE when it is not a live stream, CUDA_ERROR_INVALID_CONTEXT when its
  // context is gone or an inactive primary context (as CheckContext says). Under the registry's
  // lock, except for the stream the calling thread last found live when nothing has been
  // unregistered since (a program polling or launching on one stream takes no lock).
  CUresult CheckStream(CUstream stream);

  // Mutex guarding shadow objects' mutable state (module function caches, library modules).
  std::mutex& objects_mutex() { return objects_mu_; }

 private:
  ClientState() = default;
  mutable std::mutex mu_;
  bool init_done_ = false;                             // GUARDED_BY(mu_)
  CUresult init_result_ = CUDA_ERROR_NOT_INITIALIZED;  // GUARDED_BY(mu_)
  // Set once Initialize has succeeded, which is for good: CheckInitialized then takes no lock.
  std::atomic<bool> initialized_{false};
  ServerSet servers_;
  std::vector<wire::DeviceInfo> devices_;
  std::vector<std::unique_ptr<CUctx_st>> primaries_;
  std::mutex registry_mu_;
  std::unordered_set<const void*> live_;
  // How many objects have been unregistered (written under registry_mu_): a handle found live
  // when it read N is still live while it reads N.
  std::atomic<uint64_t> unregistered_{0};
  std::mutex objects_mu_;
};

// The calling thread's context stack. The current context is its top.
std::vector<CUctx_st*>& ContextStack();
// The current context, or nullptr.
CUctx_st* CurrentContext();
// Resolves the context a call without an explicit one runs in: the current context, which must be
// live and active. CUDA_ERROR_INVALID_CONTEXT otherwise.
CUresult RequireContext(CUctx_st** out);
// Checks a context handle the program passed.
CUresult CheckContext(CUctx_st* ctx);

}  // namespace rgpu::client
