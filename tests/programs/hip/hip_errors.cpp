// Errors: names and strings, the sticky last error, invalid arguments, and an entry point rgpu
// does not implement (hipErrorNotSupported).
#include <string.h>

#include "hip_check.h"

int main() {
  EXPECT(strcmp(hipGetErrorName(hipSuccess), "hipSuccess") == 0);
  EXPECT(strcmp(hipGetErrorName(hipErrorNoBinaryForGpu), "hipErrorNoBinaryForGpu") == 0);
  EXPECT(strcmp(hipGetErrorName(hipErrorInvalidValue), "hipErrorInvalidValue") == 0);
  EXPECT(strlen(hipGetErrorString(hipErrorOutOfMemory)) > 0);
  EXPECT(hipGetLastError() == hipSuccess);
  // Invalid arguments are refused and remembered until read.
  EXPECT_ERROR(hipMalloc(nullptr, 16), hipErrorInvalidValue);
  CHECK(hipDeviceSynchronize());  // a success does not clear it
  EXPECT(hipPeekAtLastError() == hipErrorInvalidValue);
  EXPECT(hipGetLastError() == hipErrorInvalidValue);
  EXPECT(hipGetLastError() == hipSuccess);
  // Handles and pointers this program never had.
  int on_stack = 0;
  EXPECT(hipFree(&on_stack) != hipSuccess);
  EXPECT_ERROR(hipStreamDestroy(nullptr), hipErrorInvalidHandle);
  EXPECT_ERROR(hipEventRecord(nullptr, nullptr), hipErrorInvalidHandle);
  EXPECT_ERROR(hipSetDevice(-1), hipErrorInvalidDevice);
  EXPECT_ERROR(hipInit(1), hipErrorInvalidValue);
  // Not implemented by rgpu (an AMD compute-unit mask): refused by name, not crashed.
  hipStream_t masked = nullptr;
  const uint32_t mask[2] = {0xffffffffu, 0xffffffffu};
  EXPECT_ERROR(hipExtStreamCreateWithCUMask(&masked, 2, mask), hipErrorNotSupported);
  EXPECT(hipGetLastError() != hipSuccess);
  // The program still works after all that.
  void* d;
  CHECK(hipMalloc(&d, 64));
  int value = 42, back = 0;
  CHECK(hipMemcpy(d, &value, sizeof value, hipMemcpyHostToDevice));
  CHECK(hipMemcpy(&back, d, sizeof back, hipMemcpyDeviceToHost));
  EXPECT(back == 42);
  CHECK(hipFree(d));
  puts("hip_errors: ok");
  return 0;
}
