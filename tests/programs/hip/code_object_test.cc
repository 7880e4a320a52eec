// The HIP backend's reading of real hipcc output: the offload bundle of module_kernels.cpp
// (hipcc --genco), each code object's target and each kernel's explicit arguments; and refusal of
// damaged metadata without reading outside the image.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "interpose/hip/offload_bundle.h"
#include "server/backends/hip/code_object.h"
#include "server/backends/hip/msgpack.h"

namespace {

using rgpu::hipbackend::CodeObjectInfo;
using rgpu::hipbackend::KernelInfo;

std::string ReadFile(const char* path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<rgpu::hip::CodeObject> Objects(const std::string& bundle) {
  std::vector<rgpu::hip::CodeObject> objects;
  std::string error;
  EXPECT_TRUE(rgpu::hip::ParseOffloadBundle(bundle.data(), bundle.size(), &objects, &error))
      << error;
  return objects;
}

TEST(HipCodeObject, BundleOfGencoHasOneCodeObjectPerArchitecture) {
  const std::string bundle = ReadFile(RGPU_HIP_CODE_OBJECT);
  ASSERT_FALSE(bundle.empty());
  std::vector<rgpu::hip::CodeObject> objects = Objects(bundle);
  ASSERT_EQ(objects.size(), static_cast<size_t>(RGPU_HIP_ARCH_COUNT));
  for (const auto& c : objects) {
    EXPECT_TRUE(rgpu::hip::IsAmdgpuCodeObject(c.data));
    EXPECT_EQ(c.target.rfind("gfx", 0), 0u) << c.target;
  }
}

TEST(HipCodeObject, KernelArgumentsComeFromTheMetadata) {
  const std::string bundle = ReadFile(RGPU_HIP_CODE_OBJECT);
  for (const auto& c : Objects(bundle)) {
    CodeObjectInfo info;
    std::string error;
    ASSERT_TRUE(rgpu::hipbackend::ParseCodeObject(c.data, c.size, &info, &error)) << error;
    EXPECT_EQ(info.Processor(), c.target.substr(0, c.target.find(':')));
    // fill(float* out, float value, int n)
    const KernelInfo* fill = info.Find("fill");
    ASSERT_NE(fill, nullptr);
    ASSERT_EQ(fill->arguments.size(), 3u);
    EXPECT_EQ(fill->arguments[0].offset, 0u);
    EXPECT_EQ(fill->arguments[0].size, 8u);
    EXPECT_EQ(fill->arguments[1].offset, 8u);
    EXPECT_EQ(fill->arguments[1].size, 4u);
    EXPECT_EQ(fill->arguments[2].offset, 12u);
    EXPECT_EQ(fill->arguments[2].size, 4u);
    EXPECT_GE(fill->kernarg_size, 16u);  // hidden arguments follow
    // axpy(float a, const float* x, float* y, int n)
    const KernelInfo* axpy = info.Find("axpy");
    ASSERT_NE(axpy, nullptr);
    ASSERT_EQ(axpy->arguments.size(), 4u);
    const uint32_t offsets[] = {0, 8, 16, 24}, sizes[] = {4, 8, 8, 4};
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(axpy->arguments[i].offset, offsets[i]);
      EXPECT_EQ(axpy->arguments[i].size, sizes[i]);
    }
    EXPECT_EQ(info.Find("no_such_kernel"), nullptr);
  }
}

TEST(HipCodeObject, DamagedImagesAreRefused) {
  const std::string bundle = ReadFile(RGPU_HIP_CODE_OBJECT);
  const auto objects = Objects(bundle);
  ASSERT_FALSE(objects.empty());
  const std::string elf(reinterpret_cast<const char*>(objects[0].data), objects[0].size);
  CodeObjectInfo info;
  std::string error;
  // Truncations at every 97th byte: refused or parsed, never read past the copy.
  for (size_t cut = 0; cut < elf.size(); cut += 97) {
    std::vector<uint8_t> copy(elf.begin(), elf.begin() + cut);
    if (rgpu::hipbackend::ParseCodeObject(copy.data(), copy.size(), &info, &error)) continue;
    EXPECT_FALSE(error.empty());
  }
  // Flipped bytes everywhere: the parser survives them all.
  for (size_t at = 0; at < elf.size(); at += 13) {
    std::string copy = elf;
    copy[at] = static_cast<char>(copy[at] ^ 0xa5);
    rgpu::hipbackend::ParseCodeObject(reinterpret_cast<const uint8_t*>(copy.data()), copy.size(),
                                      &info, &error);
  }
  // Not an AMDGPU ELF at all.
  const uint8_t ptx[] = ".version 8.0\n.target sm_75\n.address_size 64\n...............";
  EXPECT_FALSE(rgpu::hipbackend::ParseCodeObject(ptx, sizeof ptx, &info, &error));
  EXPECT_NE(error.find("not an AMDGPU"), std::string::npos);
  // A bundle whose entry count is a lie.
  std::string lie = bundle;
  lie[24] = '\xff';
  lie[25] = '\xff';
  std::vector<rgpu::hip::CodeObject> none;
  EXPECT_FALSE(rgpu::hip::ParseOffloadBundle(lie.data(), lie.size(), &none, &error));
}

TEST(HipMsgPack, ReadsMapsArraysStringsAndIntegers) {
  // {"a": [1, -2, 300], "b": "xy", "c": true}
  const uint8_t data[] = {0x83, 0xa1, 'a',  0x93, 0x01, 0xfe, 0xcd, 0x01, 0x2c,
                          0xa1, 'b',  0xa2, 'x',  'y',  0xa1, 'c',  0xc3};
  rgpu::hipbackend::MsgValue v;
  std::string error;
  ASSERT_TRUE(rgpu::hipbackend::ParseMsgPack(data, sizeof data, &v, &error)) << error;
  const auto* a = v.Find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->items.size(), 3u);
  EXPECT_EQ(a->items[0].integer, 1);
  EXPECT_EQ(a->items[1].integer, -2);
  EXPECT_EQ(a->items[2].integer, 300);
  EXPECT_EQ(v.Find("b")->text, "xy");
  EXPECT_TRUE(v.Find("c")->boolean);
  for (size_t cut = 0; cut < sizeof data; ++cut) {
    EXPECT_FALSE(rgpu::hipbackend::ParseMsgPack(data, cut, &v, &error)) << cut;
  }
  // A 32-bit array length far beyond the data.
  const uint8_t huge[] = {0xdd, 0x7f, 0xff, 0xff, 0xff, 0x01};
  EXPECT_FALSE(rgpu::hipbackend::ParseMsgPack(huge, sizeof huge, &v, &error));
}

}  // namespace
