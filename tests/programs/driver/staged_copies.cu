// Asynchronous copies to a busy stream do not hold the server's session (server/staging_buffers.h):
// one thread queues, on stream A, a kernel that runs until a flag is set, then a kernel writing
// 7s, then cuMemcpyHtoDAsync copies into the same buffer (small ones in a batch, a large pageable
// one, one from pinned memory); only then does it set the flag with a kernel on stream B and wait
// for B. A server that waited for stream A before taking the next call would never run B's kernel
// (the program hangs). Then A is waited for and the buffers must hold the copied bytes, written
// after the 7s (stream order), with the host's pageable buffer overwritten right after the copy
// call (the copy has the bytes of the moment it was made). A large copy from pinned memory and one
// back into pinned memory, queued on A too, travel in pieces over tcp:// and sock://
// (Channel::bulk_piece; 9 MiB and 12 bytes: two whole pieces and a short one): each piece must
// land at its own offset, in stream order (the copy back reads what the copy in wrote), and a copy
// back on an idle stream must do the same, as must synchronous copies both ways.
#include <cstring>
#include <vector>

#include "check.h"

int main() {
  InitContext();
  std::string ptx = ReadFile(RGPU_KERNELS_PTX);
  CUmodule module;
  CHECK(cuModuleLoadData(&module, ptx.data()));
  CUfunction wait_for_flag, set_all;
  CHECK(cuModuleGetFunction(&wait_for_flag, module, "wait_for_flag"));
  CHECK(cuModuleGetFunction(&set_all, module, "set_all"));
  const int small = 1000, large = 3 << 20;  // ints: 4 KB in a batch, 12 MiB in chunks
  const int pieces = (9 << 18) + 3;         // ints: 9 MiB and 12 bytes, from pinned memory
  CUdeviceptr flag, a, b, c, d;
  CHECK(cuMemAlloc(&flag, sizeof(int)));
  CHECK(cuMemAlloc(&a, 2 * small * sizeof(int)));
  CHECK(cuMemAlloc(&b, large * sizeof(int)));
  CHECK(cuMemAlloc(&c, small * sizeof(int)));
  CHECK(cuMemAlloc(&d, pieces * sizeof(int)));
  CHECK(cuMemsetD32(flag, 0, 1));
  CUstream sa, sb;
  CHECK(cuStreamCreate(&sa, CU_STREAM_NON_BLOCKING));
  CHECK(cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING));

  std::vector<int> pattern(small), big(large);
  for (int i = 0; i < small; ++i) pattern[i] = i * 3 + 1;
  for (int i = 0; i < large; ++i) big[i] = i ^ 0x5a5a;
  int* pinned = nullptr;
  CHECK(cuMemAllocHost(reinterpret_cast<void**>(&pinned), small * sizeof(int)));
  for (int i = 0; i < small; ++i) pinned[i] = -i;
  int *pinned_in = nullptr, *pinned_out = nullptr;
  CHECK(cuMemAllocHost(reinterpret_cast<void**>(&pinned_in), pieces * sizeof(int)));
  CHECK(cuMemAllocHost(reinterpret_cast<void**>(&pinned_out), pieces * sizeof(int)));
  for (int i = 0; i < pieces; ++i) pinned_in[i] = i * 7 + 5;
  memset(pinned_out, 0, pieces * sizeof(int));

  void* wait_args[] = {&flag};
  CHECK(cuLaunchKernel(wait_for_flag, 1, 1, 1, 1, 1, 1, 0, sa, wait_args, nullptr));
  int seven = 7, count_a = 2 * small, count_b = large, count_c = small, count_d = pieces;
  void* fill_a[] = {&a, &seven, &count_a};
  void* fill_b[] = {&b, &seven, &count_b};
  void* fill_c[] = {&c, &seven, &count_c};
  void* fill_d[] = {&d, &seven, &count_d};
  auto blocks = [](int n) { return static_cast<unsigned>((n + 255) / 256); };
  CHECK(cuLaunchKernel(set_all, blocks(count_a), 1, 1, 256, 1, 1, 0, sa, fill_a, nullptr));
  CHECK(cuLaunchKernel(set_all, blocks(count_b), 1, 1, 256, 1, 1, 0, sa, fill_b, nullptr));
  CHECK(cuLaunchKernel(set_all, blocks(count_c), 1, 1, 256, 1, 1, 0, sa, fill_c, nullptr));
  CHECK(cuLaunchKernel(set_all, blocks(count_d), 1, 1, 256, 1, 1, 0, sa, fill_d, nullptr));
  // The first half of `a` from pageable memory, overwritten at once after the call.
  CHECK(cuMemcpyHtoDAsync(a, pattern.data(), small * sizeof(int), sa));
  std::vector<int> sent = pattern;
  std::fill(pattern.begin(), pattern.end(), -1);
  CHECK(cuMemcpyHtoDAsync(b, big.data(), large * sizeof(int), sa));
  CHECK(cuMemcpyHtoDAsync(c, pinned, small * sizeof(int), sa));
  CHECK(cuMemcpyHtoDAsync(d, pinned_in, pieces * sizeof(int), sa));
  CHECK(cuMemcpyDtoHAsync(pinned_out, d, pieces * sizeof(int), sa));

  // Stream B ends A's first kernel; B's wait returns only if the server served B meanwhile.
  int one = 1, count = 1;
  void* release[] = {&flag, &one, &count};
  CHECK(cuLaunchKernel(set_all, 1, 1, 1, 1, 1, 1, 0, sb, release, nullptr));
  CHECK(cuStreamSynchronize(sb));
  CHECK(cuStreamSynchronize(sa));

  std::vector<int> got_a(2 * small), got_b(large), got_c(small);
  CHECK(cuMemcpyDtoH(got_a.data(), a, got_a.size() * sizeof(int)));
  CHECK(cuMemcpyDtoH(got_b.data(), b, got_b.size() * sizeof(int)));
  CHECK(cuMemcpyDtoH(got_c.data(), c, got_c.size() * sizeof(int)));
  for (int i = 0; i < 2 * small; ++i) {
    const int want = i < small ? sent[i] : 7;
    if (got_a[i] != want) {
      fprintf(stderr, "staged_copies: a[%d] = %d, want %d\n", i, got_a[i], want);
      return 1;
    }
  }
  for (int i = 0; i < large; ++i) {
    if (got_b[i] != big[i]) {
      fprintf(stderr, "staged_copies: b[%d] = %d, want %d\n", i, got_b[i], big[i]);
      return 1;
    }
  }
  for (int i = 0; i < small; ++i) {
    if (got_c[i] != -i) {
      fprintf(stderr, "staged_copies: c[%d] = %d, want %d\n", i, got_c[i], -i);
      return 1;
    }
  }
  for (int i = 0; i < pieces; ++i) {
    if (pinned_out[i] != i * 7 + 5) {
      fprintf(stderr, "staged_copies: copied back d[%d] = %d, want %d\n", i, pinned_out[i],
              i * 7 + 5);
      return 1;
    }
  }
  // Back again on the idle stream, made at once.
  memset(pinned_out, 0, pieces * sizeof(int));
  CHECK(cuMemcpyDtoHAsync(pinned_out, d, pieces * sizeof(int), sa));
  CHECK(cuStreamSynchronize(sa));
  for (int i = 0; i < pieces; ++i) {
    if (pinned_out[i] != i * 7 + 5) {
      fprintf(stderr, "staged_copies: copied back at once d[%d] = %d, want %d\n", i, pinned_out[i],
              i * 7 + 5);
      return 1;
    }
  }
  // Synchronous copies in pieces: from pinned memory (two pieces in flight at a time) and back
  // into pageable memory (all pieces but the last posted, the last one waited for).
  for (int i = 0; i < pieces; ++i) pinned_in[i] = i * 11 - 3;
  CHECK(cuMemcpyHtoD(d, pinned_in, pieces * sizeof(int)));
  std::vector<int> got_d(pieces);
  CHECK(cuMemcpyDtoH(got_d.data(), d, pieces * sizeof(int)));
  for (int i = 0; i < pieces; ++i) {
    if (got_d[i] != i * 11 - 3) {
      fprintf(stderr, "staged_copies: synchronous d[%d] = %d, want %d\n", i, got_d[i], i * 11 - 3);
      return 1;
    }
  }
  CHECK(cuMemFreeHost(pinned_out));
  CHECK(cuMemFreeHost(pinned_in));
  CHECK(cuMemFreeHost(pinned));
  printf("staged_copies: OK\n");
  return 0;
}
