// Warp-level primitives: a __shfl_down_sync tree reduction, __shfl_sync broadcast (full warp and
// 16-lane segments), __shfl_xor_sync butterfly maximum, __shfl_up_sync inclusive scan,
// __ballot_sync (full warp and a divergent half-warp mask), __any_sync/__all_sync, __popc and
// __match_any_sync; every lane's result compared with the CPU.
#include "rt_check.h"

#include <vector>

struct LaneOut {
  int sum;               // warp total (reduced with shfl_down, broadcast from lane 0)
  int bcast;             // lane 5's value
  int maxv;              // warp maximum (xor butterfly)
  int scan;              // inclusive prefix sum within the warp
  int seg_sum;           // total of the lane's 16-lane segment
  unsigned ballot;       // lanes with an odd value
  unsigned even_ballot;  // among even lanes only: those with value > 0
  int any_big, all_pos;
  int popc;
  unsigned match;  // lanes holding the same (value & 3)
};

__global__ void WarpOps(const int* in, LaneOut* out) {
  const unsigned full = 0xffffffffu;
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int lane = threadIdx.x & 31;
  int v = in[i];
  LaneOut o;

  int s = v;
  for (int d = 16; d > 0; d /= 2) s += __shfl_down_sync(full, s, d);
  o.sum = __shfl_sync(full, s, 0);
  o.bcast = __shfl_sync(full, v, 5);

  int m = v;
  for (int d = 1; d < 32; d *= 2) {
    int other = __shfl_xor_sync(full, m, d);
    m = other > m ? other : m;
  }
  o.maxv = m;

  int sc = v;
  for (int d = 1; d < 32; d *= 2) {
    int up = __shfl_up_sync(full, sc, d);
    if (lane >= d) sc += up;
  }
  o.scan = sc;

  int seg = v;
  for (int d = 8; d > 0; d /= 2) seg += __shfl_down_sync(full, seg, d, 16);
  o.seg_sum = __shfl_sync(full, seg, 0, 16);

  o.ballot = __ballot_sync(full, v & 1);
  o.even_ballot = 0;
  if ((lane & 1) == 0) o.even_ballot = __ballot_sync(0x55555555u, v > 0);
  o.any_big = __any_sync(full, v > 90);
  o.all_pos = __all_sync(full, v > -100);
  o.popc = __popc(o.ballot);
  o.match = __match_any_sync(full, v & 3);
  out[i] = o;
}

int main() {
  const int warps = 64, n = warps * 32;
  std::vector<int> in(n);
  for (int i = 0; i < n; ++i) in[i] = (int)((i * 37u + (i >> 5) * 11u) % 199u) - 99;
  // Make some warps all-positive and one warp free of values > 90.
  for (int i = 0; i < 32; ++i) in[3 * 32 + i] = (i % 50) + 1;
  for (int i = 0; i < 32; ++i) in[7 * 32 + i] = (i * 3) - 40;
  in[10 * 32 + 7] = -150;  // one warp where __all_sync(v > -100) is false
  int* din = nullptr;
  LaneOut* dout = nullptr;
  CHECK(cudaMalloc(&din, n * sizeof(int)));
  CHECK(cudaMalloc(&dout, n * sizeof(LaneOut)));
  CHECK(cudaMemcpy(din, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  WarpOps<<<n / 128, 128>>>(din, dout);
  CHECK_SYNC();
  std::vector<LaneOut> out(n);
  CHECK(cudaMemcpy(out.data(), dout, n * sizeof(LaneOut), cudaMemcpyDeviceToHost));

  for (int w = 0; w < warps; ++w) {
    const int* v = &in[w * 32];
    int sum = 0, mx = -1000, any_big = 0, all_pos = 1;
    unsigned ballot = 0, even = 0;
    for (int l = 0; l < 32; ++l) {
      sum += v[l];
      mx = v[l] > mx ? v[l] : mx;
      if (v[l] & 1) ballot |= 1u << l;
      if ((l & 1) == 0 && v[l] > 0) even |= 1u << l;
      any_big |= v[l] > 90;
      all_pos &= v[l] > -100;
    }
    int scan = 0;
    for (int l = 0; l < 32; ++l) {
      const LaneOut& o = out[w * 32 + l];
      scan += v[l];
      int seg = 0;
      for (int k = (l / 16) * 16; k < (l / 16) * 16 + 16; ++k) seg += v[k];
      unsigned match = 0;
      for (int k = 0; k < 32; ++k)
        if ((v[k] & 3) == (v[l] & 3)) match |= 1u << k;
      EXPECT(o.sum == sum, "warp %d lane %d: sum %d, want %d", w, l, o.sum, sum);
      EXPECT(o.bcast == v[5], "warp %d lane %d: broadcast %d, want %d", w, l, o.bcast, v[5]);
      EXPECT(o.maxv == mx, "warp %d lane %d: max %d, want %d", w, l, o.maxv, mx);
      EXPECT(o.scan == scan, "warp %d lane %d: scan %d, want %d", w, l, o.scan, scan);
      EXPECT(o.seg_sum == seg, "warp %d lane %d: segment sum %d, want %d", w, l, o.seg_sum, seg);
      EXPECT(o.ballot == ballot, "warp %d lane %d: ballot %08x, want %08x", w, l, o.ballot, ballot);
      unsigned want_even = (l & 1) == 0 ? even : 0;
      EXPECT(o.even_ballot == want_even, "warp %d lane %d: half ballot %08x, want %08x", w, l,
             o.even_ballot, want_even);
      EXPECT(o.any_big == any_big && o.all_pos == all_pos, "warp %d lane %d: any %d all %d", w, l,
             o.any_big, o.all_pos);
      EXPECT(o.popc == __builtin_popcount(ballot), "warp %d lane %d: popc %d", w, l, o.popc);
      EXPECT(o.match == match, "warp %d lane %d: match %08x, want %08x", w, l, o.match, match);
    }
  }
  CHECK(cudaFree(din));
  CHECK(cudaFree(dout));
  printf("rt_warp_shuffle: OK\n");
  return 0;
}
