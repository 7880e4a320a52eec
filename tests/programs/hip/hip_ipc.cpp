// IPC between two processes of the program: the parent exports device memory
// (hipIpcGetMemHandle), an interprocess event, physical memory as a POSIX file descriptor
// (hipMemExportToShareableHandle) and a pool allocation (hipMemPoolExportToShareableHandle and
// hipMemPoolExportPointer); it starts a child (itself again), hands it the 64-byte handles and the
// descriptors over a Unix socket (SCM_RIGHTS), and the child opens each, reads what the parent
// wrote, writes new values with memsets (no kernels: the software GPU runs no AMDGPU code),
// records the parent's event after them and closes everything; the parent then sees the child's
// values in its own memory. A process cannot open its own handle (hipErrorInvalidContext), a
// handle with one byte changed opens nothing, and only hipIpcMemLazyEnablePeerAccess is a flag.
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "hip_check.h"

namespace {

constexpr size_t kCount = 1 << 16;  // ints in each buffer

struct Handles {
  hipIpcMemHandle_t memory;
  hipIpcEventHandle_t event;
  hipMemPoolPtrExportData pointer;
  size_t physical_bytes;
};

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
  EXPECT(sendmsg(sock, &msg, 0) == static_cast<ssize_t>(sizeof h));
}

void ReceiveHandles(int sock, Handles* h, int* fd1, int* fd2) {
  struct iovec iov = {h, sizeof *h};
  char control[CMSG_SPACE(2 * sizeof(int))] = {};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  EXPECT(recvmsg(sock, &msg, MSG_WAITALL) == static_cast<ssize_t>(sizeof *h));
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  EXPECT(c != nullptr && c->cmsg_type == SCM_RIGHTS);
  int fds[2];
  memcpy(fds, CMSG_DATA(c), sizeof fds);
  *fd1 = fds[0];
  *fd2 = fds[1];
}

void ExpectAll(const void* p, int value) {
  std::vector<int> host(kCount);
  CHECK(hipMemcpy(host.data(), p, kCount * sizeof(int), hipMemcpyDeviceToHost));
  for (size_t i = 0; i < kCount; ++i) {
    if (host[i] != value) {
      fprintf(stderr, "element %zu is %d, expected %d\n", i, host[i], value);
      exit(1);
    }
  }
}

hipMemAccessDesc ReadWrite() {
  hipMemAccessDesc access;
  memset(&access, 0, sizeof access);
  access.location.type = hipMemLocationTypeDevice;
  access.location.id = 0;
  access.flags = hipMemAccessFlagsProtReadWrite;
  return access;
}

int Child(int sock) {
  Handles h;
  int physical_fd = -1, pool_fd = -1;
  ReceiveHandles(sock, &h, &physical_fd, &pool_fd);
  hipStream_t stream;
  CHECK(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking));

  // A changed handle opens nothing.
  hipIpcMemHandle_t forged = h.memory;
  forged.reserved[20] ^= 0x40;
  void* none = nullptr;
  EXPECT(hipIpcOpenMemHandle(&none, forged, hipIpcMemLazyEnablePeerAccess) != hipSuccess);
  EXPECT(hipGetLastError() != hipSuccess);

  // Ordinary memory.
  void* memory = nullptr;
  CHECK(hipIpcOpenMemHandle(&memory, h.memory, hipIpcMemLazyEnablePeerAccess));
  ExpectAll(memory, 7);
  EXPECT(hipFree(memory) != hipSuccess);  // closed, never freed, by its opener
  (void)hipGetLastError();
  CHECK(hipMemsetD32Async(memory, 8, kCount, stream));

  // Physical memory through a descriptor, mapped into a range of this process.
  hipMemGenericAllocationHandle_t physical;
  CHECK(hipMemImportFromShareableHandle(&physical, (void*)(intptr_t)physical_fd,
                                        hipMemHandleTypePosixFileDescriptor));
  close(physical_fd);
  void* mapped = nullptr;
  CHECK(hipMemAddressReserve(&mapped, h.physical_bytes, 0, nullptr, 0));
  CHECK(hipMemMap(mapped, h.physical_bytes, 0, physical, 0));
  const hipMemAccessDesc access = ReadWrite();
  CHECK(hipMemSetAccess(mapped, h.physical_bytes, &access, 1));
  CHECK(hipMemRelease(physical));
  ExpectAll(mapped, 9);
  CHECK(hipMemsetD32Async(mapped, 10, kCount, stream));

  // A pool and its exported pointer.
  hipMemPool_t pool;
  CHECK(hipMemPoolImportFromShareableHandle(&pool, (void*)(intptr_t)pool_fd,
                                            hipMemHandleTypePosixFileDescriptor, 0));
  close(pool_fd);
  hipMemLocation here = access.location;
  hipMemAccessFlags pool_access = hipMemAccessFlagsProtNone;
  CHECK(hipMemPoolGetAccess(&pool_access, pool, &here));
  EXPECT(pool_access == hipMemAccessFlagsProtReadWrite);
  void* pooled = nullptr;
  CHECK(hipMemPoolImportPointer(&pooled, pool, &h.pointer));
  void* scratch = nullptr;
  EXPECT(hipMallocFromPoolAsync(&scratch, 256, pool, stream) != hipSuccess);  // imported
  (void)hipGetLastError();
  ExpectAll(pooled, 11);
  CHECK(hipMemsetD32Async(pooled, 12, kCount, stream));

  // The parent's event, recorded after the memsets.
  hipEvent_t event;
  CHECK(hipIpcOpenEventHandle(&event, h.event));
  CHECK(hipEventRecord(event, stream));
  CHECK(hipStreamSynchronize(stream));

  CHECK(hipFreeAsync(pooled, stream));
  CHECK(hipStreamSynchronize(stream));
  CHECK(hipMemPoolDestroy(pool));
  CHECK(hipMemUnmap(mapped, h.physical_bytes));
  CHECK(hipMemAddressFree(mapped, h.physical_bytes));
  CHECK(hipIpcCloseMemHandle(memory));
  EXPECT(hipIpcCloseMemHandle(memory) != hipSuccess);
  (void)hipGetLastError();
  CHECK(hipEventDestroy(event));
  CHECK(hipStreamDestroy(stream));
  char done = 1;
  EXPECT(write(sock, &done, 1) == 1);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "child") == 0) return Child(atoi(argv[2]));

  int sockets[2];
  EXPECT(socketpair(AF_UNIX, SOCK_STREAM, 0, sockets) == 0);
  const size_t bytes = kCount * sizeof(int);
  Handles h;
  memset(&h, 0, sizeof h);

  void* memory = nullptr;
  CHECK(hipMalloc(&memory, bytes));
  CHECK(hipMemsetD32(memory, 7, kCount));
  CHECK(hipIpcGetMemHandle(&h.memory, memory));
  void* self = nullptr;
  EXPECT_ERROR(hipIpcOpenMemHandle(&self, h.memory, hipIpcMemLazyEnablePeerAccess),
               hipErrorInvalidContext);
  EXPECT(hipGetLastError() == hipErrorInvalidContext);
  EXPECT_ERROR(hipIpcOpenMemHandle(&self, h.memory, 1), hipErrorInvalidValue);
  (void)hipGetLastError();

  hipEvent_t plain, event;
  CHECK(hipEventCreateWithFlags(&plain, hipEventDisableTiming));
  EXPECT_ERROR(hipIpcGetEventHandle(&h.event, plain), hipErrorInvalidValue);
  (void)hipGetLastError();
  CHECK(hipEventCreateWithFlags(&event, hipEventInterprocess | hipEventDisableTiming));
  CHECK(hipIpcGetEventHandle(&h.event, event));

  hipMemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = hipMemAllocationTypePinned;
  prop.location.type = hipMemLocationTypeDevice;
  prop.location.id = 0;
  prop.requestedHandleType = hipMemHandleTypePosixFileDescriptor;
  size_t gran = 0;
  CHECK(hipMemGetAllocationGranularity(&gran, &prop, hipMemAllocationGranularityMinimum));
  h.physical_bytes = (bytes + gran - 1) / gran * gran;
  hipMemGenericAllocationHandle_t physical;
  CHECK(hipMemCreate(&physical, h.physical_bytes, &prop, 0));
  void* mapped = nullptr;
  CHECK(hipMemAddressReserve(&mapped, h.physical_bytes, 0, nullptr, 0));
  CHECK(hipMemMap(mapped, h.physical_bytes, 0, physical, 0));
  const hipMemAccessDesc access = ReadWrite();
  CHECK(hipMemSetAccess(mapped, h.physical_bytes, &access, 1));
  CHECK(hipMemsetD32(mapped, 9, kCount));
  int physical_fd = -1;
  CHECK(hipMemExportToShareableHandle(&physical_fd, physical, hipMemHandleTypePosixFileDescriptor,
                                      0));
  EXPECT(physical_fd >= 0);

  hipMemPoolProps pool_props;
  memset(&pool_props, 0, sizeof pool_props);
  pool_props.allocType = hipMemAllocationTypePinned;
  pool_props.handleTypes = hipMemHandleTypePosixFileDescriptor;
  pool_props.location = prop.location;
  hipMemPool_t pool;
  CHECK(hipMemPoolCreate(&pool, &pool_props));
  void* pooled = nullptr;
  CHECK(hipMallocFromPoolAsync(&pooled, bytes, pool, nullptr));
  CHECK(hipMemsetD32Async(pooled, 11, kCount, nullptr));
  int pool_fd = -1;
  CHECK(hipMemPoolExportToShareableHandle(&pool_fd, pool, hipMemHandleTypePosixFileDescriptor, 0));
  EXPECT(pool_fd >= 0);
  CHECK(hipMemPoolExportPointer(&h.pointer, pooled));
  CHECK(hipDeviceSynchronize());

  // The child: this program again.
  const pid_t child = fork();
  EXPECT(child >= 0);
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
  EXPECT(read(sockets[0], &done, 1) == 1 && done == 1);
  int status = 0;
  EXPECT(waitpid(child, &status, 0) == child);
  EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  // The child's memsets wrote into the parent's memory; its record of the parent's event is what
  // the parent waits for.
  CHECK(hipStreamWaitEvent(nullptr, event, 0));
  CHECK(hipEventSynchronize(event));
  ExpectAll(memory, 8);
  ExpectAll(mapped, 10);
  ExpectAll(pooled, 12);

  CHECK(hipFreeAsync(pooled, nullptr));
  CHECK(hipDeviceSynchronize());
  CHECK(hipMemPoolDestroy(pool));
  CHECK(hipMemUnmap(mapped, h.physical_bytes));
  CHECK(hipMemAddressFree(mapped, h.physical_bytes));
  CHECK(hipMemRelease(physical));
  CHECK(hipFree(memory));
  CHECK(hipEventDestroy(event));
  CHECK(hipEventDestroy(plain));
  puts("hip_ipc: ok");
  return 0;
}
