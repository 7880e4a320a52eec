#include "server/metrics.h"

#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>

#include <string>
#include <vector>

namespace rgpu::server {
namespace {

class SessionMetrics final : public prometheus::Collectable {
 public:
  explicit SessionMetrics(std::function<wire::StatusReply()> status) : status_(std::move(status)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    const wire::StatusReply reply = status_();
    struct Field {
      const char* name;
      const char* help;
      prometheus::MetricType type;
      double (*value)(const wire::SessionStats&);
    };
    static const Field kFields[] = {
        {"rgpu_session_memory_bytes", "Device memory a session holds",
         prometheus::MetricType::Gauge,
         [](const wire::SessionStats& s) { return double(s.memory_bytes()); }},
        {"rgpu_session_gpu_busy_seconds", "Measured GPU time of a session's kernels",
         prometheus::MetricType::Counter,
         [](const wire::SessionStats& s) { return s.gpu_busy_seconds(); }},
        {"rgpu_session_calls", "Calls a session made", prometheus::MetricType::Counter,
         [](const wire::SessionStats& s) { return double(s.calls()); }},
        {"rgpu_session_bytes_in", "Payload bytes received from a session",
         prometheus::MetricType::Counter,
         [](const wire::SessionStats& s) { return double(s.bytes_in()); }},
        {"rgpu_session_bytes_out", "Payload bytes sent to a session",
         prometheus::MetricType::Counter,
         [](const wire::SessionStats& s) { return double(s.bytes_out()); }},
        {"rgpu_session_queue_depth", "Messages received from a session and not yet served",
         prometheus::MetricType::Gauge,
         [](const wire::SessionStats& s) { return double(s.queue_depth()); }},
    };
    std::vector<prometheus::MetricFamily> families;
    for (const Field& f : kFields) {
      prometheus::MetricFamily family;
      family.name = f.name;
      family.help = f.help;
      family.type = f.type;
      for (const wire::SessionStats& s : reply.sessions()) {
        prometheus::ClientMetric m;
        m.label = {{"session", std::to_string(s.session_id())},
                   {"tenant", s.tenant().empty() ? "-" : s.tenant()}};
        if (f.type == prometheus::MetricType::Counter) {
          m.counter.value = f.value(s);
        } else {
          m.gauge.value = f.value(s);
        }
        family.metric.push_back(std::move(m));
      }
      families.push_back(std::move(family));
    }
    prometheus::MetricFamily total;
    total.name = "rgpu_sessions";
    total.help = "Live sessions";
    total.type = prometheus::MetricType::Gauge;
    prometheus::ClientMetric m;
    m.gauge.value = reply.sessions_size();
    total.metric.push_back(m);
    families.push_back(std::move(total));
    // Sessions that have ended, by how: a program that exited, a connection lost, a session
    // the server closed, the server stopping.
    prometheus::MetricFamily ended;
    ended.name = "rgpu_sessions_ended_total";
    ended.help = "Sessions that have ended, by tenant and by how they ended";
    ended.type = prometheus::MetricType::Counter;
    for (const wire::EndedSessions& e : reply.ended()) {
      const std::pair<const char*, uint64_t> reasons[] = {{"exited", e.exited()},
                                                          {"lost", e.lost()},
                                                          {"closed", e.closed()},
                                                          {"shutdown", e.shutdown()}};
      for (const auto& [reason, count] : reasons) {
        prometheus::ClientMetric c;
        c.label = {{"tenant", e.tenant().empty() ? "-" : e.tenant()}, {"reason", reason}};
        c.counter.value = static_cast<double>(count);
        ended.metric.push_back(std::move(c));
      }
    }
    families.push_back(std::move(ended));
    return families;
  }

 private:
  std::function<wire::StatusReply()> status_;
};

}  // namespace

std::shared_ptr<prometheus::Collectable> MakeSessionMetrics(
    std::function<wire::StatusReply()> status) {
  return std::make_shared<SessionMetrics>(std::move(status));
}

}  // namespace rgpu::server
