// `rgpu status --server URL [--token CREDENTIAL | --operator-key-file FILE] [--json]`: the
// server's live sessions (tenant, memory in use, GPU time, calls, bytes each way, queue depth).
// The operator's key shows every session; a tenant's credential (RGPU_TOKEN) only its own.
#pragma once

#include <string>

namespace rgpu::cli {

// Returns the process exit code.
// `credential`: a tenant's credential or the operator's key, proven at the handshake.
int RunStatus(const std::string& server_url, const std::string& credential, bool json);

}  // namespace rgpu::cli
