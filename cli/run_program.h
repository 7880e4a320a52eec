// Starting a program with rgpu's faces preloaded: what `rgpu run` does once it knows the
// program's servers and tokens. Shared by the lean front door (launcher.cc, the `rgpu` binary)
// and the full command (main.cc, `rgpu-tool`, for run with a registry placement). libc only.
#pragma once

#include <string>
#include <vector>

namespace rgpu::cli {

// The directory holding the running executable.
std::string SelfDir();

// `list` joined with commas (several servers or tokens as RGPU_SERVER and RGPU_TOKEN take them).
std::string JoinList(const std::vector<std::string>& list);

// True when `path` can be read.
bool Exists(const std::string& path);

// The interposer library: RGPU_LIBDIR/librgpu-cuda.so, else in ../lib/rgpu (installed) or ../lib
// (the build tree) beside this program.
std::string FindInterposer();

// Execs `argv` (the program and its arguments) with the CUDA face preloaded (and the HIP and NVML
// faces beside it when present), RGPU_SERVER set to `server` and RGPU_TOKEN to `token` (each left
// as the environment has it when empty). Returns only on failure: 2 for a usage error (no
// program, no interposer, no server), 127 when the program cannot be run; the reason is on
// stderr.
int RunProgram(const std::string& server, const std::string& token, std::vector<std::string> argv);

}  // namespace rgpu::cli
