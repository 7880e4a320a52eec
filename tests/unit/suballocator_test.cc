// The client's suballocator (client/suballocator.h): pieces are 512-byte aligned, lie inside
// their slab, never overlap, are found again by their start, and come back merged so that a
// slab emptied piece by piece holds one piece of its whole size again.
#include "client/suballocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace rgpu::client {
namespace {

constexpr uint64_t kSlab = Suballocator::kSlabBytes;
constexpr uint64_t kBase = 0x7000'0000'0000;

TEST(SuballocatorTest, PiecesAreAlignedDisjointAndInsideTheirSlab) {
  Suballocator s;
  EXPECT_EQ(s.Take(100), 0u) << "no slab yet";
  s.AddSlab(kBase);
  std::vector<std::pair<uint64_t, uint64_t>> pieces;
  for (uint64_t bytes : {1ull, 100ull, 512ull, 513ull, 4096ull, 65536ull, 250000ull}) {
    const uint64_t p = s.Take(bytes);
    ASSERT_NE(p, 0u) << bytes;
    EXPECT_EQ(p % Suballocator::kAlignment, 0u);
    EXPECT_GE(p, kBase);
    EXPECT_LE(p + bytes, kBase + kSlab);
    uint64_t slab = 0, size = 0;
    ASSERT_TRUE(s.Find(p, &slab, &size));
    EXPECT_EQ(slab, kBase);
    EXPECT_GE(size, bytes);
    pieces.emplace_back(p, size);
  }
  std::sort(pieces.begin(), pieces.end());
  for (size_t i = 1; i < pieces.size(); ++i) {
    EXPECT_LE(pieces[i - 1].first + pieces[i - 1].second, pieces[i].first) << "overlap";
  }
  uint64_t slab = 0, size = 0;
  const auto largest = *std::max_element(pieces.begin(), pieces.end(),
                                         [](auto a, auto b) { return a.second < b.second; });
  EXPECT_FALSE(s.Find(largest.first + 512, &slab, &size)) << "inside a piece, not its start";
  EXPECT_FALSE(s.Find(kBase + kSlab + 512, &slab, &size)) << "outside every slab";
  // Larger than a piece may be: never carved.
  EXPECT_FALSE(Suballocator::Carves(Suballocator::kLargestPiece + 1));
  EXPECT_EQ(s.Take(Suballocator::kLargestPiece + 1), 0u);
  EXPECT_EQ(s.Take(0), 0u);
}

TEST(SuballocatorTest, GivenBackPiecesMergeAndAnEmptiedSlabGoes) {
  Suballocator s;
  s.AddSlab(kBase);
  const uint64_t n = kSlab / Suballocator::kLargestPiece;
  std::vector<uint64_t> pieces;
  for (uint64_t i = 0; i < n; ++i) pieces.push_back(s.Take(Suballocator::kLargestPiece));
  for (uint64_t p : pieces) ASSERT_NE(p, 0u);
  EXPECT_EQ(s.Take(512), 0u) << "the slab is full";
  uint64_t emptied = 1;
  EXPECT_FALSE(s.Give(pieces[1] + 512, &emptied)) << "not a piece's start";
  // Give back the middle ones in an order that needs merging on both sides; the space is reused
  // as one piece.
  EXPECT_TRUE(s.Give(pieces[2], &emptied));
  EXPECT_TRUE(s.Give(pieces[4], &emptied));
  EXPECT_TRUE(s.Give(pieces[3], &emptied));
  EXPECT_EQ(emptied, 0u) << "the slab still holds pieces";
  EXPECT_FALSE(s.Give(pieces[3], &emptied)) << "given back twice";
  const uint64_t merged = s.Take(2 * Suballocator::kLargestPiece);
  EXPECT_EQ(merged, 0u) << "no piece may be larger than kLargestPiece";
  EXPECT_EQ(s.Take(Suballocator::kLargestPiece), pieces[2]) << "first fit, merged space";
  // Emptied piece by piece: the last give hands the slab back, and the slab is forgotten.
  for (uint64_t i = 0; i < n; ++i) {
    if (i == 3 || i == 4) continue;  // already given back
    ASSERT_TRUE(s.Give(pieces[i], &emptied)) << i;
    EXPECT_EQ(emptied, i + 1 == n ? kBase : 0u) << i;
  }
  EXPECT_TRUE(s.Slabs().empty());
  EXPECT_EQ(s.Take(512), 0u);
  s.AddSlab(kBase + kSlab);
  s.Clear();
  EXPECT_TRUE(s.Slabs().empty());
}

}  // namespace
}  // namespace rgpu::client
