// cuGetProcAddress revision selection, checked against the 440 requests NVIDIA's cudart 13 makes
// at start-up (../shared/notes/cudart13-proc-requests.txt): each must select exactly the ABI
// revision (PFN_<name>_v<version>[_ptds|_ptsz]) that cudart expects.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <string>

#include "client/abi/proc_select.h"

namespace rgpu::abi {
namespace {

TEST(ProcSelectTest, KnownRevisions) {
  size_t i = 0, count = 0;
  const ProcRevision* rows = ProcRevisions(&count);
  ASSERT_GT(count, 400u);
  ASSERT_EQ(SelectRevision("cuMemAlloc", 13000, false, &i), ProcLookup::kFound);
  EXPECT_STREQ(rows[i].symbol, "cuMemAlloc_v2");
  ASSERT_EQ(SelectRevision("cuCtxSynchronize", 12000, false, &i), ProcLookup::kFound);
  EXPECT_STREQ(rows[i].symbol, "cuCtxSynchronize");
  ASSERT_EQ(SelectRevision("cuCtxSynchronize", 13000, false, &i), ProcLookup::kFound);
  EXPECT_STREQ(rows[i].symbol, "cuCtxSynchronize_v2");
  ASSERT_EQ(SelectRevision("cuMemcpyHtoD", 13000, true, &i), ProcLookup::kFound);
  EXPECT_STREQ(rows[i].symbol, "cuMemcpyHtoD_v2_ptds");
  EXPECT_EQ(SelectRevision("", 13000, false, &i), ProcLookup::kNotFound);
  EXPECT_EQ(SelectRevision("cuNoSuchThing", 13000, false, &i), ProcLookup::kNotFound);
  EXPECT_EQ(SelectRevision("cuMemAllocAsync", 9000, false, &i), ProcLookup::kVersionTooLow);
}

TEST(ProcSelectTest, CudartStartupRequests) {
  std::ifstream in(RGPU_SHARED_NOTES "/cudart13-proc-requests.txt");
  if (!in) GTEST_SKIP() << "shared notes not available";
  const std::regex line_re(
      R"(^(\w+) cudaVersion=(\d+) flags=(\d+) -> PFN_(\w+?)_v(\d+)(_ptds|_ptsz)?\s*$)");
  std::string line;
  int checked = 0;
  size_t count = 0;
  const ProcRevision* rows = ProcRevisions(&count);
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, line_re)) continue;
    const std::string name = m[1];
    const int version = std::stoi(m[2]);
    const bool per_thread = (std::stoi(m[3]) & 2) != 0;
    size_t i = 0;
    ASSERT_EQ(SelectRevision(name.c_str(), version, per_thread, &i), ProcLookup::kFound) << line;
    EXPECT_EQ(rows[i].version, std::stoi(m[5])) << line << " selected " << rows[i].symbol;
    EXPECT_EQ(rows[i].per_thread, m[6].matched) << line << " selected " << rows[i].symbol;
    ++checked;
  }
  EXPECT_GE(checked, 400);
}

}  // namespace
}  // namespace rgpu::abi
