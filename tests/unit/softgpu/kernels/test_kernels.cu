// Kernels run by the softgpu unit tests. Compiled to PTX (compute_75) at build time.
#include <cassert>
#include <cstdio>

extern "C" __global__ void vec_add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    y[i] = a * x[i] + y[i];
  }
}

// Sum of each block's slice via shared memory and a tree reduction (blockDim.x = 256).
extern "C" __global__ void block_sum(const float* in, float* out, int n) {
  __shared__ float buf[256];
  int t = threadIdx.x;
  int i = blockIdx.x * blockDim.x + t;
  buf[t] = i < n ? in[i] : 0.f;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s) buf[t] += buf[t + s];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = buf[0];
}

// The same with dynamic shared memory and a 2D block.
extern "C" __global__ void block_sum_dynamic(const int* in, int* out) {
  extern __shared__ int dyn[];
  int t = threadIdx.y * blockDim.x + threadIdx.x;
  int nt = blockDim.x * blockDim.y;
  dyn[t] = in[blockIdx.x * nt + t];
  __syncthreads();
  if (t == 0) {
    int s = 0;
    for (int k = 0; k < nt; ++k) s += dyn[k];
    out[blockIdx.x] = s;
  }
}

// Dynamic shared memory after a static variable whose size is not a multiple of 16: the dynamic
// array starts 16-byte aligned, and all of it is usable (threadFenceReduction's layout).
extern "C" __global__ void dynamic_after_static(const float* in, float* out) {
  __shared__ char tag;  // 1 byte of static shared memory
  extern __shared__ float after[];
  const unsigned t = threadIdx.x;
  if (t == 0) tag = static_cast<char>(in[0]);
  after[t] = in[t];
  __syncthreads();
  out[t] = after[blockDim.x - 1 - t] + tag;
}

// A shuffle tree over only the first 8 lanes (a ballot of them as the mask), as NVIDIA's reduction
// sample ends its reduction: sources outside those lanes give 0, so lane 0 sums lanes 0..7.
extern "C" __global__ void partial_warp_sum(const int* in, int* out) {
  const unsigned lane = threadIdx.x;
  int v = in[lane];
  if (lane >= 8) v *= 1000;  // what lanes 8..31 hold when they sit the tree out
  out[1 + lane] = v;         // (computed by every lane, before the branch)
  const unsigned members = __ballot_sync(0xffffffffu, lane < 8);
  if (lane < 8) {
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(members, v, offset);
    if (lane == 0) out[0] = v;
  }
}

// bmsk (cub's radix sort uses it): masks of b bits from bit a, wrapped and clamped.
extern "C" __global__ void bit_masks(const unsigned* a, const unsigned* b, unsigned* wrap,
                                     unsigned* clamp, int n) {
  int i = threadIdx.x;
  if (i >= n) return;
  unsigned w, c;
  asm("bmsk.wrap.b32 %0, %1, %2;" : "=r"(w) : "r"(a[i]), "r"(b[i]));
  asm("bmsk.clamp.b32 %0, %1, %2;" : "=r"(c) : "r"(a[i]), "r"(b[i]));
  wrap[i] = w;
  clamp[i] = c;
}

extern "C" __global__ void atomics(int* ints, unsigned* uints, float* floats,
                                   unsigned long long* u64, double* doubles) {
  __shared__ int shared_count;
  if (threadIdx.x == 0) shared_count = 0;
  __syncthreads();
  int tid = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(&ints[0], 1);
  atomicMax(&ints[1], tid);
  atomicMin(&ints[2], -tid);
  atomicAdd(&floats[0], 0.5f);
  atomicAdd(&u64[0], 3ull);
  atomicAdd(&doubles[0], 0.25);
  atomicOr(&uints[0], 1u << (tid % 32));
  atomicXor(&uints[1], 1u);
  atomicAnd(&uints[2], ~(1u << (tid % 32)));
  atomicInc(&uints[3], 9u);
  atomicCAS(&ints[3], 0, tid + 1);  // exactly one thread wins
  atomicExch(&ints[4], 7);
  atomicAdd(&shared_count, 1);
  __syncthreads();
  if (threadIdx.x == 0) atomicAdd(&ints[5], shared_count);
}

// Collatz steps: a data-dependent loop where lanes of a warp diverge and reconverge.
extern "C" __global__ void collatz(const int* in, int* steps, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  long long v = in[i];
  int s = 0;
  while (v != 1) {
    if (v & 1)
      v = 3 * v + 1;
    else
      v >>= 1;
    ++s;
  }
  steps[i] = s;
}

extern "C" __global__ void f64_math(const double* in, double* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double x = in[i];
  out[4 * i + 0] = sqrt(x) + x / 3.0;
  out[4 * i + 1] = fma(x, x, -1.0);
  out[4 * i + 2] = exp(x * 0.01) + log(x + 1.0);
  out[4 * i + 3] = sin(x) * cos(x);
}

extern "C" __global__ void store_at(int* p, long long index, int value) { p[index] = value; }

extern "C" __global__ void warp_ops(const int* in, int* out) {
  int lane = threadIdx.x & 31;
  int v = in[threadIdx.x];
  unsigned ballot = __ballot_sync(0xffffffffu, v > 10);
  int down = __shfl_down_sync(0xffffffffu, v, 1);
  int up = __shfl_up_sync(0xffffffffu, v, 2);
  int x = __shfl_xor_sync(0xffffffffu, v, 3);
  int idx = __shfl_sync(0xffffffffu, v, 5);
  int all = __all_sync(0xffffffffu, v >= 0);
  int any = __any_sync(0xffffffffu, v == 17);
  int sum = v;
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  int* o = out + threadIdx.x * 8;
  o[0] = ballot;
  o[1] = down;
  o[2] = up;
  o[3] = x;
  o[4] = idx;
  o[5] = all + 2 * any;
  o[6] = sum;
  o[7] = lane;
}

struct Pair {
  double d;
  int i;
};

extern "C" __global__ void param_layout(char c, short s, int i, long long l, float f, double d,
                                        Pair p, const int* ptr, int* out) {
  out[0] = c;
  out[1] = s;
  out[2] = i;
  out[3] = static_cast<int>(l >> 32);
  out[4] = static_cast<int>(f * 10);
  out[5] = static_cast<int>(d * 10);
  out[6] = static_cast<int>(p.d * 10) + p.i;
  out[7] = ptr[0];
}

__device__ int device_counter = 5;
__constant__ float table[4] = {1.5f, 2.5f, 3.5f, 4.5f};

extern "C" __global__ void globals(float* out) {
  int t = threadIdx.x;
  out[t] = table[t & 3] + device_counter;
  if (t == 0) device_counter += 1;
}

__device__ __noinline__ int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

extern "C" __global__ void recursion(int* out) { out[threadIdx.x] = fib(threadIdx.x); }

extern "C" __global__ void local_array(const int* in, int* out) {
  int a[16];
  for (int k = 0; k < 16; ++k) a[k] = in[k] * threadIdx.x;
  out[threadIdx.x] = a[in[16 + threadIdx.x] & 15];
}

extern "C" __global__ void int_math(const int* in, int* out) {
  int a = in[0], b = in[1];
  unsigned u = static_cast<unsigned>(in[2]);
  out[0] = a / b;
  out[1] = a % b;
  out[2] = static_cast<int>(u / 7u);
  out[3] = static_cast<int>(u % 7u);
  out[4] = min(a, b);
  out[5] = max(a, b);
  out[6] = __popc(u);
  out[7] = __clz(u);
  out[8] = static_cast<int>(__brev(u));
  out[9] = __ffs(a);
  out[10] = static_cast<int>(__umulhi(u, 0x9e3779b9u));
  out[11] = __mulhi(a, b);
  out[12] = abs(a);
  out[13] = static_cast<int>((static_cast<long long>(a) * b) >> 7);
  out[14] = static_cast<int>(__byte_perm(u, 0x11223344u, 0x5140));
  out[15] = static_cast<int>(__funnelshift_l(u, 0xdeadbeefu, 12));
}

extern "C" __global__ void conversions(const float* in, int* out, float* fout) {
  float x = in[threadIdx.x];
  out[threadIdx.x * 4 + 0] = __float2int_rn(x);
  out[threadIdx.x * 4 + 1] = __float2int_rz(x);
  out[threadIdx.x * 4 + 2] = __float2int_rd(x);
  out[threadIdx.x * 4 + 3] = __float2int_ru(x);
  fout[threadIdx.x] =
      static_cast<float>(static_cast<double>(x) * 3.0) + __int2float_rn(threadIdx.x);
}

extern "C" __global__ void spin(int* flag, int value, long long iterations) {
  volatile int sink = 0;
  for (long long k = 0; k < iterations; ++k) sink += static_cast<int>(k);
  if (threadIdx.x == 0) *flag = value;
}

extern "C" __global__ void copy_flag(const int* src, int* dst) { *dst = *src; }

extern "C" __global__ void say_hello(int value) {
  if (threadIdx.x < 2) printf("hello %d from thread %d, %.2f %s\n", value, threadIdx.x, 1.5, "ok");
}

// Lanes take different if/else paths of different lengths, then shuffle across the full warp:
// correct only if the warp has reconverged at the join point.
extern "C" __global__ void diverge_reconverge(const int* in, int* out) {
  int v = in[threadIdx.x];
  int r = v * 3;
  if (v & 1) {
    for (int k = 0; k < v; ++k) r += k * v;
  }
  if (v > 10) r -= in[v & 31];
  int s = r;
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  out[threadIdx.x] = s;
}

// Device-side malloc/free: per-thread blocks, and a block kept across launches.
extern "C" __global__ void heap_sum(long long* out, int* failures) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int count = 8 + t % 24;
  int* p = static_cast<int*>(malloc(count * sizeof(int)));
  if (p == nullptr) {
    atomicAdd(failures, 1);
    return;
  }
  for (int k = 0; k < count; ++k) p[k] = t * k;
  long long sum = 0;
  for (int k = 0; k < count; ++k) sum += p[k];
  free(p);
  out[t] = sum;
}

__device__ int* kept_block;

extern "C" __global__ void heap_keep(int n) {
  if (threadIdx.x != 0) return;
  kept_block = static_cast<int*>(malloc(n * sizeof(int)));
  if (kept_block != nullptr)
    for (int k = 0; k < n; ++k) kept_block[k] = 5 * k;
}

extern "C" __global__ void heap_use(int n, long long* out) {
  if (threadIdx.x != 0) return;
  long long sum = -1;
  if (kept_block != nullptr) {
    sum = 0;
    for (int k = 0; k < n; ++k) sum += kept_block[k];
    free(kept_block);
  }
  *out = sum;
}

extern "C" __global__ void check_positive(const int* values) { assert(values[threadIdx.x] > 0); }

struct Big {
  int v[64];
};

// Indexing a by-value struct with a run-time index takes the parameter's address.
extern "C" __global__ void param_array(Big b, int* out) {
  out[threadIdx.x] = b.v[(threadIdx.x * 7) % 64];
}

// Function pointers (in registers and in an initialised table) and virtual functions.
__device__ int add_one(int x) { return x + 1; }
__device__ int times_two(int x) { return x * 2; }
__device__ int (*op_table[2])(int) = {add_one, times_two};

struct Shape {
  __device__ virtual int area(int s) const { return s; }
};
struct Square : Shape {
  __device__ int area(int s) const override { return s * s; }
};

extern "C" __global__ void indirect_calls(int* out, int choose) {
  int t = threadIdx.x;
  int (*fn)(int) = choose ? times_two : add_one;
  Square sq;
  Shape plain;
  const Shape* shape = (t & 1) ? static_cast<const Shape*>(&sq) : &plain;
  out[3 * t + 0] = fn(t);
  out[3 * t + 1] = op_table[t & 1](t);
  out[3 * t + 2] = shape->area(t);
}

// Spins until *flag becomes non-zero (never, in the tests that use it).
extern "C" __global__ void spin_until(const volatile int* flag) {
  while (*flag == 0) {
  }
}

// __syncthreads inside an out-of-line device function (as in nvcc -G builds).
__device__ __noinline__ float block_reduce(float v, float* buf) {
  int t = threadIdx.x;
  buf[t] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s) buf[t] += buf[t + s];
    __syncthreads();
  }
  float r = buf[0];
  __syncthreads();
  return r;
}

extern "C" __global__ void reduce_in_function(const float* in, float* out) {
  __shared__ float buf[256];
  float total = block_reduce(in[blockIdx.x * blockDim.x + threadIdx.x], buf);
  if (threadIdx.x == 0) out[blockIdx.x] = total;
}

// Sets a conditional graph node's handle (cudaGraphSetConditional, a device runtime builtin): in
// softgpu the handle is the device address of a 32-bit word (rgpu's client makes them so).
extern "C" __global__ void set_conditional(cudaGraphConditionalHandle handle, unsigned value) {
  if (threadIdx.x == 0) cudaGraphSetConditional(handle, value);
}

// Peer access: reads src, writes dst[i] = src[i] + 1 and adds every src[i] to *sum atomically
// (global addresses: the pointers are kernel parameters).
extern "C" __global__ void peer_rw(const int* src, int* dst, int* sum, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    dst[i] = src[i] + 1;
    atomicAdd(sum, src[i]);
  }
}

// The same through generic addresses: the pointers are read from memory, so nvcc cannot tell
// their space (ptrs[0]: the data, ptrs[1]: the counter).
extern "C" __global__ void peer_generic(int* const* ptrs, int n) {
  int* data = ptrs[0];
  int i = threadIdx.x;
  if (i < n) {
    data[i] = data[i] * 2;
    atomicAdd(ptrs[1], 1);
  }
}

// Block 0 stores {i, i, ...} as one vector over and over while block 1 loads it as one vector
// and counts loads whose elements differ (`*torn`): `shape` 0 is v2.u32 (8 bytes), 1 v4.u32 and
// 2 v2.u64 (16 bytes). The writer starts once the reader has (or after a while, when the blocks
// do not run side by side).
extern "C" __global__ void vector_tearing(unsigned long long* word, volatile int* started,
                                          unsigned* torn, int shape, int iterations) {
  if (threadIdx.x != 0) return;
  if (blockIdx.x == 0) {
    for (int k = 0; k < 200000 && *started == 0; ++k) {
    }
    for (int i = 1; i <= iterations; ++i) {
      if (shape == 0) {
        asm volatile("st.global.cg.v2.u32 [%0], {%1, %1};" ::"l"(word), "r"(i) : "memory");
      } else if (shape == 1) {
        asm volatile("st.global.cg.v4.u32 [%0], {%1, %1, %1, %1};" ::"l"(word), "r"(i) : "memory");
      } else {
        asm volatile("st.global.cg.v2.u64 [%0], {%1, %1};" ::"l"(word), "l"((long long)i)
                     : "memory");
      }
    }
  } else {
    *started = 1;
    unsigned n = 0;
    for (int i = 0; i < iterations; ++i) {
      unsigned a, b, c, d;
      unsigned long long x, y;
      if (shape == 0) {
        asm volatile("ld.global.cg.v2.u32 {%0, %1}, [%2];"
                     : "=r"(a), "=r"(b)
                     : "l"(word)
                     : "memory");
        n += a != b;
      } else if (shape == 1) {
        asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(a), "=r"(b), "=r"(c), "=r"(d)
                     : "l"(word)
                     : "memory");
        n += a != b || b != c || c != d;
      } else {
        asm volatile("ld.global.cg.v2.u64 {%0, %1}, [%2];"
                     : "=l"(x), "=l"(y)
                     : "l"(word)
                     : "memory");
        n += x != y;
      }
    }
    *torn = n;
  }
}
