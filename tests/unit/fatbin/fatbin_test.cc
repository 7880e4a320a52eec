// Tests of common/fatbin against containers that nvcc produced at build time.
#include "common/fatbin.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "test_files.h"

namespace rgpu::fatbin {
namespace {

constexpr uint64_t kFlagLz4 = 0x2000;
constexpr uint64_t kFlagZstd = 0x8000;

const Entry* FindKind(const std::vector<Entry>& entries, EntryKind kind) {
  for (const Entry& e : entries) {
    if (e.kind == kind) return &e;
  }
  return nullptr;
}

void ExpectPtx(const Entry& e) {
  EXPECT_EQ(e.sm_arch, 75u);
  EXPECT_EQ(e.ptx_major, 9);
  EXPECT_NE(e.payload.find(".entry scale"), std::string::npos);
  EXPECT_NE(e.payload.find(".entry add_one"), std::string::npos);
  EXPECT_EQ(e.payload.find('\0'), std::string::npos) << "PTX text carries no NUL";
}

void ExpectElf(const Entry& e) {
  EXPECT_EQ(e.sm_arch, 75u);
  ASSERT_GE(e.payload.size(), 64u);
  uint32_t magic;
  memcpy(&magic, e.payload.data(), 4);
  EXPECT_EQ(magic, kElfMagic);
}

TEST(FatbinTest, DefaultModeHasSassAndZstdPtx) {
  const std::string image = ReadFile("kernel_default.fatbin");
  EXPECT_EQ(Classify(image.data()), ImageKind::kContainer);
  std::vector<Entry> entries;
  ASSERT_TRUE(ParseContainer(image.data(), image.size(), &entries).ok());
  ASSERT_EQ(entries.size(), 2u);
  const Entry* ptx = FindKind(entries, EntryKind::kPtx);
  const Entry* elf = FindKind(entries, EntryKind::kElf);
  ASSERT_NE(ptx, nullptr);
  ASSERT_NE(elf, nullptr);
  ExpectPtx(*ptx);
  ExpectElf(*elf);
  EXPECT_TRUE(ptx->flags & kFlagZstd);
  EXPECT_FALSE(elf->flags & (kFlagZstd | kFlagLz4));
}

TEST(FatbinTest, SpeedModeUsesLz4ForPtx) {
  const std::string image = ReadFile("kernel_speed.fatbin");
  std::vector<Entry> entries;
  ASSERT_TRUE(ParseContainer(image.data(), image.size(), &entries).ok());
  const Entry* ptx = FindKind(entries, EntryKind::kPtx);
  ASSERT_NE(ptx, nullptr);
  EXPECT_TRUE(ptx->flags & kFlagLz4);
  ExpectPtx(*ptx);
}

TEST(FatbinTest, SizeModeCompressesEverythingWithZstd) {
  const std::string image = ReadFile("kernel_size.fatbin");
  std::vector<Entry> entries;
  ASSERT_TRUE(ParseContainer(image.data(), image.size(), &entries).ok());
  ASSERT_EQ(entries.size(), 2u);
  for (const Entry& e : entries) EXPECT_TRUE(e.flags & kFlagZstd);
  ExpectPtx(*FindKind(entries, EntryKind::kPtx));
  ExpectElf(*FindKind(entries, EntryKind::kElf));
}

TEST(FatbinTest, NoCompressKeepsPlainPayloads) {
  const std::string image = ReadFile("kernel_none.fatbin");
  std::vector<Entry> entries;
  ASSERT_TRUE(ParseContainer(image.data(), image.size(), &entries).ok());
  ASSERT_EQ(entries.size(), 2u);
  for (const Entry& e : entries) EXPECT_FALSE(e.flags & (kFlagZstd | kFlagLz4));
  ExpectPtx(*FindKind(entries, EntryKind::kPtx));
  ExpectElf(*FindKind(entries, EntryKind::kElf));
}

TEST(FatbinTest, PtxOnlyAndSassOnly) {
  std::vector<Entry> entries;
  const std::string ptx = ReadFile("kernel_ptx.fatbin");
  ASSERT_TRUE(ParseContainer(ptx.data(), ptx.size(), &entries).ok());
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].kind, EntryKind::kPtx);
  const std::string sass = ReadFile("kernel_sass.fatbin");
  ASSERT_TRUE(ParseContainer(sass.data(), sass.size(), &entries).ok());
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].kind, EntryKind::kElf);
}

TEST(FatbinTest, TruncatedContainerIsAnError) {
  const std::string image = ReadFile("kernel_default.fatbin");
  std::vector<Entry> entries;
  for (size_t size : {size_t{0}, size_t{8}, size_t{16}, size_t{40}, size_t{100}, image.size() / 2,
                      image.size() - 1}) {
    EXPECT_FALSE(ParseContainer(image.data(), size, &entries).ok()) << "size " << size;
  }
}

TEST(FatbinTest, CorruptHeadersAndPayloadsAreErrors) {
  const std::string good = ReadFile("kernel_default.fatbin");
  std::vector<Entry> entries;
  {
    std::string bad = good;
    bad[0] ^= 1;  // magic
    EXPECT_FALSE(ParseContainer(bad.data(), bad.size(), &entries).ok());
  }
  {
    std::string bad = good;
    const uint64_t huge = ~0ull;
    memcpy(&bad[8], &huge, 8);  // fat_size
    EXPECT_FALSE(ParseContainer(bad.data(), bad.size(), &entries).ok());
  }
  {
    std::string bad = good;
    const uint64_t huge = 1ull << 40;
    memcpy(&bad[16 + 8], &huge, 8);  // first entry payload_size
    EXPECT_FALSE(ParseContainer(bad.data(), bad.size(), &entries).ok());
  }
  {
    // Garble the compressed PTX payload (second entry).
    std::string bad = good;
    uint32_t header_size;
    uint64_t payload_size;
    memcpy(&header_size, &bad[16 + 4], 4);
    memcpy(&payload_size, &bad[16 + 8], 8);
    const size_t ptx_entry = 16 + header_size + payload_size;
    uint32_t ptx_header;
    memcpy(&ptx_header, &bad[ptx_entry + 4], 4);
    for (size_t i = ptx_entry + ptx_header; i < ptx_entry + ptx_header + 32; ++i) bad[i] ^= 0x5a;
    EXPECT_FALSE(ParseContainer(bad.data(), bad.size(), &entries).ok());
  }
}

// A tiny zstd frame that does not state its content size, in an entry stating 1 GiB less a
// byte: decoded with memory that follows what the frame produces, not the stated size. Run in a
// child limited to far less address space than a gigabyte, where allocating the stated size
// fails (std::bad_alloc, the child dies).
TEST(FatbinTest, StatedSizeOfAZstdEntryIsABoundNotAnAllocation) {
  const std::string text = ".version 9.0\n.target sm_75\n.address_size 64\n";
  std::string frame(ZSTD_compressBound(text.size()), '\0');
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ASSERT_NE(cctx, nullptr);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0);
  const size_t n = ZSTD_compress2(cctx, frame.data(), frame.size(), text.data(), text.size());
  ZSTD_freeCCtx(cctx);
  ASSERT_FALSE(ZSTD_isError(n));
  frame.resize((n + 7) / 8 * 8);  // zero padding after the frame, as containers align entries
  ASSERT_EQ(ZSTD_getFrameContentSize(frame.data(), n), ZSTD_CONTENTSIZE_UNKNOWN);
  // Container header, one PTX entry header (64 bytes), the frame.
  std::string c(16 + 64, '\0');
  auto put = [&c](size_t at, auto v) { memcpy(&c[at], &v, sizeof v); };
  put(0, kContainerMagic);
  put(4, uint16_t{1});
  put(6, uint16_t{16});
  put(8, uint64_t{64 + frame.size()});
  put(16, static_cast<uint16_t>(EntryKind::kPtx));
  put(16 + 4, uint32_t{64});
  put(16 + 8, uint64_t{frame.size()});
  put(16 + 16, static_cast<uint32_t>(n));
  put(16 + 28, uint32_t{75});
  put(16 + 40, uint64_t{kFlagZstd});
  put(16 + 56, uint64_t{(1ull << 30) - 1});
  c += frame;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    struct rlimit limit;
    getrlimit(RLIMIT_AS, &limit);
    // What the process maps already plus 256 MiB.
    std::ifstream status("/proc/self/status");
    std::string line;
    uint64_t vm_kib = 0;
    while (std::getline(status, line)) {
      if (line.rfind("VmSize:", 0) == 0) vm_kib = std::stoull(line.substr(7));
    }
    limit.rlim_cur = (vm_kib << 10) + (256ull << 20);
    if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(3);
    std::vector<Entry> entries;
    const Status s = ParseContainer(c.data(), c.size(), &entries);
    _exit(s.ok() && entries.size() == 1 && entries[0].payload == text ? 0 : 2);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(FatbinTest, RandomCorruptionNeverCrashes) {
  const std::string good = ReadFile("kernel_speed.fatbin");
  std::mt19937 rng(42);
  std::vector<Entry> entries;
  for (int round = 0; round < 2000; ++round) {
    std::string bad = good;
    const int flips = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < flips; ++i)
      bad[rng() % std::min<size_t>(bad.size(), 200)] = static_cast<char>(rng());
    const size_t size = rng() % 4 == 0 ? rng() % bad.size() : bad.size();
    (void)ParseContainer(bad.data(), size, &entries);
  }
  SUCCEED();
}

TEST(FatbinTest, ClassifiesEveryImageKind) {
  const std::string container = ReadFile("kernel_none.fatbin");
  EXPECT_EQ(Classify(container.data()), ImageKind::kContainer);
  const char* ptx = "//\n.version 9.0\n.target sm_75\n.address_size 64\n";
  EXPECT_EQ(Classify(ptx), ImageKind::kPtx);
  std::vector<Entry> entries;
  ASSERT_TRUE(ParseContainer(container.data(), container.size(), &entries).ok());
  EXPECT_EQ(Classify(FindKind(entries, EntryKind::kElf)->payload.data()), ImageKind::kElf);
  struct {
    uint32_t magic, version;
    const void* data;
    void* unused;
  } wrapper{kWrapperMagic, 1, container.data(), nullptr};
  EXPECT_EQ(Classify(&wrapper), ImageKind::kWrapper);
}

// Images received from another process are checked to be self-contained: a container that parses,
// an ELF file whose tables and sections lie inside, never a wrapper.
TEST(FatbinTest, CheckImageAcceptsSelfContainedImagesOnly) {
  const std::string container = ReadFile("kernel_default.fatbin");
  ImageKind kind;
  EXPECT_TRUE(CheckImage(container.data(), container.size(), &kind).ok());
  EXPECT_EQ(kind, ImageKind::kContainer);
  EXPECT_FALSE(CheckImage(container.data(), container.size() - 1, &kind).ok());

  std::vector<Entry> entries;
  ASSERT_TRUE(ParseContainer(container.data(), container.size(), &entries).ok());
  const Entry* sass = FindKind(entries, EntryKind::kElf);
  ASSERT_NE(sass, nullptr);
  const std::string& elf = sass->payload;
  EXPECT_TRUE(CheckImage(elf.data(), elf.size(), &kind).ok());
  EXPECT_EQ(kind, ImageKind::kElf);
  // Cut short: the section header table (at the end of nvcc's cubins) lies outside.
  Status s = CheckImage(elf.data(), elf.size() - 8, &kind);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("outside"), std::string::npos) << s.ToString();
  // A section header table offset pointing far away.
  std::string far = elf;
  const uint64_t huge = ~uint64_t{0} - 16;
  memcpy(far.data() + 0x28, &huge, sizeof huge);
  EXPECT_FALSE(CheckImage(far.data(), far.size(), &kind).ok());
  EXPECT_FALSE(CheckImage(elf.data(), 40, &kind).ok()) << "shorter than an ELF header";

  // A wrapper points into its maker's memory.
  struct {
    uint32_t magic = kWrapperMagic;
    uint32_t version = 1;
    const void* data;
    const void* unused = nullptr;
  } wrapper{kWrapperMagic, 1, container.data(), nullptr};
  EXPECT_FALSE(CheckImage(&wrapper, sizeof wrapper, &kind).ok());
  EXPECT_EQ(kind, ImageKind::kWrapper);

  const char ptx[] = ".version 9.0\n";
  EXPECT_TRUE(CheckImage(ptx, sizeof ptx - 1, &kind).ok());
  EXPECT_EQ(kind, ImageKind::kPtx);
}

TEST(FatbinTest, CopyStandaloneImage) {
  const std::string container = ReadFile("kernel_default.fatbin");
  std::string out;
  ASSERT_TRUE(CopyStandaloneImage(container.data(), &out).ok());
  EXPECT_EQ(out, container);

  struct {
    uint32_t magic, version;
    const void* data;
    void* unused;
  } wrapper{kWrapperMagic, 1, container.data(), nullptr};
  ASSERT_TRUE(CopyStandaloneImage(&wrapper, &out).ok());
  EXPECT_EQ(out, container);

  const char* ptx = ".version 9.0\n.target sm_75\n";
  ASSERT_TRUE(CopyStandaloneImage(ptx, &out).ok());
  EXPECT_EQ(out.size(), strlen(ptx) + 1);
  EXPECT_EQ(out.back(), '\0');

  std::vector<Entry> entries;
  const std::string plain = ReadFile("kernel_none.fatbin");
  ASSERT_TRUE(ParseContainer(plain.data(), plain.size(), &entries).ok());
  const std::string& elf = FindKind(entries, EntryKind::kElf)->payload;
  ASSERT_TRUE(CopyStandaloneImage(elf.data(), &out).ok());
  EXPECT_GE(out.size(), 64u);
  EXPECT_LE(out.size(), elf.size());
  EXPECT_EQ(out, elf.substr(0, out.size()));

  EXPECT_FALSE(CopyStandaloneImage(nullptr, &out).ok());
}

}  // namespace
}  // namespace rgpu::fatbin
