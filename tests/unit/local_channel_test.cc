// The in-process transport (transport/local): what the Channel contract promises, between two
// threads of this process.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "transport/channel.h"

namespace rgpu {
namespace {

TransportUrl LocalUrl(const std::string& name) {
  TransportUrl url;
  EXPECT_TRUE(TransportUrl::Parse("local://" + name, &url).ok());
  return url;
}

// A listener under `name` with one connection from a client, accepted with `server_options`.
struct Pair {
  std::unique_ptr<Listener> listener;
  std::unique_ptr<Channel> client;
  std::unique_ptr<Channel> server;
};

Pair Connect(const std::string& name, ChannelOptions server_options = {}) {
  Pair p;
  EXPECT_TRUE(CreateListener(LocalUrl(name), &p.listener).ok());
  EXPECT_TRUE(ConnectChannel(LocalUrl(name), ChannelOptions(), &p.client).ok());
  std::unique_ptr<PendingConnection> pending;
  EXPECT_TRUE(p.listener->WaitConnection(1000, &pending).ok());
  EXPECT_TRUE(pending->Accept(server_options, &p.server).ok());
  return p;
}

TEST(LocalChannelTest, UrlParsesAndPrints) {
  TransportUrl u;
  ASSERT_TRUE(TransportUrl::Parse("local://rgpu", &u).ok());
  EXPECT_EQ(u.scheme, TransportUrl::Scheme::kLocal);
  EXPECT_EQ(u.host, "rgpu");
  EXPECT_EQ(u.ToString(), "local://rgpu");
  EXPECT_FALSE(TransportUrl::Parse("local://", &u).ok());
  EXPECT_FALSE(TransportUrl::Parse("local://a/b", &u).ok());
}

// A receiver watches for news for poll_us, then sleeps: a message that comes while it spins,
// one that comes after it fell asleep (the sender must wake it), with and without the spin, and
// a timeout that ends a wait spent partly spinning.
TEST(LocalChannelTest, AReceiverThatSpinsOrSleepsGetsEveryMessage) {
  for (int poll_us : {0, 200, 100000}) {
    ChannelOptions server_options;
    server_options.poll_us = poll_us;
    Pair p = Connect("spin" + std::to_string(poll_us), server_options);
    for (int delay_ms : {0, 1, 30}) {
      std::thread sender([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
        EXPECT_TRUE(p.client->Send("late", nullptr, 0).ok());
      });
      ReceivedMessage m;
      Status s = p.server->Receive(5000, &m);
      sender.join();
      ASSERT_TRUE(s.ok()) << s.ToString() << " poll_us " << poll_us << " delay " << delay_ms;
      EXPECT_EQ(m.header, "late");
    }
    ReceivedMessage m;
    EXPECT_EQ(p.server->Receive(20, &m).code(), Status::Code::kTimeout) << poll_us;
  }
}

TEST(LocalChannelTest, MessagesArriveInOrderWithTheirPayloadsCopied) {
  Pair p = Connect("order");
  std::vector<char> big(1 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  ASSERT_TRUE(p.client->Send("one", nullptr, 0).ok());
  ASSERT_TRUE(p.client->Post("two", big.data(), big.size()).ok());
  std::vector<char> sent = big;
  std::memset(big.data(), 0, big.size());  // Post copied it: reusable at once
  ASSERT_TRUE(p.client->Send("three", "abc", 3).ok());
  ASSERT_TRUE(p.client->Flush().ok());
  ReceivedMessage m;
  ASSERT_TRUE(p.server->Receive(1000, &m).ok());
  EXPECT_EQ(m.header, "one");
  EXPECT_EQ(m.payload_size, 0u);
  ASSERT_TRUE(p.server->Receive(1000, &m).ok());
  EXPECT_EQ(m.header, "two");
  ASSERT_EQ(m.payload_size, sent.size());
  EXPECT_EQ(std::memcmp(m.payload, sent.data(), sent.size()), 0);
  ASSERT_TRUE(p.server->Receive(1000, &m).ok());
  EXPECT_EQ(m.header, "three");
  EXPECT_EQ(std::string(m.payload, m.payload_size), "abc");
  EXPECT_EQ(p.server->Receive(10, &m).code(), Status::Code::kTimeout);
  // And the other way.
  ASSERT_TRUE(p.server->Send("reply", "xy", 2).ok());
  ASSERT_TRUE(p.client->Receive(1000, &m).ok());
  EXPECT_EQ(m.header, "reply");
  EXPECT_EQ(std::string(m.payload, m.payload_size), "xy");
}

TEST(LocalChannelTest, PayloadPlacerChoosesWhereThePayloadLands) {
  Pair p = Connect("placer");
  char landing[16] = {};
  p.client->SetPayloadPlacer([&](const std::string& header, size_t size) -> void* {
    return header == "here" && size <= sizeof landing ? landing : nullptr;
  });
  ASSERT_TRUE(p.server->Send("here", "hello", 5).ok());
  ASSERT_TRUE(p.server->Send("elsewhere", "world", 5).ok());
  ReceivedMessage m;
  ASSERT_TRUE(p.client->Receive(1000, &m).ok());
  EXPECT_EQ(m.payload, landing);
  EXPECT_EQ(std::string(landing, 5), "hello");
  ASSERT_TRUE(p.client->Receive(1000, &m).ok());
  EXPECT_NE(m.payload, landing);
  EXPECT_EQ(std::string(m.payload, m.payload_size), "world");
}

TEST(LocalChannelTest, DeferredPayloadsAreFetchedWhereTheReceiverSaysOrDropped) {
  ChannelOptions server_options;
  server_options.defer_payload_bytes = 1000;
  Pair p = Connect("defer", server_options);
  std::vector<char> a(4000, 'a'), b(4000, 'b');
  ASSERT_TRUE(p.client->Send("small", "s", 1).ok());
  ASSERT_TRUE(p.client->Send("a", a.data(), a.size()).ok());
  ASSERT_TRUE(p.client->Send("b", b.data(), b.size()).ok());
  ReceivedMessage m;
  ASSERT_TRUE(p.server->Receive(1000, &m).ok());
  EXPECT_FALSE(m.payload_pending);  // below the threshold
  ASSERT_TRUE(p.server->Receive(1000, &m).ok());
  ASSERT_TRUE(m.payload_pending);
  EXPECT_EQ(m.payload, nullptr);
  std::vector<char> destination(4000);
  ASSERT_TRUE(p.server->FetchPayload(&m, destination.data()).ok());
  EXPECT_FALSE(m.payload_pending);
  EXPECT_EQ(m.payload, destination.data());
  EXPECT_EQ(destination, a);
  ASSERT_TRUE(p.server->Receive(1000, &m).ok());
  ASSERT_TRUE(m.payload_pending);
  // Not fetched: the next Receive drops it, and the channel goes on.
  ASSERT_TRUE(p.client->Send("c", "c", 1).ok());
  ASSERT_TRUE(p.server->Receive(1000, &m).ok());
  EXPECT_EQ(m.header, "c");
  ReceivedMessage stale;
  stale.payload_pending = true;
  EXPECT_FALSE(p.server->FetchPayload(&stale, destination.data()).ok());
}

TEST(LocalChannelTest, APeerThatGoesIsSeenAfterWhatItSentBefore) {
  Pair p = Connect("gone");
  ASSERT_TRUE(p.client->Send("last words", "x", 1).ok());
  p.client.reset();
  ReceivedMessage m;
  ASSERT_TRUE(p.server->Receive(1000, &m).ok());
  EXPECT_EQ(m.header, "last words");
  EXPECT_EQ(p.server->Receive(1000, &m).code(), Status::Code::kUnavailable);
  EXPECT_TRUE(p.server->broken());
  EXPECT_EQ(p.server->Send("anyone?", nullptr, 0).code(), Status::Code::kUnavailable);
}

TEST(LocalChannelTest, AbandonEndsAWaitInProgressFromAnotherThread) {
  Pair p = Connect("abandon");
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    p.client->Abandon("watchdog");
  });
  ReceivedMessage m;
  Status s = p.client->Receive(-1, &m);
  t.join();
  EXPECT_EQ(s.code(), Status::Code::kUnavailable);
  EXPECT_NE(s.message().find("watchdog"), std::string::npos);
  EXPECT_TRUE(p.client->broken());
  // The server sees its client gone.
  EXPECT_EQ(p.server->Receive(1000, &m).code(), Status::Code::kUnavailable);
}

TEST(LocalChannelTest, NobodyListeningAndNamesTaken) {
  std::unique_ptr<Channel> c;
  EXPECT_EQ(ConnectChannel(LocalUrl("nobody"), ChannelOptions(), &c).code(),
            Status::Code::kUnavailable);
  std::unique_ptr<Listener> first, second;
  ASSERT_TRUE(CreateListener(LocalUrl("taken"), &first).ok());
  EXPECT_FALSE(CreateListener(LocalUrl("taken"), &second).ok());
  first.reset();  // the name is free again
  EXPECT_TRUE(CreateListener(LocalUrl("taken"), &second).ok());
}

TEST(LocalChannelTest, AListenerThatClosesEndsTheConnectionsItDidNotAccept) {
  std::unique_ptr<Listener> listener;
  ASSERT_TRUE(CreateListener(LocalUrl("closing"), &listener).ok());
  std::unique_ptr<Channel> c;
  ASSERT_TRUE(ConnectChannel(LocalUrl("closing"), ChannelOptions(), &c).ok());
  ASSERT_TRUE(c->Send("hello", nullptr, 0).ok());  // queues until accepted
  listener.reset();
  ReceivedMessage m;
  EXPECT_EQ(c->Receive(1000, &m).code(), Status::Code::kUnavailable);
}

TEST(LocalChannelTest, ASenderPastTheReceiversBoundsIsCutOff) {
  ChannelOptions bounds;
  bounds.max_queued_messages = 3;
  Pair p = Connect("flood", bounds);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(p.client->Send("m", "x", 1).ok());
  ReceivedMessage m;
  Status s = Status::Ok();
  int received = 0;
  while ((s = p.server->Receive(100, &m)).ok()) ++received;
  EXPECT_LE(received, 3);
  EXPECT_EQ(s.code(), Status::Code::kResourceExhausted);

  ChannelOptions one_size;
  one_size.max_message_bytes = 100;
  Pair q = Connect("too-large", one_size);
  std::vector<char> big(1000);
  ASSERT_TRUE(q.client->Send("big", big.data(), big.size()).ok());
  EXPECT_EQ(q.server->Receive(100, &m).code(), Status::Code::kResourceExhausted);
}

TEST(LocalChannelTest, TwoEndsSendingLargePayloadsAtOnceDoNotWaitOnEachOther) {
  Pair p = Connect("both");
  std::vector<char> big(8 << 20, 'z');
  std::thread t([&] {
    for (int i = 0; i < 8; ++i) ASSERT_TRUE(p.server->Send("s", big.data(), big.size()).ok());
  });
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(p.client->Send("c", big.data(), big.size()).ok());
  t.join();
  ReceivedMessage m;
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(p.client->Receive(1000, &m).ok());
    ASSERT_TRUE(p.server->Receive(1000, &m).ok());
    EXPECT_EQ(m.payload[m.payload_size - 1], 'z');
  }
}

}  // namespace
}  // namespace rgpu
