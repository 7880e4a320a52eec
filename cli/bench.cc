#include "cli/bench.h"
#include "cli/run_program.h"

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace rgpu::cli {
namespace {

// Starts `argv` with `env` added to the environment; stdout/stderr to `out_path` when given;
// on CPU `cpu` only when it is not negative.
pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
            const std::string& out_path, int cpu = -1) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  if (cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
  }
  for (const std::string& e : env) putenv(strdup(e.c_str()));
  if (!out_path.empty()) {
    FILE* f = fopen(out_path.c_str(), "w");
    if (f != nullptr) {
      dup2(fileno(f), 1);
      dup2(fileno(f), 2);
    }
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execvp(args[0], args.data());
  _exit(127);
}

int Wait(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs a command to completion (on CPU `cpu` when not negative) and returns its output; rc
// through *rc.
std::string Run(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                const std::string& scratch, int* rc, int cpu = -1) {
  pid_t pid = Spawn(argv, env, scratch, cpu);
  *rc = Wait(pid);
  return ReadAll(scratch);
}

// The flat JSON object driver_bench prints: "key": number pairs.
std::map<std::string, double> ParseFlatJson(const std::string& text) {
  std::map<std::string, double> out;
  std::regex pair("\"([A-Za-z0-9_]+)\"\\s*:\\s*([-+0-9.eE]+)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), pair); it != std::sregex_iterator();
       ++it) {
    out[(*it)[1]] = std::stod((*it)[2]);
  }
  return out;
}

std::vector<std::string> UcxEnv(const std::string& transport) {
  // The floor runs with the UCX settings rgpu itself uses for that transport.
  if (transport == "shm") return {"UCX_TLS=sysv,posix,self", "UCX_RNDV_SCHEME=am"};
  return {"UCX_TLS=tcp", "UCX_NET_DEVICES=lo"};
}

// One ucx_perftest measurement: returns the "Final:" fields (iterations, latency 50%, average,
// overall, bandwidth average, overall, rate average, overall), empty on failure.
std::vector<double> PerfTest(const std::string& transport, const std::string& test, size_t size,
                             int iterations, const std::string& scratch, int port) {
  std::vector<std::string> env = UcxEnv(transport);
  pid_t server =
      Spawn({"ucx_perftest", "-p", std::to_string(port), "-c", "0"}, env, scratch + ".server");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  int rc = 0;
  std::string out = Run({"ucx_perftest", "127.0.0.1", "-p", std::to_string(port), "-c", "1", "-t",
                         test, "-s", std::to_string(size), "-n", std::to_string(iterations), "-w",
                         std::to_string(std::max(2, iterations / 20))},
                        env, scratch, &rc);
  kill(server, SIGTERM);
  Wait(server);
  std::vector<double> fields;
  size_t at = out.rfind("Final:");
  if (rc != 0 || at == std::string::npos) return fields;
  std::istringstream line(out.substr(at + 6));
  double v;
  while (line >> v) fields.push_back(v);
  return fields;
}

// A kernel socket round trip on loopback by sockperf's ping-pong of 64-byte messages: over TCP
// (blocking sockets, Nagle off) or over UDP (non-blocking, busy-polled: the leanest exchange the
// kernel offers). Twice sockperf's median one-way figure (its mean is skewed by the VM's rare
// millisecond stalls); 0 when sockperf is missing or fails, or when the run stalled (sockperf
// sometimes falls into a mode of one message per timer tick, 4 ms here: fewer than 1000
// observations a second).
double SockperfRttUs(bool tcp, int seconds, const std::string& scratch, int port) {
  std::vector<std::string> mode =
      tcp ? std::vector<std::string>{"--tcp"} : std::vector<std::string>{"--nonblocked"};
  std::vector<std::string> server_args = {"sockperf",  "server", "-i",
                                          "127.0.0.1", "-p",     std::to_string(port)};
  server_args.insert(server_args.end(), mode.begin(), mode.end());
  pid_t server = Spawn(server_args, {}, scratch + ".server");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // (--mps=max with --nonblocked makes sockperf stall for milliseconds: UDP runs without it.)
  std::vector<std::string> client_args = {
      "sockperf",           "ping-pong", "-i", "127.0.0.1", "-p",
      std::to_string(port), "-m",        "64", "-t",        std::to_string(seconds)};
  if (tcp) client_args.push_back("--mps=max");
  client_args.insert(client_args.end(), mode.begin(), mode.end());
  int rc = 0;
  std::string out = Run(client_args, {}, scratch, &rc);
  kill(server, SIGTERM);
  Wait(server);
  std::smatch m, total;
  if (rc != 0 || !std::regex_search(out, m, std::regex("percentile 50\\.000 = +([0-9.]+)")) ||
      !std::regex_search(out, total, std::regex("Total ([0-9]+) observations")) ||
      std::stod(total[1]) < 1000.0 * seconds) {
    return 0;
  }
  return 2 * std::stod(m[1]);
}

// The kernel's TCP bulk bandwidth on loopback: iperf3 sending 1 GiB in 1 MiB writes, in MiB/s.
// 0 when iperf3 is missing or fails.
double Iperf3MiBps(const std::string& scratch, int port) {
  pid_t server = Spawn({"iperf3", "-s", "-1", "-p", std::to_string(port)}, {}, scratch + ".server");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  int rc = 0;
  std::string out =
      Run({"iperf3", "-c", "127.0.0.1", "-p", std::to_string(port), "-n", "1G", "-l", "1M", "-J"},
          {}, scratch, &rc);
  kill(server, SIGTERM);
  Wait(server);
  // The receiver's figure: the last "bits_per_second" (end.sum_received).
  std::regex field("\"bits_per_second\"\\s*:\\s*([0-9.eE+]+)");
  double bits = 0;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), field); it != std::sregex_iterator();
       ++it) {
    bits = std::stod((*it)[1]);
  }
  return rc == 0 ? bits / 8 / (1 << 20) : 0;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int RunBench(const BenchOptions& o) {
  if (o.transport != "tcp" && o.transport != "shm" && o.transport != "sock" &&
      o.transport != "tls") {
    fprintf(stderr, "rgpu bench: --transport must be tcp, shm, sock or tls\n");
    return 2;
  }
  if (o.pin && sysconf(_SC_NPROCESSORS_ONLN) < 2) {
    fprintf(stderr, "rgpu bench: --pin needs cpus 0 and 1\n");
    return 2;
  }
  // sock:// and tls:// (TLS over the same sockets) are measured against the kernel's sockets.
  const bool kernel_socket = o.transport == "sock" || o.transport == "tls";
  const std::string bin = SelfDir(), lib = bin + "/../lib";
  const std::string bench = bin + "/driver_bench", kernels = lib + "/rgpu-bench-kernels.fatbin";
  char tmpl[] = "/tmp/rgpu-bench-XXXXXX";
  const std::string work = mkdtemp(tmpl) ? tmpl : "/tmp";
  const int reps = o.quick ? 1 : 3;
  const int base_port = 20000 + getpid() % 20000;

  // The floors. UCX's (ucx_perftest on the same transport, same settings) for tcp and shm; the
  // kernel's sockets (sockperf, iperf3) for sock, and beside UCX's for tcp.
  // am_lat: perftest's mean round trip (its "overall": the run's time over its iterations, the
  // statistic driver_bench's null round trip is); am_lat_median: its per-iteration median.
  std::vector<double> am_lat, am_lat_median, am_bw, socket_lat, udp_lat, socket_bw;
  // The socket floors are the best of at least three runs: sockperf's runs vary more than the
  // links they measure (see SockperfRttUs).
  const int floor_reps = o.transport == "shm" ? reps : std::max(reps, 3);
  for (int i = 0; i < floor_reps; ++i) {
    const int port = base_port + 5 * i;
    if (!kernel_socket && i < reps) {
      auto lat = PerfTest(o.transport, "ucp_am_lat", 64, o.quick ? 5000 : 20000,
                          work + "/perftest.txt", port);
      // "Final:" iterations, then one-way latencies: median, last interval's mean, overall mean.
      if (lat.size() >= 4) {
        am_lat.push_back(2 * lat[3]);
        am_lat_median.push_back(2 * lat[1]);
      }
      auto bw = PerfTest(o.transport, "ucp_am_bw", size_t{64} << 20, o.quick ? 5 : 20,
                         work + "/perftest.txt", port + 1);
      if (bw.size() >= 6) am_bw.push_back(bw[4] * 1e6 / (1 << 20));  // MB/s -> MiB/s
    }
    if (o.transport != "shm") {
      if (double rtt = SockperfRttUs(true, 1, work + "/sockperf.txt", port + 2); rtt > 0) {
        socket_lat.push_back(rtt);
      }
      if (double rtt = SockperfRttUs(false, 1, work + "/sockperf.txt", port + 3); rtt > 0) {
        udp_lat.push_back(rtt);
      }
      if (double bw = Iperf3MiBps(work + "/iperf3.txt", port + 4); bw > 0) socket_bw.push_back(bw);
    }
  }
  if (!kernel_socket && (am_lat.empty() || am_bw.empty())) {
    fprintf(stderr, "rgpu bench: ucx_perftest failed (is ucx-utils installed?)\n%s\n",
            ReadAll(work + "/perftest.txt").c_str());
    return 1;
  }
  if (kernel_socket && (socket_lat.empty() || socket_bw.empty())) {
    fprintf(stderr, "rgpu bench: sockperf or iperf3 failed (are they installed?)\n%s\n%s\n",
            ReadAll(work + "/sockperf.txt").c_str(), ReadAll(work + "/iperf3.txt").c_str());
    return 1;
  }
  // The socket floors: the best run of each.
  const double socket_rtt =
      socket_lat.empty() ? 0 : *std::min_element(socket_lat.begin(), socket_lat.end());
  const double udp_rtt = udp_lat.empty() ? 0 : *std::min_element(udp_lat.begin(), udp_lat.end());
  const double socket_mibps =
      socket_bw.empty() ? 0 : *std::max_element(socket_bw.begin(), socket_bw.end());
  // What the ratios are taken against: the transport's own floor.
  const double floor_rtt = kernel_socket ? socket_rtt : Median(am_lat);
  const double floor_bw = kernel_socket ? socket_mibps : Median(am_bw);

  // rgpu-server on the software GPU.
  pid_t server = Spawn({bin + "/rgpu-server", "--listen", o.transport + "://127.0.0.1:0",
                        "--backend", "softgpu", "--port-file", work + "/url"},
                       {}, work + "/server.log", o.pin ? 0 : -1);
  std::string url;
  for (int i = 0; i < 200 && url.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    url = ReadAll(work + "/url");
  }
  while (!url.empty() && (url.back() == '\n')) url.pop_back();
  if (url.empty()) {
    fprintf(stderr, "rgpu bench: rgpu-server did not start:\n%s\n",
            ReadAll(work + "/server.log").c_str());
    return 1;
  }
  std::vector<std::string> args = {bench, kernels};
  if (o.quick) args.push_back("--quick");
  int rc = 0;
  std::string remote_out =
      Run(args, {"LD_PRELOAD=" + lib + "/librgpu-cuda.so", "RGPU_SERVER=" + url},
          work + "/remote.txt", &rc, o.pin ? 1 : -1);
  // The null round trip again in rounds, each right after a floor measurement of its own: on a
  // host whose speed drifts by tens of percent within minutes (a VM), the ratio of each pair is
  // steadier than that of figures taken a minute apart.
  std::vector<double> paired_floor, paired_null, paired_ratio;
  if (rc == 0 && !kernel_socket) {
    const int rounds = o.quick ? 3 : 5;
    for (int i = 0; i < rounds; ++i) {
      auto lat = PerfTest(o.transport, "ucp_am_lat", 64, o.quick ? 5000 : 20000,
                          work + "/perftest.txt", base_port + 5 * floor_reps + i);
      int null_rc = 0;
      std::map<std::string, double> one =
          ParseFlatJson(Run({bench, kernels, "--null-only"},
                            {"LD_PRELOAD=" + lib + "/librgpu-cuda.so", "RGPU_SERVER=" + url},
                            work + "/null.txt", &null_rc, o.pin ? 1 : -1));
      if (lat.size() < 4 || null_rc != 0 || one.count("null_rtt_us") == 0) continue;
      paired_floor.push_back(2 * lat[3]);
      paired_null.push_back(one["null_rtt_us"]);
      paired_ratio.push_back(one["null_rtt_us"] / (2 * lat[3]));
    }
  }
  kill(server, SIGTERM);
  Wait(server);
  if (rc != 0) {
    fprintf(stderr, "rgpu bench: remote run failed:\n%s\n", remote_out.c_str());
    return 1;
  }
  std::string local_out =
      Run(args, {"LD_LIBRARY_PATH=" + lib + "/softgpu-direct"}, work + "/local.txt", &rc);
  if (rc != 0) {
    fprintf(stderr, "rgpu bench: local run failed:\n%s\n", local_out.c_str());
    return 1;
  }
  std::map<std::string, double> remote = ParseFlatJson(remote_out);
  std::map<std::string, double> local = ParseFlatJson(local_out);

  std::map<std::string, double> result;
  for (const auto& [k, v] : remote) result[k] = v;
  if (!am_lat.empty()) result["ucx_am_rtt_us"] = Median(am_lat);
  if (!am_lat_median.empty()) result["ucx_am_rtt_median_us"] = Median(am_lat_median);
  if (!am_bw.empty()) result["ucx_am_bw_64MiB_MiBps"] = Median(am_bw);
  if (socket_rtt > 0) result["socket_rtt_us"] = socket_rtt;
  if (socket_mibps > 0) result["socket_bw_MiBps"] = socket_mibps;
  if (udp_rtt > 0) result["udp_busy_poll_rtt_us"] = udp_rtt;
  result["floor_rtt_us"] = floor_rtt;
  result["floor_bw_MiBps"] = floor_bw;
  result["local_launch_per_s"] = local["async_launch_per_s"];
  result["local_sync_launch_us"] = local["sync_launch_us"];
  result["local_chatty_s"] = local["chatty_s"];
  // The targets, as ratios.
  result["null_rtt_vs_floor"] = result["null_rtt_us"] / floor_rtt;
  if (!am_lat_median.empty()) {
    result["null_rtt_vs_floor_median"] = result["null_rtt_us"] / result["ucx_am_rtt_median_us"];
  }
  if (!paired_ratio.empty()) {
    result["null_rtt_paired_us"] = Median(paired_null);
    result["ucx_am_rtt_paired_us"] = Median(paired_floor);
    result["null_rtt_vs_floor_paired"] = Median(paired_ratio);
    result["null_rtt_vs_floor_paired_max"] =
        *std::max_element(paired_ratio.begin(), paired_ratio.end());
  }
  if (!socket_lat.empty()) result["null_rtt_vs_socket"] = result["null_rtt_us"] / socket_rtt;
  if (udp_rtt > 0) result["null_rtt_vs_udp"] = result["null_rtt_us"] / udp_rtt;
  result["async_vs_local_launch"] = result["async_launch_per_s"] / result["local_launch_per_s"];
  result["async_vs_sync_launch"] = result["async_launch_per_s"] * result["sync_launch_us"] / 1e6;
  result["h2d_pinned_vs_floor"] = result["h2d_pinned_64MiB_MiBps"] / floor_bw;
  result["d2h_pinned_vs_floor"] = result["d2h_pinned_64MiB_MiBps"] / floor_bw;
  result["chatty_vs_local"] = result["chatty_s"] / result["local_chatty_s"];
  // The software GPU in process has no graphs: a graph's nodes against the same kernels launched
  // one by one, through rgpu and in process.
  result["graph_vs_async_launch"] = result["graph_nodes_per_s"] / result["async_launch_per_s"];
  result["graph_vs_local_launch"] = result["graph_nodes_per_s"] / result["local_launch_per_s"];

  printf("rgpu bench over %s (software GPU; medians; floor: %s)\n", o.transport.c_str(),
         kernel_socket ? "sockperf TCP round trip, iperf3 bandwidth"
                       : "ucx_perftest, mean round trip");
  printf("  placement: %s\n", o.pin ? "rgpu-server on cpu 0, the program on cpu 1 (as the floor)"
                                    : "where the kernel puts them (ucx_perftest: cpus 0 and 1)");
  printf("  %-28s %12s %12s %10s\n", "metric", "rgpu", "floor/local", "ratio");
  auto row = [&](const char* name, double value, double reference, const char* ratio_key) {
    printf("  %-28s %12.2f %12.2f %10.2f\n", name, value, reference, result[ratio_key]);
  };
  row("null round trip (us)", result["null_rtt_us"], floor_rtt, "null_rtt_vs_floor");
  if (!kernel_socket && !am_lat_median.empty()) {
    row("  against UCX's median (us)", result["null_rtt_us"], result["ucx_am_rtt_median_us"],
        "null_rtt_vs_floor_median");
  }
  if (!paired_ratio.empty()) {
    char name[64];
    snprintf(name, sizeof name, "  paired, %zu rounds (us)", paired_ratio.size());
    row(name, result["null_rtt_paired_us"], result["ucx_am_rtt_paired_us"],
        "null_rtt_vs_floor_paired");
    printf("  %-28s %12s %12s %10.2f\n", "    (the worst round's ratio)", "", "",
           result["null_rtt_vs_floor_paired_max"]);
  }
  if (!kernel_socket && socket_rtt > 0) {
    row("  against a TCP socket (us)", result["null_rtt_us"], result["socket_rtt_us"],
        "null_rtt_vs_socket");
  }
  if (udp_rtt > 0) {
    row("  against busy-polled UDP (us)", result["null_rtt_us"], result["udp_busy_poll_rtt_us"],
        "null_rtt_vs_udp");
  }
  row("async launches (/s)", result["async_launch_per_s"], result["local_launch_per_s"],
      "async_vs_local_launch");
  printf("  %-28s %12.2f %12s %10.2f\n", "sync launch (us)", result["sync_launch_us"], "",
         result["async_vs_sync_launch"]);
  row("h2d pinned 64MiB (MiB/s)", result["h2d_pinned_64MiB_MiBps"], floor_bw,
      "h2d_pinned_vs_floor");
  row("d2h pinned 64MiB (MiB/s)", result["d2h_pinned_64MiB_MiBps"], floor_bw,
      "d2h_pinned_vs_floor");
  printf("  %-28s %12.2f\n", "h2d pageable 64MiB (MiB/s)", result["h2d_pageable_64MiB_MiBps"]);
  row("chatty 20k launches (s)", result["chatty_s"], result["local_chatty_s"], "chatty_vs_local");
  row("graph nodes (/s)", result["graph_nodes_per_s"], result["local_launch_per_s"],
      "graph_vs_local_launch");
  printf("  %-28s %12.2f\n", "graph launch call (us)", result["graph_launch_us"]);

  std::ostringstream json;
  json << "{\"transport\": \"" << o.transport << "\", \"pinned\": " << (o.pin ? 1 : 0);
  for (const auto& [k, v] : result) json << ", \"" << k << "\": " << v;
  json << "}";
  printf("%s\n", json.str().c_str());
  if (!o.json_path.empty()) std::ofstream(o.json_path) << json.str() << "\n";

  if (!o.png_path.empty()) {
    std::ofstream data(work + "/latency.dat");
    for (size_t size = 4; size <= (size_t{64} << 20); size *= 4) {
      const std::string s = std::to_string(size);
      data << size << " " << result["d2h_us_" + s] << " " << result["h2d_us_" + s] << "\n";
    }
    data.close();
    std::ofstream plot(work + "/latency.gp");
    plot << "set terminal png size 900,560\nset output '" << o.png_path << "'\n"
         << "set logscale xy\nset xlabel 'copy size (bytes)'\nset ylabel 'latency (us)'\n"
         << "set title 'rgpu copy latency over " << o.transport << " (software GPU)'\nset grid\n"
         << "plot '" << work << "/latency.dat' using 1:2 with linespoints title 'device to host', "
         << "'' using 1:3 with linespoints title 'host to device + sync'\n";
    plot.close();
    if (Wait(Spawn({"gnuplot", work + "/latency.gp"}, {}, work + "/gnuplot.txt")) != 0) {
      fprintf(stderr, "rgpu bench: gnuplot failed or is not installed; no chart written\n");
    }
  }
  return 0;
}

}  // namespace rgpu::cli
