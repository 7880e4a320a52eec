// Registered mapped host memory: cudaHostRegister(cudaHostRegisterMapped) of the program's own
// memory (whole pages, with other data on the pages beside it); kernels read and write it through
// cudaHostGetDevicePointer while the host reads and writes it between them, async copies from and
// to it (as simpleStreams does), pointer attributes, a thread writing into it while it is
// registered and unregistered again and again, a read-only registration a kernel reads (where
// the device offers it), and the device's last bytes kept in the program's memory after
// cudaHostUnregister and after cudaDeviceReset. A range that is not whole pages is
// registered or refused with cudaErrorNotSupported (rgpu: a remote GPU keeps mapped memory
// coherent a page at a time); the program says which.
#include "rt_check.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

__global__ void Scale(const int* in, int* out, int n, int factor) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * factor;
}

__global__ void AddOne(int* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] += 1;
}

namespace {

std::atomic<bool> g_stop{false};
std::atomic<long> g_written{0};

// Writes ever larger numbers into *word until told to stop.
void* WriteInto(void* word) {
  volatile long* w = static_cast<volatile long*>(word);
  long i = 0;
  while (!g_stop.load()) {
    *w = ++i;
    g_written.store(i);
  }
  return nullptr;
}

// The program's own SIGSEGV handler (a crash reporter): a fault that reaches it is a failure.
void OnFault(int, siginfo_t* info, void*) {
  char msg[96];
  const int len = snprintf(msg, sizeof msg,
                           "rt_host_register_mapped: a fault at %p reached the "
                           "program\n",
                           info->si_addr);
  (void)!write(2, msg, len > 0 ? len : 0);
  _exit(3);
}

}  // namespace

int main() {
  struct sigaction crash_reporter = {};
  crash_reporter.sa_sigaction = OnFault;
  crash_reporter.sa_flags = SA_SIGINFO;
  sigemptyset(&crash_reporter.sa_mask);
  EXPECT(sigaction(SIGSEGV, &crash_reporter, nullptr) == 0, "sigaction failed");

  CHECK(cudaSetDeviceFlags(cudaDeviceMapHost));
  int can_map = 0;
  CHECK(cudaDeviceGetAttribute(&can_map, cudaDevAttrCanMapHostMemory, 0));
  EXPECT(can_map == 1, "canMapHostMemory = %d", can_map);

  // A page of data, the registered range (50 pages), a page of data.
  const int n = 51200;
  const size_t bytes = n * sizeof(int);
  char* block = static_cast<char*>(aligned_alloc(4096, bytes + 8192));
  EXPECT(block != nullptr, "aligned_alloc failed");
  memset(block, 0x5a, bytes + 8192);
  int* in = reinterpret_cast<int*>(block + 4096);
  char* after = block + 4096 + bytes;
  for (int i = 0; i < n; ++i) in[i] = i - 20000;

  // Not whole pages: mapped, or refused by name.
  const cudaError_t unaligned = cudaHostRegister(block + 100, 1000, cudaHostRegisterMapped);
  EXPECT(unaligned == cudaSuccess || unaligned == cudaErrorNotSupported, "unaligned: %s",
         cudaGetErrorName(unaligned));
  if (unaligned == cudaSuccess) {
    printf("unaligned range mapped\n");
    CHECK(cudaHostUnregister(block + 100));
  } else {
    printf("unaligned range refused\n");
    EXPECT_ERROR(cudaGetLastError(), cudaErrorNotSupported);
  }

  CHECK(cudaHostRegister(in, bytes, cudaHostRegisterMapped));
  EXPECT_ERROR(cudaHostRegister(in + 1024, 4096, cudaHostRegisterMapped),
               cudaErrorHostMemoryAlreadyRegistered);
  EXPECT_ERROR(cudaGetLastError(), cudaErrorHostMemoryAlreadyRegistered);
  EXPECT(in[0] == -20000 && in[n - 1] == n - 1 - 20000, "registration changed the bytes");

  int* din = nullptr;
  CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&din), in, 0));
  unsigned flags = 0;
  CHECK(cudaHostGetFlags(&flags, in));
  EXPECT(flags & cudaHostRegisterMapped, "flags %#x", flags);
  cudaPointerAttributes attr;
  CHECK(cudaPointerGetAttributes(&attr, in));
  EXPECT(attr.type == cudaMemoryTypeHost, "type %d", (int)attr.type);
  EXPECT(attr.devicePointer == din, "devicePointer %p, want %p", attr.devicePointer, (void*)din);
  EXPECT(attr.hostPointer == in, "hostPointer %p, want %p", attr.hostPointer, (void*)in);

  // Kernels and the host take turns on it, without a copy.
  int* dout = nullptr;
  CHECK(cudaMalloc(&dout, bytes));
  Scale<<<GridFor(n, 256), 256>>>(din, dout, n, 3);
  CHECK_LAUNCH();
  AddOne<<<GridFor(n, 256), 256>>>(din, n);
  CHECK_LAUNCH();
  CHECK(cudaDeviceSynchronize());
  for (int i = 0; i < n; ++i) {
    EXPECT(in[i] == i - 20000 + 1, "after the kernel: in[%d] = %d", i, in[i]);
  }
  for (int i = 0; i < n; i += 2) in[i] = 7;  // the host's turn
  AddOne<<<GridFor(n, 256), 256>>>(din, n);
  CHECK_LAUNCH();
  CHECK(cudaDeviceSynchronize());
  for (int i = 0; i < n; ++i) {
    const int want = (i % 2 == 0 ? 7 : i - 20000 + 1) + 1;
    EXPECT(in[i] == want, "round 2: in[%d] = %d, want %d", i, in[i], want);
  }
  EXPECT(block[4095] == 0x5a && after[0] == 0x5a, "the bytes beside changed");
  std::vector<int> out(n);
  CHECK(cudaMemcpy(out.data(), dout, bytes, cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) {
    EXPECT(out[i] == (i - 20000) * 3, "Scale: out[%d] = %d", i, out[i]);
  }

  // Async copies from and to it on a stream, as simpleStreams does.
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  CHECK(cudaMemcpyAsync(dout, in, bytes, cudaMemcpyHostToDevice, s));
  Scale<<<GridFor(n, 256), 256, 0, s>>>(dout, dout, n, 2);
  CHECK_LAUNCH();
  CHECK(cudaMemcpyAsync(in, dout, bytes, cudaMemcpyDeviceToHost, s));
  CHECK(cudaStreamSynchronize(s));
  for (int i = 0; i < n; ++i) {
    const int want = ((i % 2 == 0 ? 7 : i - 20000 + 1) + 1) * 2;
    EXPECT(in[i] == want, "copies: in[%d] = %d, want %d", i, in[i], want);
  }
  CHECK(cudaMemcpy(in, in + n / 2, 400, cudaMemcpyDefault));  // both ends in it
  EXPECT(memcmp(in, in + n / 2, 400) == 0, "a copy within it differs");
  CHECK(cudaStreamDestroy(s));

  // Unregistered, it keeps the device's last bytes and is ordinary memory: a kernel's writes are
  // there, and a system call can write into it.
  AddOne<<<GridFor(n, 256), 256>>>(din, n);
  CHECK_LAUNCH();
  std::vector<int> before(in, in + n);  // faults it back from the device
  AddOne<<<GridFor(n, 256), 256>>>(din, n);
  CHECK_LAUNCH();
  CHECK(cudaHostUnregister(in));
  for (int i = 0; i < n; ++i) {
    EXPECT(in[i] == before[i] + 1, "after unregistering: in[%d] = %d, want %d", i, in[i],
           before[i] + 1);
  }
  int pipe_fds[2];
  EXPECT(pipe(pipe_fds) == 0, "pipe failed");
  EXPECT(write(pipe_fds[1], "abcd", 4) == 4, "write failed");
  EXPECT(read(pipe_fds[0], in + 1, 4) == 4, "read into the unregistered memory failed");
  EXPECT(memcmp(in + 1, "abcd", 4) == 0, "read() wrote elsewhere");
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  EXPECT_ERROR(cudaHostUnregister(in), cudaErrorHostMemoryNotRegistered);
  EXPECT_ERROR(cudaGetLastError(), cudaErrorHostMemoryNotRegistered);

  // A thread writes into it while it is registered and unregistered again and again (no device
  // work meanwhile: a device without concurrent access has the host wait for it): no write is
  // lost and nothing faults. Then a kernel still finds what the host wrote.
  long* word = reinterpret_cast<long*>(in);
  pthread_t writer;
  EXPECT(pthread_create(&writer, nullptr, WriteInto, word) == 0, "pthread_create failed");
  for (int round = 0; round < 50; ++round) {
    CHECK(cudaHostRegister(in, bytes, cudaHostRegisterMapped));
    CHECK(cudaHostUnregister(in));
  }
  g_stop.store(true);
  pthread_join(writer, nullptr);
  EXPECT(*word == g_written.load(), "the writer's last write %ld reads as %ld", g_written.load(),
         *word);
  CHECK(cudaHostRegister(in, bytes, cudaHostRegisterMapped));
  CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&din), in, 0));
  CHECK(cudaMemcpy(&out[0], din, sizeof(long), cudaMemcpyDeviceToHost));
  EXPECT(memcmp(&out[0], word, sizeof(long)) == 0, "the device has another first word");
  CHECK(cudaHostUnregister(in));

  // Registered read-only for the device, where the device says it can: kernels read it.
  int read_only = 0;
  CHECK(cudaDeviceGetAttribute(&read_only, cudaDevAttrHostRegisterReadOnlySupported, 0));
  if (read_only) {
    for (int i = 0; i < n; ++i) in[i] = 3 * i;
    CHECK(cudaHostRegister(in, bytes, cudaHostRegisterMapped | cudaHostRegisterReadOnly));
    CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&din), in, 0));
    Scale<<<GridFor(n, 256), 256>>>(din, dout, n, -1);
    CHECK_LAUNCH();
    CHECK(cudaMemcpy(out.data(), dout, bytes, cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; ++i) EXPECT(out[i] == -3 * i, "read-only: out[%d] = %d", i, out[i]);
    EXPECT(in[7] == 21, "read-only: the host's bytes changed");
    CHECK(cudaHostUnregister(in));
  }
  printf("read-only registration %s\n", read_only ? "used" : "not offered");

  // Still registered when the device is reset: the program keeps its memory and the device's
  // bytes.
  CHECK(cudaHostRegister(in, bytes, cudaHostRegisterMapped));
  CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&din), in, 0));
  for (int i = 0; i < n; ++i) in[i] = i;
  AddOne<<<GridFor(n, 256), 256>>>(din, n);
  CHECK_LAUNCH();
  CHECK(cudaDeviceReset());
  for (int i = 0; i < n; ++i) EXPECT(in[i] == i + 1, "after the reset: in[%d] = %d", i, in[i]);
  in[0] = 5;  // ordinary memory again
  EXPECT(in[0] == 5, "the memory is not writable after the reset");

  free(block);
  printf("rt_host_register_mapped: OK\n");
  return 0;
}
