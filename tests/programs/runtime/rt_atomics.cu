// Atomics under contention: atomicAdd on int (a histogram) and float (a sum), atomicSub,
// atomicMax/atomicMin, atomicAnd/Or/Xor, atomicExch, atomicInc, atomicCAS (a per-slot ticket
// and a 64-bit CAS loop under full contention), and 64-bit atomicAdd.
#include "rt_check.h"

#include <cstring>
#include <vector>

struct Results {
  int hist[16];
  float fsum;
  int sub;
  int max_v, min_v;
  unsigned and_v, or_v, xor_v;
  int exch_count;
  unsigned inc;
  unsigned long long add64;
  int tickets[64];
};

__global__ void Hammer(const int* values, int n, Results* r, int* exch_slot, int* owner) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int v = values[i];
  atomicAdd(&r->hist[v & 15], 1);
  atomicAdd(&r->fsum, (float)(v & 255) * 0.5f);
  atomicSub(&r->sub, v & 7);
  atomicMax(&r->max_v, v);
  atomicMin(&r->min_v, v);
  atomicAnd(&r->and_v, ~(1u << (v & 31)));
  atomicOr(&r->or_v, 1u << ((unsigned)v % 29u));
  atomicXor(&r->xor_v, (unsigned)v);
  // Each exchange hands back the previous thread's value: every id is seen exactly once.
  int prev = atomicExch(exch_slot, i);
  owner[prev + 1] += 1;       // prev is -1 for the first thread; slots are distinct so no race
  atomicInc(&r->inc, 1000u);  // wraps to 0 after reaching 1000
  atomicAdd(&r->add64, (unsigned long long)v * 1000003ULL);
  // Ticket: first thread to CAS slot (i % 64) from 0 wins; others see it taken.
  atomicCAS(&r->tickets[i % 64], 0, i + 1);
}

__global__ void CasCount(int n, unsigned long long* counter) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned long long old = *counter, assumed;
  do {
    assumed = old;
    old = atomicCAS(counter, assumed, assumed + 3);
  } while (old != assumed);
}

int main() {
  const int n = 20000;
  std::vector<int> values(n);
  for (int i = 0; i < n; ++i) values[i] = (int)((i * 2654435761u) % 100003u) - 50000;
  int* dv = nullptr;
  Results* dr = nullptr;
  int *exch_slot = nullptr, *owner = nullptr;
  CHECK(cudaMalloc(&dv, n * sizeof(int)));
  CHECK(cudaMalloc(&dr, sizeof(Results)));
  CHECK(cudaMalloc(&exch_slot, sizeof(int)));
  CHECK(cudaMalloc(&owner, (n + 1) * sizeof(int)));
  CHECK(cudaMemcpy(dv, values.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  Results init;
  memset(&init, 0, sizeof init);
  init.max_v = -2147483647 - 1;
  init.min_v = 2147483647;
  init.and_v = 0xFFFFFFFFu;
  init.sub = 1000000;
  CHECK(cudaMemcpy(dr, &init, sizeof init, cudaMemcpyHostToDevice));
  const int minus_one = -1;
  CHECK(cudaMemcpy(exch_slot, &minus_one, sizeof(int), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(owner, 0, (n + 1) * sizeof(int)));
  Hammer<<<GridFor(n, 256), 256>>>(dv, n, dr, exch_slot, owner);
  CHECK_SYNC();
  Results r;
  CHECK(cudaMemcpy(&r, dr, sizeof r, cudaMemcpyDeviceToHost));
  std::vector<int> own(n + 1);
  CHECK(cudaMemcpy(own.data(), owner, (n + 1) * sizeof(int), cudaMemcpyDeviceToHost));
  int last = -2;
  CHECK(cudaMemcpy(&last, exch_slot, sizeof(int), cudaMemcpyDeviceToHost));

  int hist[16] = {0};
  double fsum = 0;
  int sub = 1000000, mx = -2147483647 - 1, mn = 2147483647;
  unsigned and_v = 0xFFFFFFFFu, or_v = 0, xor_v = 0;
  unsigned long long add64 = 0;
  for (int i = 0; i < n; ++i) {
    int v = values[i];
    hist[v & 15]++;
    fsum += (double)((v & 255) * 0.5f);
    sub -= v & 7;
    mx = v > mx ? v : mx;
    mn = v < mn ? v : mn;
    and_v &= ~(1u << (v & 31));
    or_v |= 1u << ((unsigned)v % 29u);
    xor_v ^= (unsigned)v;
    add64 += (unsigned long long)v * 1000003ULL;
  }
  for (int b = 0; b < 16; ++b)
    EXPECT(r.hist[b] == hist[b], "hist[%d] = %d, want %d", b, r.hist[b], hist[b]);
  EXPECT(Near(r.fsum, fsum, 1e-5, 0.0), "float atomicAdd sum %.9g, want %.9g", r.fsum, fsum);
  EXPECT(r.sub == sub, "atomicSub %d, want %d", r.sub, sub);
  EXPECT(r.max_v == mx && r.min_v == mn, "max %d min %d, want %d %d", r.max_v, r.min_v, mx, mn);
  EXPECT(r.and_v == and_v && r.or_v == or_v && r.xor_v == xor_v,
         "and/or/xor %x %x %x, want %x %x %x", r.and_v, r.or_v, r.xor_v, and_v, or_v, xor_v);
  EXPECT(r.add64 == add64, "64-bit atomicAdd %llu, want %llu", r.add64, add64);
  EXPECT(r.inc == (unsigned)(n % 1001), "atomicInc %u, want %u", r.inc, (unsigned)(n % 1001));
  // atomicExch: the n + 1 values {-1, 0, ..., n-1} minus the one left in the slot were each
  // returned exactly once.
  EXPECT(last >= 0 && last < n, "last exchanged value %d", last);
  for (int k = 0; k <= n; ++k) {
    int want = (k - 1 == last) ? 0 : 1;
    EXPECT(own[k] == want, "value %d returned by atomicExch %d times, want %d", k - 1, own[k],
           want);
  }
  // atomicCAS tickets: every slot was claimed by some thread with that residue.
  for (int k = 0; k < 64; ++k) {
    int id = r.tickets[k] - 1;
    EXPECT(id >= 0 && id < n && id % 64 == k, "ticket %d held by %d", k, id);
  }

  // A CAS loop under full contention: every thread adds 3.
  unsigned long long* counter = nullptr;
  CHECK(cudaMalloc(&counter, sizeof *counter));
  CHECK(cudaMemset(counter, 0, sizeof *counter));
  CasCount<<<GridFor(4096, 128), 128>>>(4096, counter);
  CHECK_SYNC();
  unsigned long long count = 0;
  CHECK(cudaMemcpy(&count, counter, sizeof count, cudaMemcpyDeviceToHost));
  EXPECT(count == 3ULL * 4096, "CAS counter %llu, want %llu", count, 3ULL * 4096);

  CHECK(cudaFree(counter));
  CHECK(cudaFree(dv));
  CHECK(cudaFree(dr));
  CHECK(cudaFree(exch_slot));
  CHECK(cudaFree(owner));
  printf("rt_atomics: OK\n");
  return 0;
}
