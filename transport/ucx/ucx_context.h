// The process-wide UCP contexts, one per transport scheme, created on first use and kept for the
// life of the process (UCP contexts are expensive and shared by every worker).
#pragma once

#include <sys/socket.h>
#include <ucp/api/ucp.h>

#include <string>

#include "common/status.h"

namespace rgpu::ucx {

// The network interface (e.g. "lo", "eth0") a connection with `peer` goes through: for a client
// the interface routing to the server, for a server the one holding its listen address; "" when
// it cannot be told (a wildcard address), meaning every interface.
std::string InterfaceFor(const sockaddr_storage& peer, socklen_t len, bool listening);

// Returns the context of tcp:// connections, creating it on first call. Thread-safe. With
// `net_device` (InterfaceFor), the context's socket transport uses that interface only
// (UCX_NET_DEVICES, unless the environment sets it): every idle interface would cost an extra
// system call on each poll of the worker (measured: 4 µs of a 20 µs TCP round trip with eth0
// beside lo). The first call's choice holds for the process (a process talks to one server, or
// listens on one address). UCX_TLS=tcp unless the environment sets UCX_TLS.
// Keepalive is enabled so that a silent peer is detected (RGPU_KEEPALIVE_MS, default 2000).
Status GetTcpContext(const std::string& net_device, ucp_context_h* out);

// The context of shm:// connections (peers on one host, whose set-up goes over a kernel socket:
// UcxChannel::OverSharedMemory): UCX_TLS=posix,self (what ucx_perftest's floor uses) unless the
// environment sets UCX_TLS, and UCX_RNDV_SCHEME=am (all data, rendezvous included, goes through
// shared-memory active messages). CMA is left out: a CMA rendezvous still in flight when the
// peer dies trips an assertion in UCX 1.13 when the endpoint is destroyed. No socket transport,
// so progressing its workers never polls a socket. Thread-safe.
Status GetSharedMemoryDataContext(ucp_context_h* out);

// Creates a single-threaded worker with wake-up support on `context`.
Status CreateWorker(ucp_context_h context, ucp_worker_h* out);

// The active-message id every rgpu message uses.
constexpr unsigned kAmId = 7;

// "UCX: <status string>" with context.
Status FromUcs(ucs_status_t status, const char* what);

}  // namespace rgpu::ucx
