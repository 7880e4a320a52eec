// The log outputs of the JIT options a module load or link takes (cuModuleLoadDataEx,
// cuLinkCreate's options), filled as the driver fills them. Shared by the client and softgpu.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

namespace rgpu {

// For each of CU_JIT_ERROR_LOG_BUFFER and CU_JIT_INFO_LOG_BUFFER among `options` whose buffer and
// size option the caller gave: writes `error_log` or `info_log` there, cut to fit and
// NUL-terminated, and sets the size option's value to the bytes written, the NUL included.
// `values` is the caller's array of option values (options and values may be null when count is
// 0). Not thread-safe with respect to the caller's buffers, which it writes.
inline void FillJitLogs(unsigned count, const CUjit_option* options, void** values,
                        const std::string& error_log, const std::string& info_log) {
  if (options == nullptr || values == nullptr) return;
  for (unsigned i = 0; i < count; ++i) {
    const bool errors = options[i] == CU_JIT_ERROR_LOG_BUFFER;
    if (!errors && options[i] != CU_JIT_INFO_LOG_BUFFER) continue;
    const CUjit_option size_option =
        errors ? CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES : CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES;
    for (unsigned k = 0; k < count; ++k) {
      if (options[k] != size_option) continue;
      const size_t capacity = reinterpret_cast<uintptr_t>(values[k]);
      char* buffer = static_cast<char*>(values[i]);
      if (buffer == nullptr || capacity == 0) break;
      const std::string& text = errors ? error_log : info_log;
      const size_t n = std::min(text.size(), capacity - 1);
      memcpy(buffer, text.data(), n);
      buffer[n] = '\0';
      values[k] = reinterpret_cast<void*>(static_cast<uintptr_t>(n + 1));
      break;
    }
  }
}

}  // namespace rgpu
