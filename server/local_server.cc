#include "server/local_server.h"

#include <openssl/crypto.h>

#include <cstdio>
#include <cstring>
#include <future>
#include <mutex>
#include <string>
#include <thread>

#include "common/library_path.h"
#include "common/log.h"
#include "server/server.h"

namespace rgpu::server {
namespace {

constexpr const char* kLocalUrl = "local://rgpu";

// The in-process server, started once and never destroyed: its sessions may still be serving
// while the process exits. It is started, like everything it runs, on a thread of this
// namespace's own: the program's threads share their pthread-key slots with this namespace's C
// library (each library numbers its keys from 0, and both read the same thread's slots), so
// OpenSSL's per-thread state (its random generator) must never live on a program thread, where
// it would read and overwrite whatever the program's libraries keep under the same key numbers
// (cudaOpenMP and clock_nvrtc died in OPENSSL_cleanup as they exited). For the same reason
// OpenSSL does not clean up at exit, which would run on the program's exiting thread.
Status StartedServer() {
  static std::once_flag once;
  static Status started;
  std::call_once(once, [] {
    std::promise<Status> start;
    std::future<Status> result = start.get_future();
    std::thread([start = std::move(start)]() mutable {
      OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr);
      ServerOptions options;
      options.listen = kLocalUrl;
      options.backend = "softgpu";
      options.driver_library =
          BesideLibraryOf(reinterpret_cast<const void*>(&StartedServer), "libsoftgpu-cuda.so");
      options.name = "rgpu-local";
      options.keepalive = false;
      options.max_kernel_ms = 0;
      options.host_nvml = "none";  // the software GPU has no sensors; loading NVML costs time
      // Nothing may escape this thread: an exception here would end the program.
      Server* server = nullptr;
      Status s;
      try {
        server = new Server();
        s = server->Start(options);
      } catch (const std::exception& e) {
        s = Internal(std::string("the in-process server failed to start: ") + e.what());
      }
      start.set_value(s);
      if (!s.ok()) return;
      try {
        server->Serve();
      } catch (const std::exception& e) {
        RGPU_LOG_ERROR("the in-process server stopped: %s", e.what());
      }
    }).detach();
    started = result.get();
  });
  return started;
}

}  // namespace
}  // namespace rgpu::server

extern "C" __attribute__((visibility("default"))) int rgpu_local_connect(
    const rgpu::ChannelOptions* options, rgpu::Channel** out, char* error, size_t error_size) {
  auto fail = [&](const std::string& why) {
    if (error_size > 0) snprintf(error, error_size, "%s", why.c_str());
    return -1;
  };
  try {
    rgpu::Status s = rgpu::server::StartedServer();
    if (!s.ok()) return fail("the in-process server did not start: " + s.ToString());
    rgpu::TransportUrl url;
    s = rgpu::TransportUrl::Parse(rgpu::server::kLocalUrl, &url);
    std::unique_ptr<rgpu::Channel> channel;
    if (s.ok()) s = rgpu::ConnectChannel(url, *options, &channel);
    if (!s.ok()) return fail(s.ToString());
    *out = channel.release();
    return 0;
  } catch (const std::exception& e) {
    return fail(std::string("the in-process server failed: ") + e.what());
  }
}
