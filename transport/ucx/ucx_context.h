// The process-wide UCP contexts, one per transport scheme, created on first use and kept for the
// life of the process (UCP contexts are expensive and shared by every worker).
#pragma once

#include <sys/socket.h>
#include <ucp/api/ucp.h>

#include <string>

#include "common/status.h"
#include "transport/url.h"

namespace rgpu::ucx {

// The network interface (e.g. "lo", "eth0") a connection with `peer` goes through: for a client
// the interface routing to the server, for a server the one holding its listen address; "" when
// it cannot be told (a wildcard address), meaning every interface.
std::string InterfaceFor(const sockaddr_storage& peer, socklen_t len, bool listening);

// Returns the context for `scheme`, creating it on first call. Thread-safe. With `net_device`
// (InterfaceFor), the context's socket transport uses that interface only (UCX_NET_DEVICES,
// unless the environment sets it): every idle interface would cost an extra system call on each
// poll of the worker (measured: 4 µs of a 20 µs TCP round trip with eth0 beside lo). The first
// call's choice holds for the process (a process talks to one server, or listens on one address).
//   tcp: UCX_TLS=tcp unless the environment sets UCX_TLS.
//   shm: UCX_TLS=sysv,posix,tcp and UCX_RNDV_SCHEME=am (the socket only sets the connection up;
//        all data, rendezvous included, goes through shared-memory active messages). CMA is left
//        out: a CMA rendezvous still in flight when the peer dies trips an assertion in UCX 1.13
//        when the endpoint is destroyed.
// Keepalive is enabled so that a silent peer is detected (RGPU_KEEPALIVE_MS, default 2000).
Status GetContext(TransportUrl::Scheme scheme, const std::string& net_device, ucp_context_h* out);

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
