// placement_sim: replays a public cluster trace (openb) through the registry's placement
// policies. See bench/placement_sim/README.md.
//   placement_sim --data DIR --experiment fgd|queueing --seeds N --json FILE
//                 [--table FILE] [--tsv FILE] [--png FILE] [--traces a,b] [--policies a,b]
//                 [--first-seed S] [--disciplines fcfs,sjf,backfill] [--load 1.0]
//                 [--offered-load 0.9 | --compress K] [--node-fraction F] [--jobs N]
//                 [--aging A]
#include <atomic>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <thread>

#include <CLI/CLI.hpp>

#include "bench/placement_sim/report.h"
#include "bench/placement_sim/simulator.h"
#include "bench/placement_sim/trace.h"

namespace sim = rgpu::placement_sim;

namespace {

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) fprintf(stderr, "placement_sim: cannot write %s\n", path.c_str());
  return static_cast<bool>(out);
}

// Runs `work(i)` for i in [0, n) on `jobs` threads; the first failure wins.
rgpu::Status Parallel(size_t n, int jobs, const std::function<rgpu::Status(size_t)>& work) {
  std::atomic<size_t> next{0};
  std::mutex mu;
  rgpu::Status first;
  auto worker = [&] {
    for (size_t i; (i = next++) < n;) {
      rgpu::Status s = work(i);
      std::lock_guard<std::mutex> lock(mu);
      if (!s.ok() && first.ok()) first = s;
    }
  };
  std::vector<std::thread> threads;
  for (int j = 1; j < jobs; ++j) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
  return first;
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

int main(int argc, char** argv) {
  std::string data, experiment = "fgd", json_path, table_path, tsv_path, png_path;
  int seeds = 10, first_seed = 1, jobs = 1;
  std::vector<std::string> traces, policies = rgpu::registry::PlacementPolicyNames();
  std::vector<std::string> disciplines = {"fcfs", "sjf", "backfill"};
  double load = 1.0;
  sim::QueueOptions queue;
  CLI::App app{"placement_sim: a cluster trace replayed through the registry's placement"};
  app.add_option("--data", data, "folder with openb_node_list_gpu_node.csv and the pod lists")
      ->required();
  app.add_option("--experiment", experiment, "fgd (arrivals, no departures) or queueing")
      ->check(CLI::IsMember({"fgd", "queueing"}))
      ->capture_default_str();
  app.add_option("--seeds", seeds, "runs (arrival orders) per trace and policy")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--first-seed", first_seed, "seeds are first-seed, first-seed + 1, ...")
      ->capture_default_str();
  app.add_option("--json", json_path, "write the results as JSON here");
  app.add_option("--table", table_path, "write the Markdown table here (it is printed anyway)");
  app.add_option("--tsv", tsv_path, "write the curves (fgd) or time series (queueing) here");
  app.add_option("--png", png_path, "draw them here with plot.sh (gnuplot)");
  app.add_option("--traces", traces,
                 "pod lists (openb_pod_list_NAME.csv); default: all three "
                 "for fgd, those with times for queueing")
      ->delimiter(',');
  app.add_option("--policies", policies, "placement policies")->delimiter(',');
  app.add_option("--disciplines", disciplines, "queue disciplines (queueing)")->delimiter(',');
  app.add_option("--load", load, "fgd: arrived load to stop at, share of the GPUs")
      ->capture_default_str();
  app.add_option("--offered-load", queue.offered_load,
                 "queueing: compress arrivals until the GPU demand averages this share")
      ->capture_default_str();
  auto* compress =
      app.add_option("--compress", queue.compress, "queueing: divide arrival gaps by this instead");
  app.add_option("--node-fraction", queue.node_fraction,
                 "queueing: share of the trace's nodes in the cluster")
      ->capture_default_str();
  app.add_option("--aging", queue.queue_order.aging,
                 "queueing: the registry queue's aging weight (backfill-exact, backfill-noisy)")
      ->capture_default_str();
  app.add_option("--declared-low", queue.declared_low,
                 "queueing: backfill-noisy's smallest factor on a pod's duration")
      ->check(CLI::Range(0.01, 100.0))
      ->capture_default_str();
  app.add_option("--declared-high", queue.declared_high,
                 "queueing: backfill-noisy's largest factor on a pod's duration")
      ->check(CLI::Range(0.01, 100.0))
      ->capture_default_str();
  app.add_option("--jobs", jobs, "runs at once")->check(CLI::Range(1, 64))->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (queue.declared_low > queue.declared_high) {
    fprintf(stderr, "placement_sim: --declared-low must not exceed --declared-high\n");
    return 2;
  }
  if (compress->count() > 0) queue.offered_load = 0;

  if (traces.empty()) {
    traces = experiment == "fgd" ? std::vector<std::string>{"default", "gpushare100", "multigpu50"}
                                 : std::vector<std::string>{"default", "gpushare100"};
  }
  for (const auto& p : policies) {
    std::unique_ptr<rgpu::registry::PlacementPolicy> probe;
    rgpu::Status s = rgpu::registry::MakePlacementPolicy(p, 1, &probe);
    if (!s.ok()) {
      fprintf(stderr, "placement_sim: %s\n", s.message().c_str());
      return 2;
    }
  }
  std::vector<sim::TraceNode> nodes;
  rgpu::Status s = sim::LoadNodes(data + "/openb_node_list_gpu_node.csv", &nodes);
  std::map<std::string, std::vector<sim::TracePod>> pods;
  for (size_t i = 0; s.ok() && i < traces.size(); ++i) {
    s = sim::LoadPods(data + "/openb_pod_list_" + traces[i] + ".csv", &pods[traces[i]]);
  }
  if (!s.ok()) {
    fprintf(stderr, "placement_sim: %s\n", s.message().c_str());
    return 1;
  }

  std::string json, table, tsv;
  if (experiment == "fgd") {
    sim::ArrivalReport report;
    report.default_policy = rgpu::registry::kDefaultPlacementPolicy;
    report.seeds = seeds;
    report.first_seed = first_seed;
    report.target_load = load;
    report.traces = traces;
    report.policies = policies;
    struct Job {
      std::string trace, policy;
      int seed;
    };
    std::vector<Job> work;
    for (const auto& t : traces) {
      for (const auto& p : policies) {
        report.results[t][p].runs.resize(static_cast<size_t>(seeds));
        for (int k = 0; k < seeds; ++k) work.push_back({t, p, first_seed + k});
      }
    }
    s = Parallel(work.size(), jobs, [&](size_t i) {
      const Job& j = work[i];
      sim::ArrivalOptions options;
      options.seed = static_cast<uint64_t>(j.seed);
      options.target_load = load;
      sim::ArrivalResult* out =
          &report.results[j.trace][j.policy].runs[static_cast<size_t>(j.seed - first_seed)];
      rgpu::Status st = sim::RunArrivals(nodes, pods.at(j.trace), j.policy, options, out);
      if (st.ok()) {
        fprintf(stderr, "%s %s seed %d: %.2f%% unallocated (%.1f s)\n", j.trace.c_str(),
                j.policy.c_str(), j.seed, out->unallocated_pct, out->seconds);
      }
      return st;
    });
    json = sim::ArrivalJson(report);
    table = sim::ArrivalTable(report);
    tsv = sim::ArrivalCurvesTsv(report);
  } else {
    sim::QueueReport report;
    report.default_policy = rgpu::registry::kDefaultPlacementPolicy;
    report.options = queue;
    report.traces = traces;
    std::vector<std::pair<sim::Discipline, std::string>> runs;
    for (const auto& d : disciplines) {
      sim::Discipline discipline;
      s = sim::ParseDiscipline(d, &discipline);
      if (!s.ok()) {
        fprintf(stderr, "placement_sim: %s\n", s.message().c_str());
        return 2;
      }
      for (const auto& p : policies) {
        runs.emplace_back(discipline, p);
        report.runs.push_back(d + "+" + p);
      }
    }
    for (const auto& t : traces) {
      for (const auto& r : report.runs) report.results[t][r];
    }
    s = Parallel(traces.size() * runs.size(), jobs, [&](size_t i) {
      const std::string& trace = traces[i / runs.size()];
      const auto& [discipline, policy] = runs[i % runs.size()];
      sim::QueueOptions options = queue;
      options.discipline = discipline;
      options.seed = static_cast<uint64_t>(first_seed);
      sim::QueueResult* out = &report.results[trace][report.runs[i % runs.size()]];
      rgpu::Status st = sim::RunQueueing(nodes, pods.at(trace), policy, options, out);
      if (st.ok()) {
        fprintf(stderr, "%s %s: wait mean %.1f s p99 %.1f s (%.1f s)\n", trace.c_str(),
                report.runs[i % runs.size()].c_str(), out->wait_mean_s, out->wait_p99_s,
                out->seconds);
      }
      return st;
    });
    json = sim::QueueJson(report);
    table = sim::QueueTable(report);
    tsv = sim::QueueSeriesTsv(report);
  }
  if (!s.ok()) {
    fprintf(stderr, "placement_sim: %s\n", s.ToString().c_str());
    return 1;
  }
  printf("%s", table.c_str());
  bool ok = true;
  if (!json_path.empty()) ok &= WriteFile(json_path, json);
  if (!table_path.empty()) ok &= WriteFile(table_path, table);
  if (tsv_path.empty() && !png_path.empty()) tsv_path = png_path + ".tsv";
  if (!tsv_path.empty()) ok &= WriteFile(tsv_path, tsv);
  if (ok && !png_path.empty()) {
    const std::string command =
        ShellQuote(RGPU_PLACEMENT_PLOT) + " " + ShellQuote(tsv_path) + " " + ShellQuote(png_path);
    if (std::system(command.c_str()) != 0) {
      fprintf(stderr, "placement_sim: plotting failed: %s\n", command.c_str());
      ok = false;
    }
  }
  return ok ? 0 : 1;
}
