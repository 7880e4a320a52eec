// `rgpu bench`: runs driver_bench through rgpu against a fresh rgpu-server on the software GPU,
// the same program with the software GPU in-process (no remoting), and ucx_perftest on the same
// transport as the floor, all in one run; prints a table, writes JSON and, when gnuplot is
// installed, a PNG chart of the copy-latency curve.
#pragma once

#include <string>

namespace rgpu::cli {

struct BenchOptions {
  std::string transport = "tcp";  // tcp or shm
  std::string json_path;          // where to write the JSON object (empty: stdout only)
  std::string png_path;           // chart of copy latency (empty: none)
  bool quick = false;             // fewer repetitions (for smoke tests)
  // rgpu-server on CPU 0 and the measured program on CPU 1, as the floor's ucx_perftest runs
  // (-c 0, -c 1); otherwise both go where the kernel puts them.
  bool pin = false;
};

// Returns the process exit code.
int RunBench(const BenchOptions& options);

}  // namespace rgpu::cli
