// Managed memory at the edges: host writes of a few bytes at both ends of a range whose size is
// not a page multiple (partial first and last pages, an interior left to the device), in a small
// range and in one of 48 pages the device wrote last; prefetches of a range that starts and ends
// inside pages; a kernel that writes only some pages while the host keeps others; several
// managed allocations each attached to a stream of its own, kernels on all streams at once, each
// stream waited for and its range read while the others may still run; allocations freed while
// their pages are the host's (dirty, never pushed; clean after a fetch) and new ones made in
// their place; host threads writing and reading one range at once, their faults racing on the
// same pages; every result compared with the CPU.
#include <thread>
#include <vector>

#include "rt_check.h"

__global__ void AddToAll(unsigned char* bytes, size_t n, int add) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    bytes[i] = static_cast<unsigned char>(bytes[i] + add);
  }
}

// Writes value into words [first, last) only.
__global__ void SetWords(int* words, size_t first, size_t last, int value) {
  for (size_t i = first + blockIdx.x * blockDim.x + threadIdx.x; i < last;
       i += gridDim.x * blockDim.x) {
    words[i] = value;
  }
}

__global__ void Scale(int* data, size_t n, int factor) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    data[i] *= factor;
  }
}

namespace {

constexpr size_t kPage = 4096;

void PartialPages() {
  // 5 pages and 100 bytes; the program's range starts 37 bytes in and ends 51 bytes early.
  const size_t size = 5 * kPage + 100;
  unsigned char* m = nullptr;
  CHECK(cudaMallocManaged(&m, size));
  std::vector<unsigned char> want(size, 0);
  const size_t first = 37, last = size - 51;
  // The host writes 3 bytes at each end of [first, last): partial pages at both ends.
  for (size_t i = 0; i < 3; ++i) {
    want[first + i] = m[first + i] = static_cast<unsigned char>(10 + i);
    want[last - 1 - i] = m[last - 1 - i] = static_cast<unsigned char>(20 + i);
  }
  AddToAll<<<8, 128>>>(m + first, last - first, 1);
  CHECK_SYNC();
  for (size_t i = first; i < last; ++i) want[i] = static_cast<unsigned char>(want[i] + 1);
  for (size_t i = 0; i < size; ++i) {
    EXPECT(m[i] == want[i], "partial pages: byte %zu is %d, want %d", i, m[i], want[i]);
  }
  // Again, the host now writing single bytes in the first and last page only.
  m[0] = 200;
  m[size - 1] = 201;
  want[0] = 200;
  want[size - 1] = 201;
  AddToAll<<<8, 128>>>(m, size, 2);
  CHECK_SYNC();
  for (size_t i = 0; i < size; ++i) want[i] = static_cast<unsigned char>(want[i] + 2);
  EXPECT(m[size - 1] == want[size - 1] && m[0] == want[0], "ends %d %d", m[0], m[size - 1]);
  for (size_t i = 0; i < size; ++i) {
    EXPECT(m[i] == want[i], "second pass: byte %zu is %d, want %d", i, m[i], want[i]);
  }
  CHECK(cudaFree(m));
}

void LargeRangeEnds() {
  // 48 pages and 300 bytes: more than a fault's first window, so the two ends are fetched and
  // written apart, the interior left to the device.
  const size_t size = 48 * kPage + 300;
  unsigned char* m = nullptr;
  CHECK(cudaMallocManaged(&m, size));
  std::vector<unsigned char> want(size, 0);
  AddToAll<<<8, 128>>>(m, size, 5);  // the device's pages now
  CHECK_SYNC();
  for (size_t i = 0; i < size; ++i) want[i] = 5;
  // Writes at both ends, the last byte first: each is a write to a page the host lacks.
  m[size - 1] = 77;
  m[size - kPage - 7] = 78;
  m[0] = 79;
  m[kPage + 1] = 80;
  want[size - 1] = 77;
  want[size - kPage - 7] = 78;
  want[0] = 79;
  want[kPage + 1] = 80;
  AddToAll<<<8, 128>>>(m, size, 1);
  CHECK_SYNC();
  for (size_t i = 0; i < size; ++i) want[i] = static_cast<unsigned char>(want[i] + 1);
  for (size_t i = size; i-- > 0;) {
    EXPECT(m[i] == want[i], "large range: byte %zu is %d, want %d", i, m[i], want[i]);
  }
  // Prefetches of a range that starts and ends inside pages: the host's writes at its ends go
  // to the device, and the device's results come back.
  const size_t first = 1000, bytes = 20 * kPage + 77;
  m[first] = 90;
  m[first + bytes - 1] = 91;
  want[first] = 90;
  want[first + bytes - 1] = 91;
  cudaMemLocation device = {};
  device.type = cudaMemLocationTypeDevice;
  device.id = 0;
  cudaMemLocation host = {};
  host.type = cudaMemLocationTypeHost;
  CHECK(cudaMemPrefetchAsync(m + first, bytes, device, 0, 0));
  AddToAll<<<8, 128>>>(m + first, bytes, 3);
  CHECK(cudaGetLastError());
  CHECK(cudaMemPrefetchAsync(m + first, bytes, host, 0, 0));
  CHECK(cudaDeviceSynchronize());
  for (size_t i = first; i < first + bytes; ++i) want[i] = static_cast<unsigned char>(want[i] + 3);
  for (size_t i = 0; i < size; ++i) {
    EXPECT(m[i] == want[i], "unaligned prefetch: byte %zu is %d, want %d", i, m[i], want[i]);
  }
  CHECK(cudaFree(m));
}

void DeviceWritesSomePages() {
  // 8 pages of ints; the host owns every page, the kernel writes pages 2 and 5 only.
  const size_t words = 8 * kPage / sizeof(int), per_page = kPage / sizeof(int);
  int* m = nullptr;
  CHECK(cudaMallocManaged(&m, words * sizeof(int)));
  std::vector<int> want(words);
  for (size_t i = 0; i < words; ++i) want[i] = m[i] = static_cast<int>(i);
  SetWords<<<4, 128>>>(m, 2 * per_page, 3 * per_page, -1);
  SetWords<<<4, 128>>>(m, 5 * per_page + 1, 6 * per_page - 1, -2);
  CHECK_SYNC();
  for (size_t i = 2 * per_page; i < 3 * per_page; ++i) want[i] = -1;
  for (size_t i = 5 * per_page + 1; i < 6 * per_page - 1; ++i) want[i] = -2;
  // Read backwards: the last page first.
  for (size_t i = words; i-- > 0;) {
    EXPECT(m[i] == want[i], "some pages: word %zu is %d, want %d", i, m[i], want[i]);
  }
  CHECK(cudaFree(m));
}

void RangesAndStreams() {
  const int kStreams = 4;
  const size_t n = 50000 + 17;  // not a page multiple
  cudaStream_t streams[kStreams];
  int* data[kStreams];
  std::vector<std::vector<int>> want(kStreams, std::vector<int>(n));
  for (int s = 0; s < kStreams; ++s) {
    CHECK(cudaStreamCreateWithFlags(&streams[s], cudaStreamNonBlocking));
    CHECK(cudaMallocManaged(&data[s], n * sizeof(int), cudaMemAttachHost));
    CHECK(cudaStreamAttachMemAsync(streams[s], data[s], 0, cudaMemAttachSingle));
  }
  CHECK(cudaDeviceSynchronize());
  for (int s = 0; s < kStreams; ++s) {
    for (size_t i = 0; i < n; ++i) want[s][i] = data[s][i] = static_cast<int>(i) * (s + 1);
  }
  for (int round = 0; round < 3; ++round) {
    for (int s = 0; s < kStreams; ++s) {
      Scale<<<16, 128, 0, streams[s]>>>(data[s], n, s + 2);
      CHECK_LAUNCH();
    }
    // Each stream waited for in turn and its range checked; the host then updates a few
    // elements of it before the next round, while later streams' kernels may still be pending.
    for (int s = kStreams; s-- > 0;) {
      CHECK(cudaStreamSynchronize(streams[s]));
      for (size_t i = 0; i < n; ++i) want[s][i] *= s + 2;
      for (size_t i = 0; i < n; i += 997) {
        EXPECT(data[s][i] == want[s][i], "round %d stream %d [%zu] = %d, want %d", round, s, i,
               data[s][i], want[s][i]);
      }
      data[s][n - 1] = want[s][n - 1] = round - s;
      data[s][0] = want[s][0] = round + s;
    }
  }
  CHECK(cudaDeviceSynchronize());
  for (int s = 0; s < kStreams; ++s) {
    for (size_t i = 0; i < n; ++i) {
      EXPECT(data[s][i] == want[s][i], "end: stream %d [%zu] = %d, want %d", s, i, data[s][i],
             want[s][i]);
    }
    CHECK(cudaFree(data[s]));
    CHECK(cudaStreamDestroy(streams[s]));
  }
}

// Host threads write and read one managed range at once, each every fourth word, so that every
// page is written by all of them (their faults race on the same pages), between kernels that
// update every word.
void HostThreads() {
  const int kThreads = 4;
  const size_t words = 64 * kPage / sizeof(int) + 13;
  int* m = nullptr;
  CHECK(cudaMallocManaged(&m, words * sizeof(int)));
  for (int round = 0; round < 3; ++round) {
    if (round > 0) {
      Scale<<<8, 128>>>(m, words, 3);
      CHECK_SYNC();
    }
    std::vector<std::thread> writers;
    for (int t = 0; t < kThreads; ++t) {
      writers.emplace_back([=] {
        // Word i belongs to thread i % kThreads: every page is written by all of them.
        for (size_t i = t; i < words; i += kThreads) {
          m[i] = round == 0 ? static_cast<int>(i) : m[i] + t;
        }
      });
    }
    for (auto& w : writers) w.join();
  }
  Scale<<<8, 128>>>(m, words, 2);
  CHECK_SYNC();
  std::vector<int> bad(kThreads, -1);
  std::vector<std::thread> readers;
  for (int t = 0; t < kThreads; ++t) {
    readers.emplace_back([=, &bad] {
      for (size_t i = t; i < words; i += kThreads) {
        // i, then twice (x3 + t): ((i*3 + t)*3 + t)*2.
        const long long want = ((static_cast<long long>(i) * 3 + t) * 3 + t) * 2;
        if (m[i] != static_cast<int>(want) && bad[t] < 0) bad[t] = static_cast<int>(i);
      }
    });
  }
  for (auto& r : readers) r.join();
  for (int t = 0; t < kThreads; ++t) EXPECT(bad[t] < 0, "host threads: word %d is wrong", bad[t]);
  CHECK(cudaFree(m));
}

void FreeWhileHostResident() {
  const size_t n = 3 * kPage;
  for (int round = 0; round < 4; ++round) {
    int* dirty = nullptr;
    CHECK(cudaMallocManaged(&dirty, n * sizeof(int)));
    for (size_t i = 0; i < n; ++i) dirty[i] = 7;  // never pushed
    CHECK(cudaFree(dirty));
    int* clean = nullptr;
    CHECK(cudaMallocManaged(&clean, n * sizeof(int)));
    SetWords<<<4, 128>>>(clean, 0, n, 9);
    CHECK_SYNC();
    long long sum = 0;
    for (size_t i = 0; i < n; ++i) sum += clean[i];  // fetched: the host's, clean
    EXPECT(sum == 9ll * static_cast<long long>(n), "sum %lld", sum);
    CHECK(cudaFree(clean));
  }
  // A fresh allocation after all that works like any other.
  int* m = nullptr;
  CHECK(cudaMallocManaged(&m, n * sizeof(int)));
  for (size_t i = 0; i < n; ++i) m[i] = static_cast<int>(i);
  Scale<<<4, 128>>>(m, n, 3);
  CHECK_SYNC();
  for (size_t i = 0; i < n; ++i) EXPECT(m[i] == 3 * static_cast<int>(i), "fresh [%zu]", i);
  CHECK(cudaFree(m));
}

}  // namespace

int main() {
  PartialPages();
  LargeRangeEnds();
  DeviceWritesSomePages();
  RangesAndStreams();
  HostThreads();
  FreeWhileHostResident();
  printf("rt_managed_ranges: OK\n");
  return 0;
}
