// The PTX front end: lexer, parser and decoder, without running anything.
#include <gtest/gtest.h>

#include <cstring>

#include "softgpu/interpreter.h"
#include "softgpu/ptx_decoder.h"
#include "softgpu/ptx_lexer.h"
#include "softgpu/ptx_parser.h"
#include "test_util.h"

namespace softgpu {
namespace {

const char* kHeader = ".version 9.0\n.target sm_75\n.address_size 64\n";

TEST(PtxLexerTest, Tokens) {
  std::vector<ptx::Token> t;
  ASSERT_TRUE(ptx::Tokenize("ld.global.v2.f32 {%f1, %f2}, [%rd1+-8]; // c\n"
                            "mov.f32 %f3, 0f3F800000; /* x */ mov.b64 %rd2, 0x10;",
                            &t)
                  .ok());
  EXPECT_EQ(t[0].text, "ld.global.v2.f32");
  EXPECT_TRUE(t[1].Is('{'));
  EXPECT_EQ(t[2].text, "%f1");
  EXPECT_EQ(t[9].text, "+");
  EXPECT_TRUE(t[10].Is('-'));
  EXPECT_EQ(t[11].integer, 8u);
  size_t i = 0;
  while (t[i].kind != ptx::TokenKind::kFloat32) ++i;
  EXPECT_EQ(t[i].integer, 0x3F800000u);
  EXPECT_EQ(t[i].line, 2u);
  while (t[i].kind != ptx::TokenKind::kInteger) ++i;
  EXPECT_EQ(t[i].integer, 0x10u);
  EXPECT_EQ(t.back().kind, ptx::TokenKind::kEnd);
}

TEST(PtxLexerTest, RejectsStrayCharacters) {
  std::vector<ptx::Token> t;
  rgpu::Status s = ptx::Tokenize("mov.u32 %r1, 1;\n mov.u32 %r2, #;", &t);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("line 2"), std::string::npos) << s.message();
}

TEST(PtxParserTest, ScopedRegistersAndParams) {
  std::string text = std::string(kHeader) + R"(
.visible .entry k(
  .param .u8 k_param_0,
  .param .u64 k_param_1,
  .param .align 8 .b8 k_param_2[24],
  .param .f32 k_param_3
)
.maxntid 128, 1, 1
{
  .reg .b32 %r<3>;
  .reg .pred %p<2>;
  mov.u32 %r1, 1;
  {
    .reg .b32 %r1;
    mov.u32 %r1, 2;
  }
  setp.eq.s32 %p1, %r1, 1;
  @!%p1 bra $L_end;
  add.s32 %r2, %r1, %r1;
$L_end:
  ret;
}
)";
  ptx::Module m;
  ASSERT_TRUE(ptx::ParseModule(text, &m).ok());
  ASSERT_EQ(m.functions.size(), 1u);
  const ptx::Function& f = m.functions[0];
  EXPECT_TRUE(f.is_entry);
  EXPECT_EQ(f.max_threads, 128u);
  EXPECT_EQ(f.reg_types.size(), 4u);  // %r0..%r2 and the inner %r1
  EXPECT_EQ(f.insns[0].operands[0].reg, 1u);
  EXPECT_EQ(f.insns[1].operands[0].reg, 3u);  // shadowing register
  EXPECT_EQ(f.insns[2].operands[1].reg, 1u);  // outer again after the scope closes
  EXPECT_EQ(f.insns[3].guard, 1);
  EXPECT_TRUE(f.insns[3].guard_negated);
  EXPECT_EQ(f.labels.at("$L_end"), 5u);

  Program p;
  ASSERT_TRUE(Decode(m, &p).ok());
  const Function& k = p.functions[0];
  ASSERT_EQ(k.params.size(), 4u);
  const uint32_t offsets[] = {0, 8, 16, 40};
  const uint32_t sizes[] = {1, 8, 24, 4};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(k.params[i].offset, offsets[i]);
    EXPECT_EQ(k.params[i].size, sizes[i]);
  }
  EXPECT_EQ(k.param_bytes, 44u);
  EXPECT_TRUE(FindUnsupported(p, 0).empty());
}

TEST(PtxParserTest, SyntaxErrorsNameTheLine) {
  ptx::Module m;
  rgpu::Status s =
      ptx::ParseModule(std::string(kHeader) + ".entry k()\n{\n  mov.u32 %r1 1;\n}\n", &m);
  EXPECT_FALSE(s.ok());
  s = ptx::ParseModule(
      std::string(kHeader) + ".entry k()\n{\n  .reg .b32 %r<2>;\n  mov.u32 %r1, 1\n}\n", &m);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("line 8"), std::string::npos) << s.message();
}

TEST(PtxDecoderTest, UnknownLabelOrSymbolIsAnError) {
  Program p;
  EXPECT_FALSE(
      CompilePtx(std::string(kHeader) + ".entry k()\n{\n bra $nowhere;\n ret;\n}\n", &p).ok());
  EXPECT_FALSE(CompilePtx(std::string(kHeader) +
                              ".entry k()\n{\n .reg .b64 %rd<2>;\n mov.u64 %rd1, nothing;\n}\n",
                          &p)
                   .ok());
}

TEST(PtxDecoderTest, UnimplementedInstructionIsRecordedByName) {
  Program p;
  std::string text = std::string(kHeader) + R"(
.visible .entry k(.param .u64 k_param_0)
{
  .reg .b32 %r<2>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [k_param_0];
  mov.u32 %r1, 0;
  cp.async.ca.shared.global [%r1], [%rd1], 4;
  ret;
}
)";
  ASSERT_TRUE(CompilePtx(text, &p).ok());
  const std::string why = FindUnsupported(p, 0);
  EXPECT_NE(why.find("cp.async.ca.shared.global"), std::string::npos) << why;
  EXPECT_NE(why.find("line 11"), std::string::npos) << why;
}

TEST(PtxDecoderTest, GlobalsAndInitializers) {
  Program p;
  std::string text = std::string(kHeader) + R"(
.global .align 4 .u32 counts[3] = {1, 2, 3};
.const .align 4 .f32 one = 0f3F800000;
.global .align 8 .u64 ptrs[2] = {generic(counts), counts+4};
.global .align 8 .f64 half = 0.5;
.visible .entry k() { ret; }
)";
  ASSERT_TRUE(CompilePtx(text, &p).ok());
  ASSERT_EQ(p.globals.size(), 4u);
  const GlobalVariable& counts = p.globals[p.global_index.at("counts")];
  ASSERT_EQ(counts.size, 12u);
  uint32_t v[3];
  memcpy(v, counts.init.data(), 12);
  EXPECT_EQ(v[0], 1u);
  EXPECT_EQ(v[2], 3u);
  const GlobalVariable& one = p.globals[p.global_index.at("one")];
  float f;
  memcpy(&f, one.init.data(), 4);
  EXPECT_EQ(f, 1.0f);
  const GlobalVariable& ptrs = p.globals[p.global_index.at("ptrs")];
  ASSERT_EQ(ptrs.pointer_inits.size(), 2u);
  EXPECT_EQ(ptrs.pointer_inits[1].offset, 8u);
  EXPECT_EQ(ptrs.pointer_inits[1].addend, 4);
  double d;
  memcpy(&d, p.globals[p.global_index.at("half")].init.data(), 8);
  EXPECT_EQ(d, 0.5);
}

TEST(PtxDecoderTest, NvccOutputDecodesCompletely) {
  const std::string ptx = softgpu_test::KernelFile("test_kernels.ptx");
  if (ptx.empty()) GTEST_SKIP() << "test kernels were not built (no nvcc)";
  Program p;
  rgpu::Status s = CompilePtx(ptx, &p);
  ASSERT_TRUE(s.ok()) << s.message();
  int entries = 0;
  for (uint32_t i = 0; i < p.functions.size(); ++i) {
    if (!p.functions[i].is_entry) continue;
    ++entries;
    EXPECT_EQ(FindUnsupported(p, i), "") << p.functions[i].name;
  }
  EXPECT_GE(entries, 15);
}

}  // namespace
}  // namespace softgpu
