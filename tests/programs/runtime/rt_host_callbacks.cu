// Host functions and stream callbacks run in stream order: cudaLaunchHostFunc and
// cudaStreamAddCallback see the results of the copies enqueued before them, later copies see what
// a host function wrote into pinned memory (the stream waits for it), a second stream ordered
// after a host function by an event runs after it, and callbacks on the legacy stream run before
// cudaDeviceSynchronize returns; and cudaLaunchHostFunc is asynchronous: it returns before its
// function runs when earlier work in the stream (here a host function that waits for the main
// thread) is still pending; work issued while held work is still being sent goes behind it.
// Host functions run on a thread of the program's own C library:
// formatting a double there works (it crashed when the thread was the runtime's).
#include "rt_check.h"

#include <atomic>
#include <cstring>
#include <chrono>
#include <thread>

__global__ void AddScalar(int* p, int n, int v) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += v;
}

__global__ void SetWord(int* p, int v) { *p = v; }

constexpr int kN = 4096;

struct State {
  int* h_in;
  int* h_mid;
  int* h_out;
  std::atomic<int> next{1};
  int order[4] = {0, 0, 0, 0};  // which sequence number each stage got
  bool ok[4] = {false, false, false, false};
  bool saw_stage1 = false;  // stage 1 was complete when the other stream's function ran
  std::atomic<int> legacy_calls{0};
  cudaError_t cb_status = cudaErrorUnknown;
};

// Stage 1 (host function): the first result is visible; then slowly writes the next input.
static void CUDART_CB Stage1(void* arg) {
  State* st = static_cast<State*>(arg);
  bool ok = true;
  for (int i = 0; i < kN; ++i) ok = ok && st->h_out[i] == st->h_in[i] + 1;
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  for (int i = 0; i < kN; ++i) st->h_mid[i] = st->h_out[i] * 2;
  st->ok[1] = ok;
  st->order[1] = st->next++;
}

// Stage 2 (stream callback): the second result, computed from what stage 1 wrote, is visible.
static void CUDART_CB Stage2(cudaStream_t, cudaError_t status, void* arg) {
  State* st = static_cast<State*>(arg);
  st->cb_status = status;
  bool ok = true;
  for (int i = 0; i < kN; ++i) ok = ok && st->h_out[i] == (st->h_in[i] + 1) * 2 + 3;
  st->ok[2] = ok;
  st->order[2] = st->next++;
}

static void CUDART_CB Stage3(void* arg) {
  State* st = static_cast<State*>(arg);
  st->ok[3] = true;
  st->order[3] = st->next++;
}

static void CUDART_CB OtherStream(void* arg) {
  State* st = static_cast<State*>(arg);
  st->saw_stage1 = st->order[1] != 0;
}

static void CUDART_CB Legacy(cudaStream_t, cudaError_t, void* arg) {
  ++static_cast<State*>(arg)->legacy_calls;
}

static void CUDART_CB LegacyFn(void* arg) { ++static_cast<State*>(arg)->legacy_calls; }

static void CUDART_CB FormatDouble(void* arg) {
  snprintf(static_cast<char*>(arg), 64, "%.3f %lf", 0.996214, 1e300);
}

// A gate: waits (at most 10 s) until the main thread opens it. Enqueued work behind it stays
// pending meanwhile, so enqueueing more work must not wait for it.
struct Gate {
  std::atomic<bool> open{false};
  std::atomic<bool> saw_open{false};
  std::atomic<bool> after_ran{false};
};
static void CUDART_CB WaitForGate(void* arg) {
  Gate* g = static_cast<Gate*>(arg);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!g->open && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  g->saw_open = g->open.load();
}
static void CUDART_CB AfterGate(void* arg) {
  Gate* g = static_cast<Gate*>(arg);
  g->after_ran = g->saw_open.load();
}

int main() {
  State st;
  CHECK(cudaMallocHost(&st.h_in, kN * sizeof(int)));
  CHECK(cudaMallocHost(&st.h_mid, kN * sizeof(int)));
  CHECK(cudaMallocHost(&st.h_out, kN * sizeof(int)));
  for (int i = 0; i < kN; ++i) st.h_in[i] = i * 5 - 77, st.h_mid[i] = -1, st.h_out[i] = 0;
  int* d = nullptr;
  CHECK(cudaMalloc(&d, kN * sizeof(int)));
  cudaStream_t s, other;
  CHECK(cudaStreamCreate(&s));
  CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  cudaEvent_t after1;
  CHECK(cudaEventCreateWithFlags(&after1, cudaEventDisableTiming));

  CHECK(cudaMemcpyAsync(d, st.h_in, kN * sizeof(int), cudaMemcpyHostToDevice, s));
  AddScalar<<<kN / 256, 256, 0, s>>>(d, kN, 1);
  CHECK_LAUNCH();
  CHECK(cudaMemcpyAsync(st.h_out, d, kN * sizeof(int), cudaMemcpyDeviceToHost, s));
  CHECK(cudaLaunchHostFunc(s, Stage1, &st));
  CHECK(cudaEventRecord(after1, s));
  CHECK(cudaStreamWaitEvent(other, after1, 0));
  CHECK(cudaLaunchHostFunc(other, OtherStream, &st));
  // Reads h_mid, which Stage1 fills: the copy must not start before Stage1 returns.
  CHECK(cudaMemcpyAsync(d, st.h_mid, kN * sizeof(int), cudaMemcpyHostToDevice, s));
  AddScalar<<<kN / 256, 256, 0, s>>>(d, kN, 3);
  CHECK_LAUNCH();
  CHECK(cudaMemcpyAsync(st.h_out, d, kN * sizeof(int), cudaMemcpyDeviceToHost, s));
  CHECK(cudaStreamAddCallback(s, Stage2, &st, 0));
  CHECK(cudaLaunchHostFunc(s, Stage3, &st));
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaStreamSynchronize(other));

  EXPECT(st.ok[1], "stage 1 did not see the first copy's result");
  EXPECT(st.ok[2], "stage 2 did not see the result computed from stage 1's data");
  EXPECT(st.ok[3], "stage 3 did not run");
  EXPECT(st.order[1] == 1 && st.order[2] == 2 && st.order[3] == 3, "order %d %d %d", st.order[1],
         st.order[2], st.order[3]);
  EXPECT(st.cb_status == cudaSuccess, "callback status %s", cudaGetErrorName(st.cb_status));
  EXPECT(st.saw_stage1, "the other stream's host function ran before stage 1 finished");
  for (int i = 0; i < kN; ++i)
    EXPECT(st.h_out[i] == (st.h_in[i] + 1) * 2 + 3, "final out[%d] = %d", i, st.h_out[i]);

  // Callbacks on the legacy default stream.
  AddScalar<<<kN / 256, 256>>>(d, kN, 1);
  CHECK_LAUNCH();
  CHECK(cudaStreamAddCallback(0, Legacy, &st, 0));
  CHECK(cudaLaunchHostFunc(0, LegacyFn, &st));
  CHECK(cudaDeviceSynchronize());
  EXPECT(st.legacy_calls == 2, "legacy-stream host calls: %d of 2", st.legacy_calls.load());

  // Many host functions in a row keep their order.
  st.next = 1;
  static int seen[64];
  struct Item {
    int index;
    State* st;
  } items[64];
  for (int k = 0; k < 64; ++k) {
    items[k] = {k, &st};
    CHECK(cudaLaunchHostFunc(
        s,
        [](void* a) {
          Item* it = static_cast<Item*>(a);
          seen[it->index] = it->st->next++;
        },
        &items[k]));
  }
  CHECK(cudaStreamSynchronize(s));
  for (int k = 0; k < 64; ++k) EXPECT(seen[k] == k + 1, "host function %d ran as #%d", k, seen[k]);

  // Asynchrony: both enqueue calls return while the gate is still closed; only then does this
  // thread open it. A cudaLaunchHostFunc that ran its function (or waited for the stream) in the
  // calling thread would keep the gate closed until it times out.
  Gate gate;
  CHECK(cudaLaunchHostFunc(other, WaitForGate, &gate));
  CHECK(cudaEventRecord(after1, other));
  CHECK(cudaStreamWaitEvent(s, after1, 0));
  CHECK(cudaLaunchHostFunc(s, AfterGate, &gate));
  gate.open = true;
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaStreamSynchronize(other));
  EXPECT(gate.saw_open,
         "cudaLaunchHostFunc did not return before its function ran: the gate "
         "function waited 10 s for the main thread");
  EXPECT(gate.after_ran, "the host function behind the gate did not run after it");

  // Work issued while the stream's held work is still being sent goes behind it: 2000 launches
  // queue behind a gate, the 11th item a host function that tells this thread they are being
  // sent; this thread then issues 100 more at once, and the last it issued is what the word holds
  // (sent past the held ones, an earlier value would be).
  {
    int* word;
    CHECK(cudaMalloc(&word, sizeof(int)));
    Gate held;
    std::atomic<bool> sending{false};
    CHECK(cudaLaunchHostFunc(other, WaitForGate, &held));
    for (int k = 0; k < 2000; ++k) {
      SetWord<<<1, 1, 0, other>>>(word, k);
      if (k == 9) {
        CHECK(cudaLaunchHostFunc(
            other, [](void* a) { static_cast<std::atomic<bool>*>(a)->store(true); }, &sending));
      }
    }
    held.open = true;
    while (!sending.load()) std::this_thread::yield();
    for (int k = 2000; k < 2100; ++k) SetWord<<<1, 1, 0, other>>>(word, k);
    CHECK(cudaStreamSynchronize(other));
    int last = -1;
    CHECK(cudaMemcpy(&last, word, sizeof last, cudaMemcpyDeviceToHost));
    EXPECT(last == 2099, "the word holds %d: work issued while held work was sent overtook it",
           last);
    CHECK(cudaFree(word));
  }

  CHECK(cudaEventDestroy(after1));
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaStreamDestroy(other));
  CHECK(cudaFree(d));
  CHECK(cudaFreeHost(st.h_in));
  CHECK(cudaFreeHost(st.h_mid));
  CHECK(cudaFreeHost(st.h_out));

  char formatted[64] = {};
  CHECK(cudaLaunchHostFunc(nullptr, FormatDouble, formatted));
  CHECK(cudaDeviceSynchronize());
  EXPECT(strncmp(formatted, "0.996 1", 7) == 0, "host function formatted '%s'", formatted);
  printf("rt_host_callbacks: OK\n");
  return 0;
}
