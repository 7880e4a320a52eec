// bench/placement_sim's results across seeds, traces and policies, and their outputs: the JSON
// the issue asks for, a Markdown table, and the TSV files plot.sh draws.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "bench/placement_sim/simulator.h"

namespace rgpu::placement_sim {

// Experiment 1, one policy on one trace: its runs over the seeds.
struct ArrivalSummary {
  std::vector<ArrivalResult> runs;
  double Mean() const;    // unallocated_pct
  double Stddev() const;  // over the seeds
  double Min() const;
  double Max() const;
  double MeanFailedPods() const;
  double MeanSeconds() const;
  // The mean curve (points at the same arrived loads in every run).
  std::vector<CurvePoint> MeanCurve() const;
};

// FGD's published unallocated GPU share at 100% arrived load (USENIX ATC'23, Table in the data's
// README) for a trace and one of our policies, or a negative value when it has none.
double PublishedUnallocatedPct(const std::string& trace, const std::string& policy);

// trace -> policy -> summary, in the order given.
struct ArrivalReport {
  std::string default_policy;
  int seeds = 0;
  int first_seed = 1;
  double target_load = 1;
  std::vector<std::string> traces, policies;
  std::map<std::string, std::map<std::string, ArrivalSummary>> results;
};

std::string ArrivalJson(const ArrivalReport& r);
std::string ArrivalTable(const ArrivalReport& r);
// One row per (trace, arrived load), one column per policy (mean unallocated %).
std::string ArrivalCurvesTsv(const ArrivalReport& r);

// Experiment 2: trace -> "discipline+policy" -> result.
struct QueueReport {
  std::string default_policy;
  QueueOptions options;
  std::vector<std::string> traces, runs;  // runs: "discipline+policy", in order
  std::map<std::string, std::map<std::string, QueueResult>> results;
  std::string baseline = "fcfs+best-fit";  // the reduction in mean wait is against this
};

std::string QueueJson(const QueueReport& r);
std::string QueueTable(const QueueReport& r);
// Long format: trace, run, time, allocated %, fragmented %, waiting pods.
std::string QueueSeriesTsv(const QueueReport& r);

}  // namespace rgpu::placement_sim
