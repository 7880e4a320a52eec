// Channel/Listener over UCX: small and rendezvous-sized messages both ways, payload placement,
// and detection of a peer that goes away.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "transport/channel.h"

namespace rgpu {
namespace {

class TransportTest : public ::testing::TestWithParam<const char*> {
 protected:
  // Starts a listener on an ephemeral loopback port and returns its URL.
  TransportUrl Listen() {
    TransportUrl url;
    EXPECT_TRUE(TransportUrl::Parse(std::string(GetParam()) + "://127.0.0.1:0", &url).ok());
    Status s = CreateListener(url, &listener_);
    EXPECT_TRUE(s.ok()) << s.ToString();
    url.port = listener_->port();
    url.pin = listener_->pin();  // tls://: the client accepts only this listener's key
    return url;
  }
  std::unique_ptr<Listener> listener_;
};

// The server echoes every message back, header and payload, until the client leaves.
void EchoServer(Listener* listener, Status* final_status) {
  std::unique_ptr<PendingConnection> pending;
  Status s = listener->WaitConnection(10000, &pending);
  if (!s.ok()) {
    *final_status = s;
    return;
  }
  std::unique_ptr<Channel> ch;
  s = pending->Accept(ChannelOptions(), &ch);
  if (!s.ok()) {
    *final_status = s;
    return;
  }
  for (;;) {
    ReceivedMessage m;
    s = ch->Receive(10000, &m);
    if (!s.ok()) break;
    s = ch->Send(m.header, m.payload, m.payload_size);
    if (!s.ok()) break;
  }
  *final_status = s;
}

TEST_P(TransportTest, EchoSmallAndLarge) {
  TransportUrl url = Listen();
  Status server_status;
  std::thread server(EchoServer, listener_.get(), &server_status);
  {
    std::unique_ptr<Channel> ch;
    ASSERT_TRUE(ConnectChannel(url, ChannelOptions(), &ch).ok());
    for (size_t size : {size_t{0}, size_t{1}, size_t{4096}, size_t{1} << 20, size_t{8} << 20}) {
      std::vector<char> out(size), in(size);
      for (size_t i = 0; i < size; ++i) out[i] = static_cast<char>(i * 7 + size);
      ASSERT_TRUE(ch->Send("hdr" + std::to_string(size), out.data(), size).ok());
      // Large payloads land straight in the buffer the placer names.
      ch->SetPayloadPlacer([&](const std::string&, size_t n) -> void* {
        return n <= in.size() ? in.data() : nullptr;
      });
      ReceivedMessage m;
      Status s = ch->Receive(10000, &m);
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(m.header, "hdr" + std::to_string(size));
      ASSERT_EQ(m.payload_size, size);
      if (size > 0) {
        EXPECT_EQ(m.payload, in.data());
        EXPECT_EQ(0, memcmp(in.data(), out.data(), size));
      }
    }
    // Once connected, shm:// must really move data through shared memory, tcp:// over sockets.
    const std::string lanes = ch->Describe();
    if (std::string(GetParam()) == "shm") {
      // The active-message lane (which also carries rendezvous data here) is shared memory.
      bool am_on_shm = false;
      size_t pos = 0;
      while ((pos = lanes.find("lane[", pos)) != std::string::npos) {
        std::string line = lanes.substr(pos, lanes.find('\n', pos) - pos);
        if (line.find(" am ") != std::string::npos || line.find(" am\n") != std::string::npos ||
            line.size() >= 3 && line.compare(line.size() - 3, 3, " am") == 0) {
          am_on_shm =
              line.find("sysv/") != std::string::npos || line.find("posix/") != std::string::npos;
        }
        ++pos;
      }
      EXPECT_TRUE(am_on_shm) << lanes;
      EXPECT_EQ(ch->bulk_piece(), 0u);  // one message of the whole moves fastest
    } else if (std::string(GetParam()) == "sock") {
      EXPECT_NE(lanes.find("kernel TCP socket"), std::string::npos) << lanes;
      EXPECT_EQ(ch->bulk_piece(), kStreamBulkPiece);
    } else if (std::string(GetParam()) == "tls") {
      EXPECT_NE(lanes.find("TLSv1.3"), std::string::npos) << lanes;
      EXPECT_EQ(ch->bulk_piece(), kStreamBulkPiece);
    } else {
      EXPECT_NE(lanes.find("tcp/"), std::string::npos) << lanes;
      EXPECT_EQ(ch->bulk_piece(), kStreamBulkPiece);
    }
  }  // client disconnects
  server.join();
  EXPECT_EQ(server_status.code(), Status::Code::kUnavailable) << server_status.ToString();
}

// Shared memory that carries a session's data can be mapped by no other local user (issue 13):
// no SysV segment this process made is open to its group or others, and every POSIX segment is
// either private to its owner or reachable only through /proc/PID/fd (which needs the right to
// ptrace the owner).
TEST_P(TransportTest, SharedMemoryIsPrivateToItsUser) {
  if (std::string(GetParam()) != "shm") GTEST_SKIP() << "shared memory only";
  TransportUrl url = Listen();
  Status server_status;
  std::thread server(EchoServer, listener_.get(), &server_status);
  {
    std::unique_ptr<Channel> ch;
    ASSERT_TRUE(ConnectChannel(url, ChannelOptions(), &ch).ok());
    std::vector<char> data(size_t{4} << 20, 'x');
    ASSERT_TRUE(ch->Send("big", data.data(), data.size()).ok());
    ReceivedMessage m;
    ASSERT_TRUE(ch->Receive(10000, &m).ok());
    // SysV: /proc/sysvipc/shm lists key shmid perms size cpid ...
    std::ifstream sysv("/proc/sysvipc/shm");
    std::string line;
    std::getline(sysv, line);  // header
    while (std::getline(sysv, line)) {
      std::istringstream fields(line);
      long long key = 0, id = 0, size = 0, cpid = 0;
      unsigned perms = 0;
      fields >> key >> id >> std::oct >> perms >> std::dec >> size >> cpid;
      if (cpid == getpid()) {
        EXPECT_EQ(perms & 077, 0u) << "SysV segment " << id << " has mode " << std::oct << perms;
      }
    }
    // POSIX: the files behind this process's descriptors in /dev/shm.
    for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
      std::error_code ec;
      const std::string target = std::filesystem::read_symlink(fd.path(), ec).string();
      if (ec || target.rfind("/dev/shm/", 0) != 0) continue;
      if (target.find("(deleted)") != std::string::npos) continue;  // only via /proc/PID/fd
      struct stat st = {};
      ASSERT_EQ(stat(target.c_str(), &st), 0);
      EXPECT_EQ(st.st_mode & 077, 0u) << target << " is open to other users";
    }
  }
  server.join();
}

TEST_P(TransportTest, ReceiveTimesOut) {
  TransportUrl url = Listen();
  Status server_status;
  std::thread server(EchoServer, listener_.get(), &server_status);
  std::unique_ptr<Channel> ch;
  ASSERT_TRUE(ConnectChannel(url, ChannelOptions(), &ch).ok());
  ReceivedMessage m;
  EXPECT_EQ(ch->Receive(50, &m).code(), Status::Code::kTimeout);
  ch.reset();
  server.join();
}

TEST_P(TransportTest, NobodyListening) {
  TransportUrl url = Listen();
  listener_.reset();  // the port is closed again
  std::unique_ptr<Channel> ch;
  Status s = ConnectChannel(url, ChannelOptions(), &ch);
  if (s.ok()) {
    s = ch->Send("hello", nullptr, 0);
    ReceivedMessage m;
    if (s.ok()) s = ch->Receive(5000, &m);
  }
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.code(), Status::Code::kTimeout) << "a refused connection must be detected";
}

// A peer that sends past the receive-queue bound is cut off: Receive fails with
// kResourceExhausted instead of queueing without limit, and the channel can still send (the
// server uses that to tell the tenant why).
TEST_P(TransportTest, FloodPastTheQueueBoundIsCutOff) {
  if (std::string(GetParam()) == "sock" || std::string(GetParam()) == "tls") {
    GTEST_SKIP() << "sock: nothing queues in this process; TCP's flow control holds the sender";
  }
  TransportUrl url = Listen();
  // Small: over TCP the sender's transport may hold posted messages back until this side reads,
  // so they can arrive a few at a time; with a bound of 8 the flood got through whole in one run
  // of five (on main before this change too), with 2 in none of 80.
  constexpr size_t kLimit = 2;
  Status server_status;
  size_t received = 0;
  std::thread server([&] {
    std::unique_ptr<PendingConnection> pending;
    server_status = listener_->WaitConnection(10000, &pending);
    if (!server_status.ok()) return;
    ChannelOptions options;
    options.max_queued_messages = kLimit;
    std::unique_ptr<Channel> ch;
    server_status = pending->Accept(options, &ch);
    if (!server_status.ok()) return;
    // Let the flood pile up before the first Receive drains the transport.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ReceivedMessage m;
    while ((server_status = ch->Receive(5000, &m)).ok()) ++received;
    ch->Send("bye", nullptr, 0);
    ReceivedMessage done;
    ch->Receive(5000, &done);  // until the client leaves
  });
  std::unique_ptr<Channel> ch;
  ASSERT_TRUE(ConnectChannel(url, ChannelOptions(), &ch).ok());
  std::vector<char> payload(100, 'x');
  for (int i = 0; i < 2000; ++i)
    ASSERT_TRUE(ch->Post("flood", payload.data(), payload.size()).ok());
  ReceivedMessage m;
  Status s = ch->Receive(10000, &m);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(m.header, "bye");
  ch.reset();
  server.join();
  EXPECT_EQ(server_status.code(), Status::Code::kResourceExhausted) << server_status.ToString();
  EXPECT_NE(server_status.message().find("queue bound"), std::string::npos);
  // Cut off before the whole flood was taken (how much got through first depends on how many
  // messages one progress call of the transport delivers).
  EXPECT_LT(received, 2000u);
}

// A message larger than the receiver allows is refused before any memory is set aside for it.
TEST_P(TransportTest, OversizedMessageIsRefused) {
  TransportUrl url = Listen();
  Status server_status;
  std::thread server([&] {
    std::unique_ptr<PendingConnection> pending;
    server_status = listener_->WaitConnection(10000, &pending);
    if (!server_status.ok()) return;
    ChannelOptions options;
    options.max_message_bytes = 100 * 1024;
    std::unique_ptr<Channel> ch;
    server_status = pending->Accept(options, &ch);
    if (!server_status.ok()) return;
    ReceivedMessage m;
    server_status = ch->Receive(10000, &m);  // the small message
    if (server_status.ok()) server_status = ch->Receive(10000, &m);
    ch->Send("bye", nullptr, 0);
    ReceivedMessage done;
    ch->Receive(5000, &done);
  });
  std::unique_ptr<Channel> ch;
  EXPECT_TRUE(ConnectChannel(url, ChannelOptions(), &ch).ok());
  std::vector<char> small(1000, 's'), large(1 << 20, 'l');
  if (ch != nullptr) {
    EXPECT_TRUE(ch->Send("small", small.data(), small.size()).ok());
    // The receiver refuses the large one from its header and may close before all of it is
    // written (over kernel sockets the rest then meets a reset): the sender may see either.
    if (ch->Post("large", large.data(), large.size()).ok()) {
      ReceivedMessage m;
      if (ch->Receive(10000, &m).ok()) EXPECT_EQ(m.header, "bye");
    }
    ch.reset();
  }
  server.join();  // before anything can end the test
  EXPECT_EQ(server_status.code(), Status::Code::kResourceExhausted) << server_status.ToString();
  EXPECT_NE(server_status.message().find("limit"), std::string::npos);
}

// A payload past defer_payload_bytes must wait for FetchPayload: a sender that makes it arrive
// whole (UCX's eager protocol, chosen by the sender) is cut off, so that it cannot make the
// receiver hold a message of any size before the receiver has seen its header; over kernel
// sockets the receiver defers it by its declared size, whatever the sender does.
TEST_P(TransportTest, AnEagerPayloadPastTheDeferralBoundIsRefused) {
  TransportUrl url = Listen();
  Status server_status;
  bool pending = false;
  std::thread server([&] {
    std::unique_ptr<PendingConnection> p;
    server_status = listener_->WaitConnection(10000, &p);
    if (!server_status.ok()) return;
    ChannelOptions options;
    options.defer_payload_bytes = size_t{1} << 20;
    std::unique_ptr<Channel> ch;
    server_status = p->Accept(options, &ch);
    if (!server_status.ok()) return;
    ReceivedMessage m;
    server_status = ch->Receive(10000, &m);
    pending = m.payload_pending;
    ch->Send("bye", nullptr, 0);
    ReceivedMessage done;
    ch->Receive(5000, &done);
  });
  ChannelOptions eager;
  eager.rendezvous_threshold = SIZE_MAX;
  std::unique_ptr<Channel> ch;
  EXPECT_TRUE(ConnectChannel(url, eager, &ch).ok());
  std::vector<char> large(size_t{2} << 20, 'e');
  if (ch != nullptr) {
    if (ch->Post("large", large.data(), large.size()).ok()) {
      ReceivedMessage m;
      ch->Receive(10000, &m);
    }
    ch.reset();
  }
  server.join();
  const std::string scheme = GetParam();
  if (scheme == "tcp" || scheme == "shm") {
    EXPECT_EQ(server_status.code(), Status::Code::kResourceExhausted) << server_status.ToString();
    EXPECT_NE(server_status.message().find("eagerly"), std::string::npos);
  } else {
    EXPECT_TRUE(server_status.ok()) << server_status.ToString();
    EXPECT_TRUE(pending);
  }
}

// With defer_payload_bytes, large payloads wait for FetchPayload: one lands in a buffer the
// receiver chose after it saw the header, one in a buffer of the channel's, and one that is never
// fetched is dropped by the next Receive while the sender's Flush still completes. Small
// messages arrive as usual.
TEST_P(TransportTest, DeferredPayloadsLandWhereTheReceiverSays) {
  TransportUrl url = Listen();
  constexpr size_t kLarge = size_t{4} << 20;
  Status server_status;
  std::vector<char> chosen(kLarge, 0);
  std::string fetched_into_pool;
  std::vector<std::string> headers;
  bool small_was_deferred = true;
  std::thread server([&] {
    std::unique_ptr<PendingConnection> pending;
    server_status = listener_->WaitConnection(10000, &pending);
    if (!server_status.ok()) return;
    ChannelOptions options;
    options.defer_payload_bytes = 1 << 20;
    std::unique_ptr<Channel> ch;
    server_status = pending->Accept(options, &ch);
    if (!server_status.ok()) return;
    for (int i = 0; i < 4 && server_status.ok(); ++i) {
      ReceivedMessage m;
      server_status = ch->Receive(10000, &m);
      if (!server_status.ok()) break;
      headers.push_back(m.header);
      if (m.header == "small") {
        small_was_deferred = m.payload_pending;
      } else if (m.header == "chosen") {
        if (!m.payload_pending || m.payload != nullptr) server_status = Internal("not deferred");
        if (server_status.ok()) server_status = ch->FetchPayload(&m, chosen.data());
        if (server_status.ok() && m.payload != chosen.data()) server_status = Internal("moved");
      } else if (m.header == "pool") {
        server_status = ch->FetchPayload(&m, nullptr);
        if (server_status.ok()) fetched_into_pool.assign(m.payload, m.payload_size);
      }  // "dropped": never fetched
    }
    if (server_status.ok()) server_status = ch->Send("done", nullptr, 0);
    ReceivedMessage bye;
    ch->Receive(5000, &bye);  // until the client leaves
  });
  std::unique_ptr<Channel> ch;
  ASSERT_TRUE(ConnectChannel(url, ChannelOptions(), &ch).ok());
  std::vector<char> a(kLarge), b(kLarge), c(kLarge), small(1000, 's');
  for (size_t i = 0; i < kLarge; ++i) {
    a[i] = static_cast<char>(i * 7);
    b[i] = static_cast<char>(i * 13 + 1);
    c[i] = static_cast<char>(i);
  }
  ASSERT_TRUE(ch->Post("small", small.data(), small.size()).ok());
  ASSERT_TRUE(ch->Post("chosen", a.data(), a.size()).ok());
  ASSERT_TRUE(ch->Post("dropped", c.data(), c.size()).ok());
  ASSERT_TRUE(ch->Post("pool", b.data(), b.size()).ok());
  Status flushed = ch->Flush();
  EXPECT_TRUE(flushed.ok()) << flushed.ToString();
  ReceivedMessage done;
  Status s = ch->Receive(10000, &done);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(done.header, "done");
  ch.reset();
  server.join();
  ASSERT_TRUE(server_status.ok()) << server_status.ToString();
  EXPECT_EQ(headers, (std::vector<std::string>{"small", "chosen", "dropped", "pool"}));
  EXPECT_FALSE(small_was_deferred);
  EXPECT_TRUE(chosen == a);
  EXPECT_TRUE(fetched_into_pool == std::string(b.begin(), b.end()));
}

// What a peer sent before it left is received before its going is seen (shm://: the end of the
// set-up socket, which may wake the receiver together with the last messages, is taken only
// after the worker has delivered what came through shared memory). Several rounds, because
// whether the end and the messages arrive in one wake-up depends on timing.
TEST_P(TransportTest, MessagesSentBeforeThePeerLeavesArrive) {
  TransportUrl url = Listen();
  constexpr int kRounds = 10, kMessages = 50;
  for (int round = 0; round < kRounds; ++round) {
    Status server_status;
    int received = 0;
    std::thread server([&] {
      std::unique_ptr<PendingConnection> pending;
      server_status = listener_->WaitConnection(10000, &pending);
      if (!server_status.ok()) return;
      ChannelOptions options;
      options.poll_us = 0;  // sleep at once: the burst and the end wake one poll
      std::unique_ptr<Channel> ch;
      server_status = pending->Accept(options, &ch);
      if (!server_status.ok()) return;
      ReceivedMessage m;
      server_status = ch->Receive(10000, &m);  // "go"
      if (server_status.ok()) server_status = ch->Send("ready", nullptr, 0);
      while (server_status.ok() && (server_status = ch->Receive(10000, &m)).ok()) ++received;
    });
    {
      std::unique_ptr<Channel> ch;
      ASSERT_TRUE(ConnectChannel(url, ChannelOptions(), &ch).ok());
      ASSERT_TRUE(ch->Send("go", nullptr, 0).ok());
      ReceivedMessage m;
      ASSERT_TRUE(ch->Receive(10000, &m).ok());
      std::vector<char> payload(100, 'p');
      for (int i = 0; i < kMessages; ++i) ASSERT_TRUE(ch->Post("m", payload.data(), 100).ok());
      ASSERT_TRUE(ch->Drain(10000).ok());
    }  // gone
    server.join();
    EXPECT_EQ(received, kMessages) << "round " << round;
    EXPECT_EQ(server_status.code(), Status::Code::kUnavailable) << server_status.ToString();
  }
}

INSTANTIATE_TEST_SUITE_P(Schemes, TransportTest, ::testing::Values("tcp", "shm", "sock", "tls"));

// A rendezvous payload keeps its receiver polling while it moves (a sleeping thread wakes too
// late for its data), but one whose sender stops half-way (a stopped or hostile peer) lets the
// receiver sleep again: the receiving thread's CPU time over a second of waiting for the
// stalled payload stays far below the second. The sender runs in a process of its own (this
// binary again, told by RGPU_TEST_STALLING_SENDER), sending 64 MiB messages until it is stopped.
TEST(UcxPayloadTest, AStalledPayloadLetsItsReceiverSleep) {
  if (const char* to = getenv("RGPU_TEST_STALLING_SENDER")) {
    TransportUrl url;
    std::unique_ptr<Channel> ch;
    if (!TransportUrl::Parse(to, &url).ok() || !ConnectChannel(url, ChannelOptions(), &ch).ok()) {
      _exit(1);
    }
    std::vector<char> big(size_t{64} << 20, 1);
    while (ch->Send("big", big.data(), big.size()).ok()) {
    }
    _exit(0);
  }
  TransportUrl url;
  ASSERT_TRUE(TransportUrl::Parse("tcp://127.0.0.1:0", &url).ok());
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(CreateListener(url, &listener).ok());
  url.port = listener->port();
  const pid_t child = fork();
  if (child == 0) {
    setenv("RGPU_TEST_STALLING_SENDER", url.ToString().c_str(), 1);
    execl("/proc/self/exe", "transport_test", "--gtest_filter=UcxPayloadTest.*",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_GT(child, 0);
  std::unique_ptr<PendingConnection> pending;
  std::unique_ptr<Channel> ch;
  ASSERT_TRUE(listener->WaitConnection(10000, &pending).ok());
  ASSERT_TRUE(pending->Accept(ChannelOptions(), &ch).ok());
  using Clock = std::chrono::steady_clock;
  ReceivedMessage m;
  int received = 0;
  for (auto until = Clock::now() + std::chrono::milliseconds(300); Clock::now() < until;) {
    ASSERT_TRUE(ch->Receive(10000, &m).ok());
    ++received;
  }
  kill(child, SIGSTOP);  // most likely in the middle of a payload: the sender sends nothing else
  auto cpu_seconds = [] {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + t.tv_nsec / 1e9;
  };
  const double cpu0 = cpu_seconds();
  const auto wall0 = Clock::now();
  for (auto until = wall0 + std::chrono::seconds(1); Clock::now() < until;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    if (ch->Receive(static_cast<int>(std::max<long>(1, left.count())), &m).ok()) ++received;
  }
  const double cpu = cpu_seconds() - cpu0;
  const double wall = std::chrono::duration<double>(Clock::now() - wall0).count();
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_GT(received, 0);
  EXPECT_LT(cpu, 0.25 * wall) << "the receiver kept polling a payload that no longer moved";
  ch.reset();
}

// shm://'s set-up goes over a kernel socket (each side's worker address, length first): a peer
// that sends an absurd length, or none at all, or goes before sending its address, is refused
// when the server accepts it; the listener goes on taking connections.
TEST(SharedMemorySetUpTest, MalformedSetUpIsRefused) {
  TransportUrl url;
  ASSERT_TRUE(TransportUrl::Parse("shm://127.0.0.1:0", &url).ok());
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(CreateListener(url, &listener).ok());
  url.port = listener->port();
  struct Case {
    std::string bytes;  // what the peer writes before it closes its socket
    Status::Code code;
  };
  const uint32_t huge = 0xffffffffu, zero = 0, some = 300;
  const std::vector<Case> cases = {
      {std::string(reinterpret_cast<const char*>(&huge), 4), Status::Code::kInvalidArgument},
      {std::string(reinterpret_cast<const char*>(&zero), 4), Status::Code::kInvalidArgument},
      {"", Status::Code::kUnavailable},  // gone before its address
      {std::string(reinterpret_cast<const char*>(&some), 4) + "short", Status::Code::kUnavailable},
  };
  for (const Case& c : cases) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in a = {};
    a.sin_family = AF_INET;
    a.sin_port = htons(url.port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    if (!c.bytes.empty()) {
      ASSERT_EQ(write(fd, c.bytes.data(), c.bytes.size()), (ssize_t)c.bytes.size());
    }
    if (c.code == Status::Code::kUnavailable) close(fd);
    std::unique_ptr<PendingConnection> pending;
    ASSERT_TRUE(listener->WaitConnection(10000, &pending).ok());
    std::unique_ptr<Channel> ch;
    Status s = pending->Accept(ChannelOptions(), &ch);
    EXPECT_EQ(s.code(), c.code) << s.ToString();
    EXPECT_EQ(ch, nullptr);
    if (c.code != Status::Code::kUnavailable) close(fd);
  }
  // Another user's connection is refused before its worker address reaches UCX, whose parser
  // trusts it (a malformed address aborts the process: this test would die without the check).
  if (geteuid() == 0) {
    // A process of user nobody that connects and writes a worker address UCX aborts on, then
    // waits for the server to close (or, with `close_at_once`, closes its socket and exits).
    auto as_nobody = [port = url.port](bool close_at_once) {
      const pid_t child = fork();
      if (child != 0) return child;
      if (setuid(65534) != 0) _exit(2);
      const int fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a = {};
      a.sin_family = AF_INET;
      a.sin_port = htons(port);
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) _exit(3);
      std::string garbage(4, '\0');
      const uint32_t length = 64;
      memcpy(garbage.data(), &length, 4);
      garbage += std::string(64, '\x05');  // no UCX address version
      if (write(fd, garbage.data(), garbage.size()) != (ssize_t)garbage.size()) _exit(4);
      char byte;
      if (!close_at_once) (void)read(fd, &byte, 1);  // until the server closes
      _exit(0);
    };
    const pid_t child = as_nobody(false);
    ASSERT_GT(child, 0);
    std::unique_ptr<PendingConnection> pending;
    ASSERT_TRUE(listener->WaitConnection(10000, &pending).ok());
    std::unique_ptr<Channel> ch;
    Status s = pending->Accept(ChannelOptions(), &ch);
    EXPECT_EQ(s.code(), Status::Code::kPermissionDenied) << s.ToString();
    EXPECT_NE(s.message().find("user 65534"), std::string::npos) << s.ToString();
    pending.reset();  // closes the socket: the child ends
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    // The same, but the other user's process writes and closes its socket before the server
    // looks: the kernel then lists the socket as root's (no process holds it), which passed the
    // same-user check of a server running as root, and UCX aborted on the address.
    const pid_t closer = as_nobody(true);
    ASSERT_GT(closer, 0);
    ASSERT_EQ(waitpid(closer, &status, 0), closer);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    ASSERT_TRUE(listener->WaitConnection(10000, &pending).ok());
    s = pending->Accept(ChannelOptions(), &ch);
    EXPECT_EQ(s.code(), Status::Code::kUnavailable) << s.ToString();
    EXPECT_EQ(ch, nullptr);
    pending.reset();
  }
  // A well-formed client still gets through.
  Status server_status;
  std::thread server(EchoServer, listener.get(), &server_status);
  {
    std::unique_ptr<Channel> ch;
    Status s = ConnectChannel(url, ChannelOptions(), &ch);
    ASSERT_TRUE(s.ok()) << s.ToString() << " / server: " << server_status.ToString();
    ASSERT_TRUE(ch->Send("hello", nullptr, 0).ok());
    ReceivedMessage m;
    ASSERT_TRUE(ch->Receive(10000, &m).ok());
    EXPECT_EQ(m.header, "hello");
  }
  server.join();
}

// A listener on every address of both families (a dual-stack socket) and a client over IPv4:
// each side finds the other's socket in the kernel's tables although they are listed in
// different ones (tcp6 with a mapped address, tcp), so the same-user check passes.
TEST(SharedMemorySetUpTest, ADualStackListenerTakesAnIpv4Client) {
  TransportUrl url;
  ASSERT_TRUE(TransportUrl::Parse("shm://[::]:0", &url).ok());
  std::unique_ptr<Listener> listener;
  if (!CreateListener(url, &listener).ok()) GTEST_SKIP() << "no IPv6 here";
  TransportUrl v4;
  ASSERT_TRUE(TransportUrl::Parse("shm://127.0.0.1:" + std::to_string(listener->port()), &v4).ok());
  Status server_status;
  std::thread server(EchoServer, listener.get(), &server_status);
  {
    std::unique_ptr<Channel> ch;
    Status s = ConnectChannel(v4, ChannelOptions(), &ch);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(ch->Send("hello", nullptr, 0).ok());
    ReceivedMessage m;
    ASSERT_TRUE(ch->Receive(10000, &m).ok());
    EXPECT_EQ(m.header, "hello");
  }
  server.join();
  EXPECT_EQ(server_status.code(), Status::Code::kUnavailable) << server_status.ToString();
}

TEST(TransportUrlTest, Parse) {
  TransportUrl u;
  ASSERT_TRUE(TransportUrl::Parse("tcp://10.0.0.1:1234", &u).ok());
  EXPECT_EQ(u.host, "10.0.0.1");
  EXPECT_EQ(u.port, 1234);
  ASSERT_TRUE(TransportUrl::Parse("shm://[::1]:5", &u).ok());
  EXPECT_EQ(u.scheme, TransportUrl::Scheme::kShm);
  EXPECT_EQ(u.host, "::1");
  EXPECT_FALSE(TransportUrl::Parse("udp://x:1", &u).ok());
  EXPECT_FALSE(TransportUrl::Parse("tcp://x", &u).ok());
  EXPECT_FALSE(TransportUrl::Parse("tcp://x:99999", &u).ok());
}

}  // namespace
}  // namespace rgpu
