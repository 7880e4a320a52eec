#include "client/local_server_link.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "common/library_path.h"

namespace rgpu::client {
namespace {

using ConnectFn = int (*)(const ChannelOptions*, Channel**, char*, size_t);

// librgpu-local.so beside this library, unless RGPU_LOCAL_LIBRARY names another.
std::string LocalLibraryPath() {
  const char* override_path = getenv("RGPU_LOCAL_LIBRARY");
  if (override_path != nullptr && *override_path != '\0') return override_path;
  return BesideLibraryOf(reinterpret_cast<const void*>(&LocalLibraryPath), "librgpu-local.so");
}

}  // namespace

Status ConnectLocalServer(const ChannelOptions& options, std::unique_ptr<Channel>* out) {
  static std::once_flag once;
  static ConnectFn connect = nullptr;
  static std::string load_error;
  std::call_once(once, [] {
    const std::string path = LocalLibraryPath();
    // Never unloaded: its server serves until the process ends.
    void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      const char* why = dlerror();
      load_error = "cannot load the in-process server " + path + ": " + (why ? why : "?");
      return;
    }
    connect = reinterpret_cast<ConnectFn>(dlsym(library, "rgpu_local_connect"));
    if (connect == nullptr) load_error = path + " has no rgpu_local_connect";
  });
  if (connect == nullptr) return Unavailable(load_error);
  char error[512] = {};
  Channel* channel = nullptr;
  if (connect(&options, &channel, error, sizeof error) != 0 || channel == nullptr) {
    return Unavailable(error);
  }
  out->reset(channel);
  return Status::Ok();
}

}  // namespace rgpu::client
