// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/util/atomic_file.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/support/test_support.h"

namespace kvscope {
namespace {
namespace fs = std::filesystem;

TEST(AtomicFile, WritesNewFileAndReplacesOld) {
  test::TempDir dir;
  std::string p = dir.file("a.txt");
  ASSERT_TRUE(writeFileAtomic(p, "first").isOk());
  ASSERT_TRUE(writeFileAtomic(p, "second").isOk());
  auto text = readTextFile(p);
  ASSERT_TRUE(text.hasValue());
  EXPECT_EQ(*text, "second");
  // No temporary files are left beside it.
  int count = 0;
  for ([[maybe_unused]] auto& e : fs::directory_iterator(dir.path())) ++count;
  EXPECT_EQ(count, 1);
}

TEST(AtomicFile, FailedWriterLeavesPreviousFileIntact) {
  test::TempDir dir;
  std::string p = dir.file("a.txt");
  ASSERT_TRUE(writeFileAtomic(p, "keep me").isOk());
  Status st = writeViaTemporary(p, [](const std::string& tmp) {
    EXPECT_TRUE(writeFileAtomic(tmp, "partial").isOk());
    return Status::ioError("disk full (simulated)");
  });
  EXPECT_FALSE(st.isOk());
  EXPECT_EQ(*readTextFile(p), "keep me");
  int count = 0;
  for ([[maybe_unused]] auto& e : fs::directory_iterator(dir.path())) ++count;
  EXPECT_EQ(count, 1);
}

TEST(AtomicFile, NonRegularTargetIsWrittenDirectly) {
  EXPECT_TRUE(writeFileAtomic("/dev/null", "discarded").isOk());
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

TEST(AtomicFile, MissingFolderIsAnErrorNamingIt) {
  Status st = writeFileAtomic("/nonexistent-kvscope-dir/x.json", "{}");
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("/nonexistent-kvscope-dir"), std::string::npos);
}

TEST(ReadTextFile, MissingFileNamesIt) {
  auto r = readTextFile("/nonexistent-kvscope-file.json");
  ASSERT_FALSE(r.hasValue());
  EXPECT_NE(r.status().message().find("nonexistent-kvscope-file.json"), std::string::npos);
}

}  // namespace
}  // namespace kvscope
