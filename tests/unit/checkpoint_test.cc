// The checkpoint format (server/checkpoint.h) against an adversary: a restore reads a checkpoint
// no more trustingly than the server reads a tenant's calls. A well-formed checkpoint passes and
// round-trips; each malformed one (counts past the limits, ids out of range or twice, references
// to nothing, overlapping or overflowing ranges, memory that does not add up or does not fit,
// a wrong magic, version, header length or digest, a truncated or overlong stream) is refused
// naming what is wrong, before anything is made from it.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "proto/call_kinds.h"
#include "server/checkpoint.h"

namespace rgpu::server {
namespace {

// A small well-formed header: one context, a module with two variables, a kernel, a stream and
// an event (client ids), a pool, two allocations (one from the pool), a global and a graph.
wire::Checkpoint Valid() {
  wire::Checkpoint c;
  c.set_tenant("alice");
  wire::CheckpointDevice* d = c.add_devices();
  d->set_cc_major(7);
  d->set_cc_minor(5);
  wire::CheckpointContext* ctx = c.add_contexts();
  ctx->set_id(1);
  ctx->set_ordinal(0);
  ctx->set_primary(true);
  ctx->set_primary_refs(1);
  wire::CheckpointModule* m = c.add_modules();
  m->set_id(1);
  m->set_ctx(1);
  m->set_image("image");
  m->add_variable_bases(0x500000100000ull);
  m->add_variable_sizes(256);
  m->add_variable_bases(0x500000200000ull);
  m->add_variable_sizes(512);
  wire::CheckpointFunction* f = c.add_functions();
  f->set_id(1);
  f->set_module(1);
  f->set_name("kernel");
  wire::CheckpointStream* s = c.add_streams();
  s->set_id(calls::kFirstClientId + 3);
  s->set_ctx(1);
  wire::CheckpointEvent* e = c.add_events();
  e->set_id(calls::kFirstClientId + 4);
  e->set_ctx(1);
  wire::CheckpointPool* p = c.add_pools();
  p->set_id(1);
  p->set_ordinal(0);
  p->set_is_default(true);
  wire::CheckpointAllocation* a = c.add_allocations();
  a->set_ptr(0x500000000000ull);
  a->set_size(4096);
  a->set_ctx(1);
  wire::CheckpointAllocation* b = c.add_allocations();
  b->set_ptr(0x500000010000ull);
  b->set_size(1024);
  b->set_ctx(1);
  b->set_pool(1);
  wire::CheckpointGlobal* g = c.add_globals();
  g->set_ptr(0x500000200000ull + 64);
  g->set_size(8);
  g->set_ctx(1);
  g->set_module(1);
  c.add_graphs()->set_id(1);
  wire::CheckpointNextIds* next = c.mutable_next_ids();
  next->set_contexts(2);
  next->set_modules(2);
  next->set_functions(2);
  next->set_streams(1);
  next->set_events(1);
  next->set_pools(2);
  next->set_graphs(2);
  c.set_memory_bytes(4096 + 1024 + 256 + 512);
  return c;
}

CheckpointBounds Bounds() {
  CheckpointBounds b;
  b.devices = 1;
  b.memory_bytes = uint64_t{1} << 30;
  return b;
}

// The refusal's message ("" when accepted).
std::string Refusal(const wire::Checkpoint& c, const CheckpointBounds& bounds = Bounds()) {
  Status s = CheckCheckpoint(c, bounds);
  return s.ok() ? "" : s.message();
}

TEST(CheckpointCheckTest, AcceptsAWellFormedHeader) {
  EXPECT_EQ(Refusal(Valid()), "");
  const std::vector<CheckpointRange> ranges = CheckpointRanges(Valid());
  ASSERT_EQ(ranges.size(), 4u);  // the allocations, then the module's variables
  EXPECT_EQ(ranges[0].ptr, 0x500000000000ull);
  EXPECT_EQ(ranges[3].size, 512u);
}

TEST(CheckpointCheckTest, RefusesCountsPastTheLimits) {
  CheckpointBounds bounds = Bounds();
  bounds.limits.max_contexts = 1;
  wire::Checkpoint c = Valid();
  wire::CheckpointContext* extra = c.add_contexts();
  extra->set_id(2);
  c.mutable_next_ids()->set_contexts(3);
  EXPECT_NE(Refusal(c, bounds).find("limit"), std::string::npos) << Refusal(c, bounds);
  bounds = Bounds();
  bounds.limits.max_allocations = 2;  // two allocations and a global are three
  EXPECT_NE(Refusal(Valid(), bounds).find("allocations"), std::string::npos);
  bounds = Bounds();
  bounds.limits.max_graph_bytes = 4;
  c = Valid();
  c.mutable_graphs(0)->set_record(std::string(5, 'g'));
  EXPECT_NE(Refusal(c, bounds).find("graphs"), std::string::npos);
  bounds = Bounds();
  bounds.limits.max_module_bytes = 3;
  EXPECT_NE(Refusal(Valid(), bounds).find("image"), std::string::npos);
  // More devices than the server has.
  c = Valid();
  c.add_devices();
  EXPECT_NE(Refusal(c).find("devices"), std::string::npos);
  c = Valid();
  c.set_client_name(std::string(5000, 'n'));
  EXPECT_NE(Refusal(c).find("name"), std::string::npos);
}

TEST(CheckpointCheckTest, RefusesIdsOutOfRangeOrTwice) {
  wire::Checkpoint c = Valid();
  c.mutable_contexts(0)->set_id(0);
  EXPECT_NE(Refusal(c).find("out of range"), std::string::npos);
  c = Valid();
  // A context's id is the server's or the client's (a posted PrimaryCtxRetain), below 2^40.
  c.mutable_contexts(0)->set_id(calls::kClientIdLimit);
  EXPECT_NE(Refusal(c).find("out of range"), std::string::npos);
  c = Valid();
  c.mutable_contexts(0)->set_id(calls::kFirstClientId);
  EXPECT_EQ(Refusal(c).find("out of range"), std::string::npos);
  c = Valid();
  c.mutable_streams(0)->set_id(calls::kClientIdLimit);
  EXPECT_NE(Refusal(c).find("out of range"), std::string::npos);
  c = Valid();
  *c.add_events() = c.events(0);
  EXPECT_NE(Refusal(c).find("twice"), std::string::npos);
  // The next id a table hands out must be past the ids it holds.
  c = Valid();
  c.mutable_next_ids()->set_modules(1);
  EXPECT_NE(Refusal(c).find("next module"), std::string::npos);
  c = Valid();
  c.mutable_next_ids()->set_graphs(calls::kFirstClientId + 1);
  EXPECT_NE(Refusal(c).find("next graph"), std::string::npos);
}

TEST(CheckpointCheckTest, RefusesReferencesToNothing) {
  wire::Checkpoint c = Valid();
  c.mutable_functions(0)->set_module(9);
  EXPECT_NE(Refusal(c).find("function of no module"), std::string::npos);
  c = Valid();
  c.mutable_modules(0)->set_ctx(9);
  EXPECT_NE(Refusal(c).find("module of no context"), std::string::npos);
  c = Valid();
  c.mutable_allocations(0)->set_ctx(9);
  EXPECT_NE(Refusal(c).find("allocation of no context"), std::string::npos);
  c = Valid();
  c.mutable_allocations(1)->set_pool(9);
  EXPECT_NE(Refusal(c).find("no pool"), std::string::npos);
  c = Valid();
  c.mutable_contexts(0)->set_ordinal(1);
  EXPECT_NE(Refusal(c).find("device"), std::string::npos);
  c = Valid();
  c.mutable_globals(0)->set_ptr(0x500000000000ull);  // inside an allocation, not the module's
  EXPECT_NE(Refusal(c).find("global outside"), std::string::npos);
  c = Valid();
  c.mutable_functions(0)->set_name(std::string("ker\0nel", 7));
  EXPECT_NE(Refusal(c).find("name"), std::string::npos);
  c = Valid();
  c.mutable_pools(0)->set_ordinal(0);
  wire::CheckpointPool* twin = c.add_pools();
  twin->set_id(2);
  twin->set_is_default(true);
  c.mutable_next_ids()->set_pools(3);
  EXPECT_NE(Refusal(c).find("two default pools"), std::string::npos);
}

TEST(CheckpointCheckTest, RefusesMalformedOrOverlappingMemory) {
  wire::Checkpoint c = Valid();
  c.mutable_allocations(1)->set_ptr(0x500000000000ull + 2048);  // inside the first
  EXPECT_NE(Refusal(c).find("overlapping"), std::string::npos);
  c = Valid();
  c.mutable_modules(0)->set_variable_bases(0, 0x500000000000ull + 4095);
  EXPECT_NE(Refusal(c).find("overlapping"), std::string::npos);
  c = Valid();
  c.mutable_allocations(0)->set_ptr(~uint64_t{0} - 100);  // wraps around
  EXPECT_NE(Refusal(c).find("malformed"), std::string::npos);
  c = Valid();
  c.mutable_allocations(0)->set_size(0);
  EXPECT_NE(Refusal(c).find("malformed"), std::string::npos);
  c = Valid();
  c.mutable_modules(0)->add_variable_bases(0x500000300000ull);  // without its size
  EXPECT_NE(Refusal(c).find("pair"), std::string::npos);
  // Variable names (a backend without fixed-address allocation): one per range, each proper.
  c = Valid();
  c.mutable_modules(0)->add_variable_names("total");
  EXPECT_NE(Refusal(c).find("names do not pair"), std::string::npos);
  for (const std::string& bad : {std::string(), std::string("a\0b", 3), std::string(5000, 'x')}) {
    c = Valid();
    c.mutable_modules(0)->add_variable_names("total");
    c.mutable_modules(0)->add_variable_names(bad);
    EXPECT_NE(Refusal(c).find("without a proper name"), std::string::npos);
  }
  c = Valid();
  c.mutable_modules(0)->add_variable_names("total");
  c.mutable_modules(0)->add_variable_names("_ZN5space12in_namespaceE");
  EXPECT_EQ(Refusal(c), "");
  // The memory that follows must be exactly the ranges' bytes, and fit.
  c = Valid();
  c.set_memory_bytes(c.memory_bytes() - 1);
  EXPECT_NE(Refusal(c).find("header says"), std::string::npos);
  CheckpointBounds small = Bounds();
  small.memory_bytes = 4096;
  EXPECT_NE(Refusal(Valid(), small).find("more than"), std::string::npos);
}

// A whole checkpoint: `header` and `memory` through CheckpointWriter.
std::string Write(const wire::Checkpoint& header, const std::string& memory) {
  std::string out;
  CheckpointWriter writer([&](const char* d, size_t n) {
    out.append(d, n);
    return Status::Ok();
  });
  EXPECT_TRUE(writer.Begin(header).ok());
  EXPECT_TRUE(writer.Memory(memory.data(), memory.size()).ok());
  EXPECT_TRUE(writer.Finish().ok());
  return out;
}

struct ReadResult {
  Status status;
  bool header_seen = false;
  std::string memory;
};

// Reads `bytes` in pieces of `piece` bytes.
ReadResult Read(const std::string& bytes, size_t piece = 7) {
  ReadResult r;
  CheckpointReader reader(
      [&](const wire::Checkpoint& header) {
        r.header_seen = true;
        return CheckCheckpoint(header, Bounds());
      },
      [&](uint64_t offset, const char* d, size_t n) {
        EXPECT_EQ(offset, r.memory.size());
        r.memory.append(d, n);
        return Status::Ok();
      });
  for (size_t at = 0; at < bytes.size() && r.status.ok(); at += piece) {
    r.status = reader.Feed(bytes.data() + at, std::min(piece, bytes.size() - at));
  }
  if (r.status.ok()) r.status = reader.Finish();
  return r;
}

std::string Memory() {
  std::string m(Valid().memory_bytes(), '\0');
  for (size_t i = 0; i < m.size(); ++i) m[i] = static_cast<char>(i * 7);
  return m;
}

TEST(CheckpointStreamTest, RoundTripsInPiecesOfAnySize) {
  const std::string bytes = Write(Valid(), Memory());
  for (size_t piece : {size_t{1}, size_t{7}, size_t{4096}, bytes.size()}) {
    ReadResult r = Read(bytes, piece);
    EXPECT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(r.memory, Memory());
  }
}

TEST(CheckpointStreamTest, TheWriterCountsTheMemory) {
  CheckpointWriter writer([](const char*, size_t) { return Status::Ok(); });
  ASSERT_TRUE(writer.Begin(Valid()).ok());
  ASSERT_TRUE(writer.Memory("abc", 3).ok());
  EXPECT_FALSE(writer.Finish().ok());
}

TEST(CheckpointStreamTest, RefusesAWrongMagicOrVersion) {
  std::string bytes = Write(Valid(), Memory());
  bytes[0] = 'X';
  ReadResult r = Read(bytes);
  EXPECT_NE(r.status.message().find("RGPUCKPT"), std::string::npos) << r.status.message();
  EXPECT_FALSE(r.header_seen);
  bytes = Write(Valid(), Memory());
  bytes[8] = 2;
  r = Read(bytes);
  EXPECT_NE(r.status.message().find("version"), std::string::npos);
}

TEST(CheckpointStreamTest, BoundsTheHeaderBeforeReadingIt) {
  std::string bytes = Write(Valid(), Memory());
  const uint64_t huge = uint64_t{1} << 40;  // never allocated: refused at the preamble
  memcpy(bytes.data() + 16, &huge, 8);
  ReadResult r = Read(bytes);
  EXPECT_NE(r.status.message().find("header of"), std::string::npos) << r.status.message();
  const uint64_t zero = 0;
  memcpy(bytes.data() + 16, &zero, 8);
  EXPECT_FALSE(Read(bytes).status.ok());
}

TEST(CheckpointStreamTest, RefusesAHeaderThatFailsItsChecks) {
  wire::Checkpoint bad = Valid();
  bad.mutable_allocations(0)->set_ctx(9);
  ReadResult r = Read(Write(bad, Memory()));
  EXPECT_TRUE(r.header_seen);
  EXPECT_NE(r.status.message().find("no context"), std::string::npos);
  EXPECT_TRUE(r.memory.empty());  // nothing past the header was taken
}

TEST(CheckpointStreamTest, RefusesAlteredTruncatedOrOverlongStreams) {
  const std::string bytes = Write(Valid(), Memory());
  std::string altered = bytes;
  altered[bytes.size() - 40] ^= 1;  // a byte of the memory
  EXPECT_NE(Read(altered).status.message().find("digest"), std::string::npos);
  altered = bytes;
  altered[bytes.size() - 1] ^= 1;  // the digest itself
  EXPECT_NE(Read(altered).status.message().find("digest"), std::string::npos);
  EXPECT_NE(Read(bytes.substr(0, bytes.size() - 1)).status.message().find("truncated"),
            std::string::npos);
  EXPECT_NE(Read(bytes.substr(0, 20)).status.message().find("truncated"), std::string::npos);
  EXPECT_NE(Read(bytes + "x").status.message().find("past its end"), std::string::npos);
  // A header that does not parse.
  std::string garbled = bytes;
  for (size_t i = 24; i < 40; ++i) garbled[i] = '\xff';
  EXPECT_FALSE(Read(garbled).status.ok());
}

}  // namespace
}  // namespace rgpu::server
