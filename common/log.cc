#include "common/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sys/time.h>
#include <unistd.h>

namespace rgpu {
namespace {

std::atomic<int> g_level{-1};
const char* g_component = "rgpu";
LogLevel g_default = LogLevel::kOff;

LogLevel ParseLevel(const char* s, LogLevel fallback) {
  if (s == nullptr || *s == '\0') return fallback;
  if (!strcmp(s, "off") || !strcmp(s, "0")) return LogLevel::kOff;
  if (!strcmp(s, "error")) return LogLevel::kError;
  if (!strcmp(s, "warn")) return LogLevel::kWarn;
  if (!strcmp(s, "info") || !strcmp(s, "1")) return LogLevel::kInfo;
  if (!strcmp(s, "debug") || !strcmp(s, "2")) return LogLevel::kDebug;
  return fallback;
}

int Level() {
  int l = g_level.load(std::memory_order_relaxed);
  if (l < 0) {
    l = static_cast<int>(ParseLevel(getenv("RGPU_LOG"), g_default));
    g_level.store(l, std::memory_order_relaxed);
  }
  return l;
}

}  // namespace

void InitLogging(const char* component, LogLevel default_level) {
  g_component = component;
  g_default = default_level;
  g_level.store(-1);
}

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }

bool LogEnabled(LogLevel level) { return static_cast<int>(level) <= Level(); }

void LogV(LogLevel level, const char* fmt, va_list ap) {
  if (!LogEnabled(level) || level == LogLevel::kOff) return;
  static const char kTag[] = {'-', 'E', 'W', 'I', 'D'};
  char line[2048];
  struct timeval tv;
  gettimeofday(&tv, nullptr);
  struct tm tm;
  localtime_r(&tv.tv_sec, &tm);
  int n = snprintf(line, sizeof line, "[%s %c %02d:%02d:%02d.%03ld %d] ", g_component,
                   kTag[static_cast<int>(level)], tm.tm_hour, tm.tm_min, tm.tm_sec,
                   static_cast<long>(tv.tv_usec / 1000), static_cast<int>(getpid()));
  if (n < 0) return;
  int m = vsnprintf(line + n, sizeof line - n - 1, fmt, ap);
  size_t len =
      n + (m < 0 ? 0 : (m >= static_cast<int>(sizeof line - n - 1) ? sizeof line - n - 2 : m));
  line[len++] = '\n';
  ssize_t ignored = write(2, line, len);
  (void)ignored;
}

void Log(LogLevel level, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  LogV(level, fmt, ap);
  va_end(ap);
}

}  // namespace rgpu
