// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/util/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace kvscope {

namespace {

// statfs(2) magic numbers of the kernel's made-up file systems (linux/magic.h).
constexpr long kProcMagic = 0x9fa0, kSysfsMagic = 0x62656572, kDebugfsMagic = 0x64626720,
               kTracefsMagic = 0x74726163;

/// Why a file of mode `mode` is not read; empty for a regular file.
std::string notRegular(mode_t mode) {
  if (S_ISREG(mode)) return {};
  if (S_ISDIR(mode)) return "is a folder, not a file";
  if (S_ISFIFO(mode)) return "is a named pipe (FIFO), not a regular file";
  if (S_ISSOCK(mode)) return "is a socket, not a regular file";
  if (S_ISCHR(mode)) return "is a character device, not a regular file";
  if (S_ISBLK(mode)) return "is a block device, not a regular file";
  return "is not a regular file";
}

bool madeUpByTheKernel(long type) {
  return type == kProcMagic || type == kSysfsMagic || type == kDebugfsMagic || type == kTracefsMagic;
}

Status refuse(const std::string& path, const std::string& why) {
  return Status::invalidArgument(path + ": " + why + "; kvscope reads regular files only");
}

}  // namespace

Expected<InputFile> InputFile::open(const std::string& path) {
  if (path.empty()) return Status::invalidArgument("an empty file name");
  // stat first: a device is refused without being opened (opening one can have effects).
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Status::ioError(path + ": cannot open: " + std::strerror(errno));
  if (std::string why = notRegular(st.st_mode); !why.empty()) return refuse(path, why);
  // O_NONBLOCK: should the path have become a FIFO since the stat, the open still returns.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return Status::ioError(path + ": cannot open: " + std::strerror(errno));
  InputFile file(fd, 0);
  struct statfs fs {};
  if (::fstat(fd, &st) != 0) return Status::ioError(path + ": cannot stat: " + std::strerror(errno));
  if (std::string why = notRegular(st.st_mode); !why.empty()) return refuse(path, why);
  if (::fstatfs(fd, &fs) == 0 && madeUpByTheKernel(static_cast<long>(fs.f_type)))
    return refuse(path, "is a file of /proc or /sys (made up by the kernel as it is read), not a regular file");
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  file.size_ = static_cast<int64_t>(st.st_size);
  return file;
}

Status checkRegularFile(const std::string& path) {
  auto file = InputFile::open(path);
  return file ? Status::ok() : file.status();
}

InputFile::InputFile(InputFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), size_(other.size_) {}

InputFile& InputFile::operator=(InputFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
  }
  return *this;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace kvscope
