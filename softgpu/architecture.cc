#include "softgpu/architecture.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace softgpu {
namespace {

constexpr Architecture kArchitectures[] = {
    // major, minor, shared/SM, shared/block opt-in, threads/SM, blocks/SM
    {7, 5, 64 * 1024, 64 * 1024, 1024, 16},   {8, 0, 164 * 1024, 163 * 1024, 2048, 32},
    {8, 6, 100 * 1024, 99 * 1024, 1536, 16},  {8, 9, 100 * 1024, 99 * 1024, 1536, 24},
    {9, 0, 228 * 1024, 227 * 1024, 2048, 32}, {10, 0, 228 * 1024, 227 * 1024, 2048, 32},
    {12, 0, 100 * 1024, 99 * 1024, 1536, 32},
};

Architecture FromEnvironment() {
  const Architecture fallback{};
  const char* s = getenv("RGPU_SOFTGPU_COMPUTE_CAPABILITY");
  if (s == nullptr || *s == '\0') return fallback;
  for (const Architecture& a : kArchitectures) {
    char name[16];
    snprintf(name, sizeof name, "%d.%d", a.major, a.minor);
    if (strcmp(name, s) == 0) return a;
  }
  fprintf(stderr,
          "softgpu: ignoring RGPU_SOFTGPU_COMPUTE_CAPABILITY=%s (expected 7.5, 8.0, 8.6, 8.9, 9.0, "
          "10.0 or 12.0)\n",
          s);
  return fallback;
}

}  // namespace

const Architecture& DeviceArchitecture() {
  static const Architecture architecture = FromEnvironment();
  return architecture;
}

}  // namespace softgpu
