#include "server/local_server.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "common/log.h"
#include "server/server.h"

namespace rgpu::server {
namespace {

constexpr const char* kLocalUrl = "local://rgpu";

// `file_name` beside this library.
std::string BesideThisLibrary(const char* file_name) {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&BesideThisLibrary), &info) != 0 &&
      info.dli_fname != nullptr) {
    std::string path = info.dli_fname;
    const size_t slash = path.rfind('/');
    if (slash != std::string::npos) return path.substr(0, slash + 1) + file_name;
  }
  return file_name;
}

// The in-process server, started once and never destroyed: its sessions may still be serving
// while the process exits.
Status StartedServer() {
  static std::once_flag once;
  static Status started;
  std::call_once(once, [] {
    ServerOptions options;
    options.listen = kLocalUrl;
    options.backend = "softgpu";
    options.driver_library = BesideThisLibrary("libsoftgpu-cuda.so");
    options.name = "rgpu-local";
    options.keepalive = false;
    options.max_kernel_ms = 0;
    auto* server = new Server();
    started = server->Start(options);
    if (!started.ok()) return;
    std::thread([server] { server->Serve(); }).detach();
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
