// The images nvcc produced at build time for the fatbin tests (FATBIN_DIR).
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace rgpu::fatbin {

// The bytes of FATBIN_DIR/`name`; a test failure when it cannot be read.
inline std::string ReadFile(const std::string& name) {
  std::ifstream in(std::string(FATBIN_DIR) + "/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace rgpu::fatbin
