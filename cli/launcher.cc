// rgpu: the command's front door. A plain `rgpu run --server URL [--token T]... -- PROGRAM ARGS`
// (every program start takes this path) is handled here, in a binary that links nothing but libc
// and the C++ runtime, so that starting a program costs an exec and not the loading of gRPC,
// OpenSSL, protobuf and UCX (about 40 libraries: tens of milliseconds). Everything else (run with
// a registry, every other command, --help, any option this does not know) is the full command,
// `rgpu-tool` beside this binary, exec'd with the same arguments.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/run_program.h"

namespace {

// Reads `rgpu run` arguments made only of --server and --token options (as `--server URL` or
// `--server=URL`) followed by `--` and a program. False for anything else: the full command then
// reads them (and says what is wrong, if anything is).
bool ReadPlainRun(int argc, char** argv, std::vector<std::string>* servers,
                  std::vector<std::string>* tokens, std::vector<std::string>* program) {
  // Takes argv[*i] (and its value) when it is `name` as an option; false otherwise.
  auto take = [&](int* i, const std::string& name, std::vector<std::string>* values) {
    const std::string arg = argv[*i];
    if (arg == name && *i + 1 < argc) {
      values->push_back(argv[++*i]);
      return true;
    }
    if (arg.rfind(name + "=", 0) != 0) return false;
    values->push_back(arg.substr(name.size() + 1));
    return true;
  };
  for (int i = 2; i < argc; ++i) {
    if (strcmp(argv[i], "--") == 0) {
      program->assign(argv + i + 1, argv + argc);
      return !program->empty();
    }
    if (!take(&i, "--server", servers) && !take(&i, "--token", tokens)) return false;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> servers, tokens, program;
  // With no --server, RGPU_SERVER names the servers, else RGPU_REGISTRY asks the full command
  // for a placement.
  if (argc >= 2 && strcmp(argv[1], "run") == 0 &&
      ReadPlainRun(argc, argv, &servers, &tokens, &program) &&
      (!servers.empty() || getenv("RGPU_SERVER") != nullptr)) {
    return rgpu::cli::RunProgram(rgpu::cli::JoinList(servers), rgpu::cli::JoinList(tokens),
                                 program);
  }
  const std::string tool = rgpu::cli::SelfDir() + "/rgpu-tool";
  execv(tool.c_str(), argv);
  fprintf(stderr, "rgpu: cannot run %s: %s\n", tool.c_str(), strerror(errno));
  return 127;
}
