// SPDX-License-Identifier: GPL-3.0-or-later
// Issue 33: `record MODEL --tokenizer FIFO` blocked forever in the tokenizer's open. The loader
// refuses what is not a regular file (core/util/input_file.h) before opening it.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "core/model/checkpoint.h"
#include "tests/support/test_support.h"

namespace kvscope {
namespace {

TEST(Tokenizer, AFifoOrADeviceIsRefusedWithoutBlocking) {
  test::TempDir dir;
  const std::string fifo = dir.file("tokenizer.bin");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, std::string("/dev/zero")}) {
    auto t = loadTokenizer(path, 512);
    ASSERT_FALSE(t) << path;
    EXPECT_NE(t.status().message().find(path + ": is a "), std::string::npos) << t.status().message();
    EXPECT_NE(t.status().message().find("not a regular file"), std::string::npos) << t.status().message();
  }
}

}  // namespace
}  // namespace kvscope
