// rgpu run's last step (run_program.h).
#include "cli/run_program.h"

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace rgpu::cli {

// The directory holding this executable.
std::string SelfDir() {
  char path[PATH_MAX] = {};
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  std::string p = n > 0 ? std::string(path, n) : ".";
  return p.substr(0, p.rfind('/'));
}

std::string JoinList(const std::vector<std::string>& list) {
  std::string out;
  for (const std::string& item : list) out += (out.empty() ? "" : ",") + item;
  return out;
}

bool Exists(const std::string& path) { return access(path.c_str(), R_OK) == 0; }

// The interposer library: RGPU_LIBDIR/librgpu-cuda.so, else in ../lib/rgpu (installed) or ../lib
// (the build tree) beside this program.
std::string FindInterposer() {
  if (const char* dir = getenv("RGPU_LIBDIR")) return std::string(dir) + "/librgpu-cuda.so";
  const std::string installed = SelfDir() + "/../lib/rgpu/librgpu-cuda.so";
  if (Exists(installed)) return installed;
  return SelfDir() + "/../lib/librgpu-cuda.so";
}

int RunProgram(const std::string& server, const std::string& token, std::vector<std::string> argv) {
  if (argv.empty()) {
    fprintf(stderr, "rgpu run: no program given (rgpu run --server URL -- PROGRAM ARGS...)\n");
    return 2;
  }
  std::string lib = FindInterposer();
  if (!Exists(lib)) {
    fprintf(stderr, "rgpu run: interposer library not found at %s\n", lib.c_str());
    return 2;
  }
  char resolved[PATH_MAX];
  if (realpath(lib.c_str(), resolved) != nullptr) lib = resolved;
  std::string preload = lib;
  // HIP programs get the HIP face beside it (it loads nothing in a process that never calls HIP).
  const std::string hip = lib.substr(0, lib.rfind('/') + 1) + "librgpu-hip.so";
  if (Exists(hip)) preload += ":" + hip;
  // NVML's face too, so that dlopen("libnvidia-ml.so.1") finds it (tools read NVML before CUDA).
  const std::string nvml = lib.substr(0, lib.rfind('/') + 1) + "librgpu-nvml.so";
  if (Exists(nvml)) preload += ":" + nvml;
  if (const char* existing = getenv("LD_PRELOAD"); existing && *existing) {
    preload += std::string(":") + existing;
  }
  setenv("LD_PRELOAD", preload.c_str(), 1);
  if (!server.empty()) setenv("RGPU_SERVER", server.c_str(), 1);
  if (!token.empty()) setenv("RGPU_TOKEN", token.c_str(), 1);
  if (getenv("RGPU_SERVER") == nullptr) {
    fprintf(stderr, "rgpu run: no server: pass --server URL or set RGPU_SERVER\n");
    return 2;
  }
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  execvp(args[0], args.data());
  fprintf(stderr, "rgpu run: cannot run %s: %s\n", args[0], strerror(errno));
  return 127;
}

}  // namespace rgpu::cli
