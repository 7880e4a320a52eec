// A kernel that waits for the host through managed memory: it spins on a flag with system-scope
// atomics until the host sets it, which needs concurrent managed access (host and device touching
// the memory at once). On a device without it, as rgpu's are (CONCURRENT_MANAGED_ACCESS = 0,
// HOST_NATIVE_ATOMIC_SUPPORTED = 0), the program cannot work: the host's write waits for the
// kernel. Prints the attributes, then "launched"; what happens next is the test's to check (under
// rgpu with --max-kernel-ms: the kernel is ended and the host's access fails with a message that
// says why, never a wrong answer).
#include "check.h"

int main() {
  InitContext();
  CUdevice dev;
  CHECK(cuCtxGetDevice(&dev));
  int concurrent = -1, native_atomics = -1;
  CHECK(cuDeviceGetAttribute(&concurrent, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, dev));
  CHECK(
      cuDeviceGetAttribute(&native_atomics, CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED, dev));
  printf("concurrent managed access %d, host native atomics %d\n", concurrent, native_atomics);
  CUmodule m;
  CHECK(cuModuleLoad(&m, RGPU_KERNELS_FATBIN));
  CUfunction wait;
  CHECK(cuModuleGetFunction(&wait, m, "wait_for_host"));
  CUdeviceptr flag;
  CHECK(cuMemAllocManaged(&flag, sizeof(int), CU_MEM_ATTACH_GLOBAL));
  int* host_flag = reinterpret_cast<int*>(flag);
  *host_flag = 0;
  void* args[] = {&flag};
  CHECK(cuLaunchKernel(wait, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr));
  printf("launched\n");
  fflush(stdout);
  __atomic_store_n(host_flag, 1, __ATOMIC_SEQ_CST);  // while the kernel runs
  CHECK(cuCtxSynchronize());
  printf("managed_host_wait: the kernel saw the host's write\n");
  return 0;
}
