// SPDX-License-Identifier: GPL-3.0-or-later
// Issue 33: every path kvscope reads is checked by core/util/input_file.h, without blocking. A
// FIFO given as a mapping, tokenizer or dump blocked the open forever (and SIGTERM did not end
// it); devices and /proc files never end or lie about their size.
#include "core/util/input_file.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "core/util/atomic_file.h"
#include "core/util/temporary_files.h"
#include "tests/support/test_support.h"

namespace kvscope {
namespace {

bool mentions(const Status& s, const std::string& part) { return s.message().find(part) != std::string::npos; }

// A FIFO with no writer: a plain open() for reading would wait for one forever. The check must
// return at once (were it to block, this test would hang until ctest's timeout).
TEST(InputFile, AFifoIsRefusedWithoutBlocking) {
  test::TempDir dir;
  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const Status s = checkRegularFile(fifo);
  EXPECT_EQ(s.code(), StatusCode::InvalidArgument);
  EXPECT_TRUE(mentions(s, fifo + ": is a named pipe (FIFO), not a regular file")) << s.message();
  auto text = readTextFile(fifo);
  ASSERT_FALSE(text.hasValue());
  EXPECT_TRUE(mentions(text.status(), "named pipe")) << text.status().message();
}

TEST(InputFile, DevicesFoldersSocketsAndProcFilesAreRefusedNamingWhatTheyAre) {
  test::TempDir dir;
  const std::string socketPath = dir.file("sock");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socketPath.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  for (const auto& [path, why] : std::vector<std::pair<std::string, std::string>>{
           {"/dev/zero", "is a character device"},
           {"/dev/null", "is a character device"},
           {dir.path().string(), "is a folder"},
           {socketPath, "is a socket"},
           {"/proc/self/status", "is a file of /proc or /sys"},
           {"/sys/kernel/mm/transparent_hugepage/enabled", "is a file of /proc or /sys"}}) {
    if (::access(path.c_str(), F_OK) != 0) continue;  // /sys may be absent in a container
    const Status s = checkRegularFile(path);
    EXPECT_FALSE(s.isOk()) << path;
    EXPECT_TRUE(mentions(s, path + ": " + why)) << s.message();
    EXPECT_TRUE(mentions(s, "kvscope reads regular files only")) << s.message();
  }
  ::close(fd);
}

TEST(InputFile, ARegularFileOpensWithItsSizeAndAMissingOneSaysSo) {
  test::TempDir dir;
  const std::string path = dir.file("a.txt");
  std::ofstream(path) << "hello";
  auto f = InputFile::open(path);
  ASSERT_TRUE(f.hasValue()) << f.status().message();
  EXPECT_EQ(f->size(), 5);
  char buf[8] = {};
  EXPECT_EQ(::read(f->fd(), buf, sizeof buf), 5);  // a blocking descriptor again, at the start
  EXPECT_EQ(std::string(buf), "hello");
  const Status missing = checkRegularFile(dir.file("nope"));
  EXPECT_EQ(missing.code(), StatusCode::IoError);
  EXPECT_TRUE(mentions(missing, dir.file("nope") + ": cannot open: No such file or directory")) << missing.message();
}

// Issue 33: the CLI's signal watcher removes the temporary files in flight before it ends a
// process that did not stop by itself; a file renamed into place is no longer one of them.
TEST(TemporaryFiles, InFlightOnesAreRemovedAndForgottenOnesKept) {
  test::TempDir dir;
  const std::string kept = temporaryPathFor(dir.file("kept.h5"));
  const std::string inFlight = temporaryPathFor(dir.file("out.h5"));
  std::ofstream(kept) << "x";
  std::ofstream(inFlight) << "x";
  forgetTemporaryFile(kept);
  removeTemporaryFiles();
  EXPECT_TRUE(std::filesystem::exists(kept));
  EXPECT_FALSE(std::filesystem::exists(inFlight));
}

}  // namespace
}  // namespace kvscope
