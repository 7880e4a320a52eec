// `rgpu status --server URL [--json]`: the server's live sessions (tenant, memory in use, GPU
// time, calls, bytes each way, queue depth).
#pragma once

#include <string>

namespace rgpu::cli {

// Returns the process exit code.
int RunStatus(const std::string& server_url, bool json);

}  // namespace rgpu::cli
