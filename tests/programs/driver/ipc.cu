// CUDA IPC between two processes of the program: the parent exports device memory
// (cuIpcGetMemHandle), an interprocess event, physical memory as a POSIX file descriptor
// (cuMemExportToShareableHandle) and a pool allocation (cuMemPoolExportToShareableHandle and
// cuMemPoolExportPointer); it starts a child (itself again), hands it the 64-byte handles and the
// descriptors over a Unix socket (SCM_RIGHTS), and the child opens each, reads what the parent
// wrote, runs a kernel that writes new values, records the parent's event and closes everything;
// the parent then sees the child's values in its own memory. A process cannot open its own
// handles, and a handle with one byte changed opens nothing.
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "check.h"

namespace {

constexpr int kCount = 1 << 16;  // ints in each buffer

struct Handles {
  CUipcMemHandle memory;
  CUipcEventHandle event;
  CUmemPoolPtrExportData pointer;
  size_t physical_bytes;
};

// Sends `h` and two descriptors over `sock`.
void SendHandles(int sock, const Handles& h, int fd1, int fd2) {
  struct iovec iov = {const_cast<Handles*>(&h), sizeof h};
  char control[CMSG_SPACE(2 * sizeof(int))] = {};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(2 * sizeof(int));
  int fds[2] = {fd1, fd2};
  memcpy(CMSG_DATA(c), fds, sizeof fds);
  EXPECT_TRUE(sendmsg(sock, &msg, 0) == static_cast<ssize_t>(sizeof h));
}

void ReceiveHandles(int sock, Handles* h, int* fd1, int* fd2) {
  struct iovec iov = {h, sizeof *h};
  char control[CMSG_SPACE(2 * sizeof(int))] = {};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  EXPECT_TRUE(recvmsg(sock, &msg, MSG_WAITALL) == static_cast<ssize_t>(sizeof *h));
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  EXPECT_TRUE(c != nullptr && c->cmsg_type == SCM_RIGHTS);
  int fds[2];
  memcpy(fds, CMSG_DATA(c), sizeof fds);
  *fd1 = fds[0];
  *fd2 = fds[1];
}

void Fill(CUfunction set_all, CUdeviceptr p, int value, CUstream stream) {
  int n = kCount;
  void* args[] = {&p, &value, &n};
  CHECK(cuLaunchKernel(set_all, kCount / 256, 1, 1, 256, 1, 1, 0, stream, args, nullptr));
}

void ExpectAll(CUdeviceptr p, int value) {
  std::vector<int> host(kCount);
  CHECK(cuMemcpyDtoH(host.data(), p, kCount * sizeof(int)));
  for (int i = 0; i < kCount; ++i) {
    if (host[i] != value) {
      fprintf(stderr, "element %d is %d, expected %d\n", i, host[i], value);
      exit(1);
    }
  }
}

CUmemAccessDesc ReadWrite() {
  CUmemAccessDesc access = {};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = 0;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return access;
}

int Child(int sock) {
  CUcontext ctx = InitContext();
  (void)ctx;
  CUmodule m;
  CHECK(cuModuleLoad(&m, RGPU_KERNELS_FATBIN));
  CUfunction set_all;
  CHECK(cuModuleGetFunction(&set_all, m, "set_all"));
  Handles h;
  int physical_fd = -1, pool_fd = -1;
  ReceiveHandles(sock, &h, &physical_fd, &pool_fd);
  CUstream stream;
  CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

  // A changed handle opens nothing.
  CUipcMemHandle forged = h.memory;
  forged.reserved[20] ^= 0x40;
  CUdeviceptr none = 0;
  EXPECT_TRUE(cuIpcOpenMemHandle(&none, forged, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) !=
              CUDA_SUCCESS);

  // Ordinary memory.
  CUdeviceptr memory = 0;
  CHECK(cuIpcOpenMemHandle(&memory, h.memory, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  ExpectAll(memory, 7);
  EXPECT_TRUE(cuMemFree(memory) != CUDA_SUCCESS);  // closed, never freed, by its opener
  Fill(set_all, memory, 8, stream);

  // Physical memory through a descriptor, mapped into a range of this process.
  CUmemGenericAllocationHandle physical;
  CHECK(cuMemImportFromShareableHandle(&physical, (void*)(intptr_t)physical_fd,
                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  close(physical_fd);
  CUdeviceptr mapped;
  CHECK(cuMemAddressReserve(&mapped, h.physical_bytes, 0, 0, 0));
  CHECK(cuMemMap(mapped, h.physical_bytes, 0, physical, 0));
  const CUmemAccessDesc access = ReadWrite();
  CHECK(cuMemSetAccess(mapped, h.physical_bytes, &access, 1));
  CHECK(cuMemRelease(physical));
  ExpectAll(mapped, 9);
  Fill(set_all, mapped, 10, stream);

  // A pool and its exported pointer.
  CUmemoryPool pool;
  CHECK(cuMemPoolImportFromShareableHandle(&pool, (void*)(intptr_t)pool_fd,
                                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  close(pool_fd);
  CUmemLocation here = access.location;
  unsigned long long pool_access = 0;
  CHECK(cuMemPoolGetAccess((CUmemAccess_flags*)&pool_access, pool, &here));
  EXPECT_TRUE(pool_access == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  CUdeviceptr pooled = 0;
  CHECK(cuMemPoolImportPointer(&pooled, pool, &h.pointer));
  CUdeviceptr scratch;
  EXPECT_TRUE(cuMemAllocFromPoolAsync(&scratch, 256, pool, stream) != CUDA_SUCCESS);
  ExpectAll(pooled, 11);
  Fill(set_all, pooled, 12, stream);

  // The parent's event, recorded after the kernels.
  CUevent event;
  CHECK(cuIpcOpenEventHandle(&event, h.event));
  CHECK(cuEventRecord(event, stream));
  CHECK(cuStreamSynchronize(stream));

  CHECK(cuMemFreeAsync(pooled, stream));
  CHECK(cuStreamSynchronize(stream));
  CHECK(cuMemPoolDestroy(pool));
  CHECK(cuMemUnmap(mapped, h.physical_bytes));
  CHECK(cuMemAddressFree(mapped, h.physical_bytes));
  CHECK(cuIpcCloseMemHandle(memory));
  EXPECT_TRUE(cuIpcCloseMemHandle(memory) != CUDA_SUCCESS);
  CHECK(cuEventDestroy(event));
  CHECK(cuStreamDestroy(stream));
  CHECK(cuModuleUnload(m));
  char done = 1;
  EXPECT_TRUE(write(sock, &done, 1) == 1);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "child") == 0) return Child(atoi(argv[2]));

  int sockets[2];
  EXPECT_TRUE(socketpair(AF_UNIX, SOCK_STREAM, 0, sockets) == 0);
  InitContext();
  CUmodule m;
  CHECK(cuModuleLoad(&m, RGPU_KERNELS_FATBIN));
  CUfunction set_all;
  CHECK(cuModuleGetFunction(&set_all, m, "set_all"));
  int attribute = 0;
  CHECK(cuDeviceGetAttribute(&attribute, CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED, 0));
  EXPECT_TRUE(attribute == 1);
  CHECK(cuDeviceGetAttribute(&attribute,
                             CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0));
  EXPECT_TRUE(attribute == 1);
  CHECK(cuDeviceGetAttribute(&attribute, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, 0));
  EXPECT_TRUE(attribute & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  const size_t bytes = kCount * sizeof(int);
  Handles h = {};

  CUdeviceptr memory;
  CHECK(cuMemAlloc(&memory, bytes));
  Fill(set_all, memory, 7, nullptr);
  CHECK(cuIpcGetMemHandle(&h.memory, memory));
  CUdeviceptr self = 0;
  EXPECT_TRUE(cuIpcOpenMemHandle(&self, h.memory, 0) == CUDA_ERROR_INVALID_CONTEXT);

  CUevent plain, event;
  CHECK(cuEventCreate(&plain, CU_EVENT_DISABLE_TIMING));
  EXPECT_TRUE(cuIpcGetEventHandle(&h.event, plain) == CUDA_ERROR_INVALID_VALUE);
  CHECK(cuEventCreate(&event, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
  CHECK(cuIpcGetEventHandle(&h.event, event));

  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t gran = 0;
  CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  h.physical_bytes = (bytes + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle physical;
  CHECK(cuMemCreate(&physical, h.physical_bytes, &prop, 0));
  CUdeviceptr mapped;
  CHECK(cuMemAddressReserve(&mapped, h.physical_bytes, 0, 0, 0));
  CHECK(cuMemMap(mapped, h.physical_bytes, 0, physical, 0));
  const CUmemAccessDesc access = ReadWrite();
  CHECK(cuMemSetAccess(mapped, h.physical_bytes, &access, 1));
  Fill(set_all, mapped, 9, nullptr);
  int physical_fd = -1;
  CHECK(cuMemExportToShareableHandle(&physical_fd, physical,
                                     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));

  CUmemPoolProps pool_props = {};
  pool_props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  pool_props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  pool_props.location = prop.location;
  CUmemoryPool pool;
  CHECK(cuMemPoolCreate(&pool, &pool_props));
  CUdeviceptr pooled;
  CHECK(cuMemAllocFromPoolAsync(&pooled, bytes, pool, nullptr));
  Fill(set_all, pooled, 11, nullptr);
  int pool_fd = -1;
  CHECK(cuMemPoolExportToShareableHandle(&pool_fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                         0));
  CHECK(cuMemPoolExportPointer(&h.pointer, pooled));
  CHECK(cuCtxSynchronize());

  // The child: this program again.
  const pid_t child = fork();
  EXPECT_TRUE(child >= 0);
  if (child == 0) {
    close(sockets[0]);
    char fd[16];
    snprintf(fd, sizeof fd, "%d", sockets[1]);
    execl("/proc/self/exe", argv[0], "child", fd, (char*)nullptr);
    _exit(127);
  }
  close(sockets[1]);
  SendHandles(sockets[0], h, physical_fd, pool_fd);
  close(physical_fd);
  close(pool_fd);
  char done = 0;
  EXPECT_TRUE(read(sockets[0], &done, 1) == 1 && done == 1);
  int status = 0;
  EXPECT_TRUE(waitpid(child, &status, 0) == child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  // The child's kernels wrote into the parent's memory; its record of the parent's event is
  // what the parent waits for.
  CHECK(cuStreamWaitEvent(nullptr, event, 0));
  CHECK(cuEventSynchronize(event));
  ExpectAll(memory, 8);
  ExpectAll(mapped, 10);
  ExpectAll(pooled, 12);

  CHECK(cuMemFreeAsync(pooled, nullptr));
  CHECK(cuCtxSynchronize());
  CHECK(cuMemPoolDestroy(pool));
  CHECK(cuMemUnmap(mapped, h.physical_bytes));
  CHECK(cuMemAddressFree(mapped, h.physical_bytes));
  CHECK(cuMemRelease(physical));
  CHECK(cuMemFree(memory));
  CHECK(cuEventDestroy(event));
  CHECK(cuEventDestroy(plain));
  CHECK(cuModuleUnload(m));
  printf("ipc: OK\n");
  return 0;
}
