// The PTX front end: lexer, parser and decoder, without running anything.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

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
  wgmma.fence.sync.aligned;
  ret;
}
)";
  ASSERT_TRUE(CompilePtx(text, &p).ok());
  const std::string why = FindUnsupported(p, 0);
  EXPECT_NE(why.find("wgmma.fence.sync.aligned"), std::string::npos) << why;
  EXPECT_NE(why.find("line 11"), std::string::npos) << why;
}

// A program built with -rdc=true may carry the PTX of dynamic parallelism: its calls of the
// device runtime are named as such, not as an unknown external function.
TEST(PtxDecoderTest, DeviceRuntimeCallNamesDynamicParallelism) {
  Program p;
  std::string text = std::string(kHeader) + R"(
.extern .func (.param .b64 func_retval0) cudaGetParameterBufferV2
(
  .param .b64 cudaGetParameterBufferV2_param_0,
  .param .align 4 .b8 cudaGetParameterBufferV2_param_1[12],
  .param .align 4 .b8 cudaGetParameterBufferV2_param_2[12],
  .param .b32 cudaGetParameterBufferV2_param_3
)
;
.visible .entry k(.param .u64 k_param_0)
{
  .reg .b32 %r<2>;
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [k_param_0];
  {
  .param .b64 param0;
  st.param.b64 [param0], %rd1;
  .param .align 4 .b8 param1[12];
  .param .align 4 .b8 param2[12];
  .param .b32 param3;
  st.param.b32 [param3], 0;
  .param .b64 retval0;
  call.uni (retval0), cudaGetParameterBufferV2, (param0, param1, param2, param3);
  ld.param.b64 %rd2, [retval0];
  }
  ret;
}
)";
  ASSERT_TRUE(CompilePtx(text, &p).ok());
  ASSERT_EQ(p.function_index.count("k"), 1u);
  const std::string why = FindUnsupported(p, p.function_index.at("k"));
  EXPECT_NE(why.find("cudaGetParameterBufferV2"), std::string::npos) << why;
  EXPECT_NE(why.find("dynamic parallelism"), std::string::npos) << why;
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

namespace softgpu {
namespace {

// Runs ptx/instructions.ptx (hand-written) on one warp and checks each result word.
TEST(PtxInstructionTest, HandWrittenSemantics) {
  std::ifstream in(std::string(SOFTGPU_PTX_DIR) + "/instructions.ptx");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string ptx = ss.str();
  ASSERT_FALSE(ptx.empty());
  CU_ASSERT_OK(cuInit(0));
  CUcontext ctx;
  CU_ASSERT_OK(cuCtxCreate(&ctx, nullptr, 0, 0));
  CUmodule m;
  CU_ASSERT_OK(cuModuleLoadData(&m, ptx.c_str()));
  CUfunction f;
  CU_ASSERT_OK(cuModuleGetFunction(&f, m, "ops"));
  CUdeviceptr out;
  CU_ASSERT_OK(cuMemAlloc(&out, 32 * 256));
  CU_ASSERT_OK(cuMemsetD8(out, 0, 32 * 256));
  void* args[] = {&out};
  CU_ASSERT_OK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr));
  std::vector<uint32_t> w(32 * 64);
  CU_ASSERT_OK(cuMemcpyDtoH(w.data(), out, w.size() * 4));
  auto f32 = [](uint32_t bits) {
    float v;
    memcpy(&v, &bits, 4);
    return v;
  };
  for (uint32_t l = 0; l < 32; ++l) {
    const uint32_t* r = &w[l * 64];
    SCOPED_TRACE("lane " + std::to_string(l));
    EXPECT_EQ(r[0], 496u);                         // redux.sync.add
    EXPECT_EQ(static_cast<int32_t>(r[1]), -11);    // redux.sync.min.s32
    EXPECT_EQ(r[2], 0xffffffffu);                  // redux.sync.or
    EXPECT_EQ(r[3], 0xBCu);                        // bfe.u32
    EXPECT_EQ(r[4], 0xffffffffu);                  // bfe.s32 sign-extends
    EXPECT_EQ(r[5], 0x12345A78u);                  // bfi
    EXPECT_EQ(r[6], 1u);                           // testp.notanumber NaN
    EXPECT_EQ(r[7], 0u);                           // testp.finite inf
    EXPECT_EQ(f32(r[8]), -3.0f);                   // copysign(a=-1, b=3)
    EXPECT_TRUE(std::isnan(f32(r[9])));            // min.NaN
    EXPECT_EQ(f32(r[10]), 1.0f);                   // min ignores NaN
    EXPECT_EQ(r[11], 0xFFFFFFFEu);                 // mul24.lo.s32 (-1 * 2)
    EXPECT_EQ(r[12], 20u);                         // dp4a
    EXPECT_EQ(r[13], 0x22222222u);                 // shf.r.clamp by 40
    EXPECT_EQ(r[14], 3u);                          // shf.l.wrap by 33
    EXPECT_EQ(r[15], 255u);                        // cvt.sat.u8
    EXPECT_EQ(r[16], 0xFFFFFF80u);                 // cvt.sat.s8 (sign-extended)
    EXPECT_EQ(r[17], 0x3C00u);                     // cvt.rn.f16.f32 1.0
    EXPECT_EQ(static_cast<int32_t>(r[18]), -3);    // cvt.rzi.s32.f32 -3.75
    EXPECT_EQ(f32(r[19]), -4.0f);                  // cvt.rmi.f32.f32 -3.75
    EXPECT_EQ(r[20], 0x55443322u);                 // prmt.f4e
    EXPECT_EQ(r[21], 0x00004400u);                 // prmt default with sign replication
    EXPECT_EQ(r[22], 0x11111111u << (l & 3));      // match.any
    EXPECT_EQ(r[23], 0xffffffffu);                 // match.all mask
    EXPECT_EQ(r[24], 1u);                          // match.all predicate
    EXPECT_EQ(r[25], (l & 1) ? 0u : 0x55555555u);  // activemask in divergent code
    EXPECT_EQ(r[26], 0xffffffffu);                 // set.lt.u32.s32
    EXPECT_EQ(f32(r[27]), 0.0f);                   // set.gt.f32.f32 false
    EXPECT_EQ(r[28], 9u);                          // slct with negative selector
    EXPECT_EQ(r[29], 12u);                         // sad
    EXPECT_EQ(r[30], 0xffffffffu);                 // mul.hi.s32
    EXPECT_EQ(r[31], 16u);                         // bfind.u32
    EXPECT_EQ(r[32], 15u);                         // bfind.shiftamt
    EXPECT_EQ(r[33], 0xffffffffu);                 // bfind.s32 -1: none
    EXPECT_EQ(r[34], 16u);                         // clz.b64
    EXPECT_EQ(r[35], 4u);                          // popc.b64
    EXPECT_EQ(r[36], (1u << l) - 1);               // %lanemask_lt
    EXPECT_EQ(r[37], 0u);                          // add.cc
    EXPECT_EQ(r[38], 0u);                          // addc.cc
    EXPECT_EQ(r[39], 1u);                          // addc
    EXPECT_EQ(r[40], 0xffffffffu);                 // sub.cc borrow
    EXPECT_EQ(r[41], 4u);                          // subc
    double third;
    memcpy(&third, &r[42], 8);
    EXPECT_EQ(third, 1.0 / 3.0);                 // div.rn.f64
    EXPECT_EQ(r[44], 0x3F800000u);               // add.rz
    EXPECT_EQ(r[45], 0x3F800001u);               // add.rp
    EXPECT_EQ(f32(r[46]), 1.0f);                 // add.sat.f32
    EXPECT_EQ(r[47], 0x7FFFFFFFu);               // add.sat.s32
    EXPECT_EQ(r[48], 0x42004500u);               // fma.rn.f16x2
    EXPECT_EQ(r[49], 0x40403F80u);               // cvt.rn.bf16x2.f32
    EXPECT_EQ(static_cast<int32_t>(r[50]), -1);  // rem.s32
    EXPECT_EQ(r[51], 0xffffffffu);               // div.u32 by zero
    EXPECT_EQ(static_cast<int32_t>(r[52]), -1);  // shr.s32 by 40
    EXPECT_EQ(r[53], 0u);                        // vote.uni on a divergent predicate
    EXPECT_EQ(r[54], l < 16 ? 1u : 2u);          // setp with two predicate results
    EXPECT_LT(r[55], 32u);                       // .shared::cta load after store (some lane)
    EXPECT_EQ(r[60], 0x11u);                     // cp.async copied bytes
    EXPECT_EQ(r[62], 0x33u);
    EXPECT_EQ(r[63], 0u);  // cp.async zero fill past src-size
  }
  CU_ASSERT_OK(cuCtxDestroy(ctx));
}

// WARP_SZ, PTX's predefined warp-size identifier (nvcc emits it for warpSize), is 32 wherever an
// operand may name it.
TEST(PtxInstructionTest, WarpSizeIdentifier) {
  const std::string ptx = std::string(kHeader) + R"(
.visible .entry k(.param .u64 out)
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, WARP_SZ;
  add.s32 %r2, %r1, WARP_SZ;
  rem.u32 %r3, 70, WARP_SZ;
  st.global.u32 [%rd1], %r1;
  st.global.u32 [%rd1+4], %r2;
  st.global.u32 [%rd1+8], %r3;
  ret;
}
)";
  CU_ASSERT_OK(cuInit(0));
  CUcontext ctx;
  CU_ASSERT_OK(cuCtxCreate(&ctx, nullptr, 0, 0));
  CUmodule m;
  CU_ASSERT_OK(cuModuleLoadData(&m, ptx.c_str()));
  CUfunction f;
  CU_ASSERT_OK(cuModuleGetFunction(&f, m, "k"));
  CUdeviceptr out;
  CU_ASSERT_OK(cuMemAlloc(&out, 12));
  void* args[] = {&out};
  CU_ASSERT_OK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr));
  uint32_t w[3] = {};
  CU_ASSERT_OK(cuMemcpyDtoH(w, out, sizeof w));
  EXPECT_EQ(w[0], 32u);
  EXPECT_EQ(w[1], 64u);
  EXPECT_EQ(w[2], 6u);
  CU_ASSERT_OK(cuCtxDestroy(ctx));
}

}  // namespace
}  // namespace softgpu
