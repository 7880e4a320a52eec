// The process-wide UCP contexts, one per transport scheme, created on first use and kept for the
// life of the process (UCP contexts are expensive and shared by every worker).
#pragma once

#include <ucp/api/ucp.h>

#include "common/status.h"
#include "transport/url.h"

namespace rgpu::ucx {

// Returns the context for `scheme`, creating it on first call. Thread-safe.
//   tcp: UCX_TLS=tcp unless the environment sets UCX_TLS.
//   shm: UCX_TLS=sysv,posix,tcp and UCX_RNDV_SCHEME=am (the socket only sets the connection up;
//        all data, rendezvous included, goes through shared-memory active messages). CMA is left
//        out: a CMA rendezvous still in flight when the peer dies trips an assertion in UCX 1.13
//        when the endpoint is destroyed.
// Keepalive is enabled so that a silent peer is detected (RGPU_KEEPALIVE_MS, default 2000).
Status GetContext(TransportUrl::Scheme scheme, ucp_context_h* out);

// The context for shared-memory data between peers on one host, after a shm-scheme connection
// has bootstrapped over the socket: UCX_TLS=sysv,posix,self (what ucx_perftest's floor uses)
// unless the environment sets UCX_TLS, and UCX_RNDV_SCHEME=am. It has no socket transport, so
// progressing its workers never polls a socket. Thread-safe.
Status GetSharedMemoryDataContext(ucp_context_h* out);

// Creates a single-threaded worker with wake-up support on `context`.
Status CreateWorker(ucp_context_h context, ucp_worker_h* out);

// The active-message id every rgpu message uses.
constexpr unsigned kAmId = 7;
// The active-message id of the transport's own set-up messages (worker-address exchange).
constexpr unsigned kControlAmId = 8;

// "UCX: <status string>" with context.
Status FromUcs(ucs_status_t status, const char* what);

}  // namespace rgpu::ucx
