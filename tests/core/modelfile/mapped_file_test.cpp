// SPDX-License-Identifier: GPL-3.0-or-later
// MappedFile: regular files map, everything else is refused before a read could block.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>

#include "core/modelfile/gguf.h"
#include "core/modelfile/mapped_file.h"
#include "core/modelfile/model_format.h"
#include "core/modelfile/safetensors.h"
#include "tests/support/test_support.h"

namespace kvscope {
namespace {

TEST(MappedFile, MapsARegularFile) {
  test::TempDir dir;
  const std::string path = dir.file("a.bin");
  std::ofstream(path, std::ios::binary) << "hello";
  auto f = MappedFile::open(path);
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_EQ((*f)->size(), 5u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*f)->bytes().data()), 5), "hello");
  EXPECT_EQ((*f)->path(), path);
}

TEST(MappedFile, AnEmptyFileIsAnEmptySpan) {
  test::TempDir dir;
  const std::string path = dir.file("empty");
  std::ofstream(path, std::ios::binary).flush();
  auto f = MappedFile::open(path);
  ASSERT_TRUE(f) << f.status().message();
  EXPECT_TRUE((*f)->bytes().empty());
}

TEST(MappedFile, MissingFileNamesThePath) {
  auto f = MappedFile::open("/nonexistent/model.gguf");
  ASSERT_FALSE(f);
  EXPECT_EQ(f.status().code(), StatusCode::IoError);
  EXPECT_NE(f.status().message().find("/nonexistent/model.gguf: cannot open"), std::string::npos) << f.status().message();
}

TEST(MappedFile, FolderAndDeviceAreRefused) {
  test::TempDir dir;
  auto folder = MappedFile::open(dir.path().string());
  ASSERT_FALSE(folder);
  EXPECT_NE(folder.status().message().find("not a regular file (a folder)"), std::string::npos) << folder.status().message();
  auto device = MappedFile::open("/dev/null");
  ASSERT_FALSE(device);
  EXPECT_NE(device.status().message().find("/dev/null: not a regular file (a character device)"), std::string::npos)
      << device.status().message();
}

/// Runs `open` on a FIFO with no writer. It must return (refused) promptly; if it blocks, a
/// writer is attached so that the test ends, and the test fails.
template <typename Open>
void expectFifoRefused(Open open, const char* what) {
  test::TempDir dir;
  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto result = std::async(std::launch::async, [&] { return open(fifo); });
  if (result.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    const int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);  // unblocks the reader
    result.wait();
    if (w >= 0) ::close(w);
    FAIL() << what << " blocked on a FIFO";
  }
  const Status st = result.get();
  ASSERT_FALSE(st.isOk()) << what;
  EXPECT_NE(st.message().find(fifo), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("not a regular file (a FIFO)"), std::string::npos) << st.message();
}

TEST(MappedFile, AFifoIsRefusedWithoutBlocking) {
  expectFifoRefused([](const std::string& p) { return MappedFile::open(p).status(); }, "MappedFile");
  expectFifoRefused([](const std::string& p) { return GgufFile::open(p).status(); }, "GgufFile");
  expectFifoRefused([](const std::string& p) { return SafetensorsFile::open(p).status(); }, "SafetensorsFile");
  expectFifoRefused([](const std::string& p) { return detectModelFormat(p).status(); }, "detectModelFormat");
}

TEST(MappedFile, ProcFilesMapEmptyAndParsersRefuseThem) {
  // /proc files are "regular" with size 0: nothing to read, and the formats say the file is short.
  auto g = GgufFile::open("/proc/self/status");
  ASSERT_FALSE(g);
  EXPECT_NE(g.status().message().find("too short"), std::string::npos) << g.status().message();
}

}  // namespace
}  // namespace kvscope
