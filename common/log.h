// Levelled logging to stderr. The threshold comes from the RGPU_LOG environment variable
// (error, warn, info, debug, or off) read on first use, or from SetLogLevel. A library that is a
// guest in someone else's process (the interposer) defaults to off; daemons default to info.
#pragma once

#include <cstdarg>

namespace rgpu {

enum class LogLevel { kOff = 0, kError = 1, kWarn = 2, kInfo = 3, kDebug = 4 };

// Sets the default used when RGPU_LOG is unset, and the name printed in each line.
// Call once at start-up, before other threads log.
void InitLogging(const char* component, LogLevel default_level);

// Overrides the threshold (RGPU_LOG included).
void SetLogLevel(LogLevel level);

// True when a message at `level` would be printed.
bool LogEnabled(LogLevel level);

// printf-style; one line per call, written atomically.
void Log(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void LogV(LogLevel level, const char* fmt, va_list ap);

}  // namespace rgpu

#define RGPU_LOG_ERROR(...) ::rgpu::Log(::rgpu::LogLevel::kError, __VA_ARGS__)
#define RGPU_LOG_WARN(...) ::rgpu::Log(::rgpu::LogLevel::kWarn, __VA_ARGS__)
#define RGPU_LOG_INFO(...) ::rgpu::Log(::rgpu::LogLevel::kInfo, __VA_ARGS__)
#define RGPU_LOG_DEBUG(...)                               \
  do {                                                    \
    if (::rgpu::LogEnabled(::rgpu::LogLevel::kDebug))     \
      ::rgpu::Log(::rgpu::LogLevel::kDebug, __VA_ARGS__); \
  } while (0)
