// The server's figures in Prometheus text format: a collectable that reads every live session's
// statistics at each scrape (rgpu-server --metrics-port).
#pragma once

#include <functional>
#include <memory>

#include <prometheus/collectable.h>

#include "proto/rgpu.pb.h"

namespace rgpu::server {

// A collectable reporting, per session (labels session, tenant): rgpu_session_memory_bytes,
// rgpu_session_gpu_busy_seconds, rgpu_session_calls, rgpu_session_bytes_in,
// rgpu_session_bytes_out, rgpu_session_queue_depth; rgpu_sessions; and
// rgpu_sessions_ended_total (labels tenant, reason: exited, lost, closed, shutdown).
std::shared_ptr<prometheus::Collectable> MakeSessionMetrics(
    std::function<wire::StatusReply()> status);

}  // namespace rgpu::server
