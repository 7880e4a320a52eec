// CheckpointRelay (server/checkpoint_relay.h): a session host's checkpoint pieces reach the
// operator's connection only while the checkpoint is asked and unanswered, and nothing after its
// last piece.
#include "server/checkpoint_relay.h"

#include <gtest/gtest.h>

#include "transport/channel.h"

namespace rgpu::server {
namespace {

struct Pair {
  std::unique_ptr<Listener> listener;
  std::unique_ptr<Channel> operator_side;  // rgpu checkpoint
  std::unique_ptr<Channel> server_side;    // the server's end of the operator's connection
};

Pair Connect(const std::string& name) {
  TransportUrl url;
  EXPECT_TRUE(TransportUrl::Parse("local://" + name, &url).ok());
  Pair p;
  EXPECT_TRUE(CreateListener(url, &p.listener).ok());
  EXPECT_TRUE(ConnectChannel(url, ChannelOptions(), &p.operator_side).ok());
  std::unique_ptr<PendingConnection> pending;
  EXPECT_TRUE(p.listener->WaitConnection(1000, &pending).ok());
  EXPECT_TRUE(pending->Accept(ChannelOptions(), &p.server_side).ok());
  return p;
}

wire::HostCheckpointChunk Piece(const std::string& data, bool last) {
  wire::HostCheckpointChunk piece;
  piece.set_data(data);
  piece.set_last(last);
  return piece;
}

// The next message the operator's side gets within 200 ms: its payload, and whether it was the
// last piece; false when none came.
bool Received(Channel& ch, std::string* payload, bool* last) {
  ReceivedMessage m;
  if (!ch.Receive(200, &m).ok()) return false;
  wire::Envelope e;
  EXPECT_TRUE(e.ParseFromArray(m.header.data(), static_cast<int>(m.header.size())));
  EXPECT_EQ(e.body_case(), wire::Envelope::kCheckpointChunk);
  EXPECT_TRUE(ch.FetchPayload(&m, nullptr).ok());
  payload->assign(m.payload, m.payload_size);
  *last = e.checkpoint_chunk().last();
  return true;
}

TEST(CheckpointRelayTest, PiecesGoOnOnlyWhileTheCheckpointIsAsked) {
  Pair p = Connect("relay-asked");
  CheckpointRelay relay;
  std::string payload;
  bool last = false;
  relay.Piece(Piece("unasked", false));  // before Start: nowhere
  EXPECT_FALSE(Received(*p.operator_side, &payload, &last)) << "an unasked piece was relayed";
  relay.Start(p.server_side.get());
  relay.Piece(Piece("first", false));
  ASSERT_TRUE(Received(*p.operator_side, &payload, &last));
  EXPECT_EQ(payload, "first");
  EXPECT_FALSE(last);
  relay.Piece(Piece("end", true));
  ASSERT_TRUE(Received(*p.operator_side, &payload, &last));
  EXPECT_EQ(payload, "end");
  EXPECT_TRUE(last);
  relay.Piece(Piece("after the last", false));
  EXPECT_FALSE(Received(*p.operator_side, &payload, &last)) << "a piece after the last went on";
}

TEST(CheckpointRelayTest, NothingGoesOnAfterTheCheckpointWasAnswered) {
  Pair p = Connect("relay-answered");
  CheckpointRelay relay;
  relay.Start(p.server_side.get());
  relay.Stop();
  relay.Piece(Piece("late", false));
  std::string payload;
  bool last = false;
  EXPECT_FALSE(Received(*p.operator_side, &payload, &last)) << "a piece after the answer went on";
}

}  // namespace
}  // namespace rgpu::server
