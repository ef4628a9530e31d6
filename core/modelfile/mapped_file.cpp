// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/modelfile/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kvscope {
namespace {

std::string errnoText() { return std::strerror(errno); }

const char* kindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a plain file";
}

/// Closes a descriptor on every path out.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

MappedFile::~MappedFile() {
  if (mapping_ != nullptr) ::munmap(mapping_, static_cast<size_t>(size_));
}

Expected<std::shared_ptr<const MappedFile>> MappedFile::open(const std::string& path) {
  auto fail = [&](Status s) { return s.withContext(path); };
  // O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever.
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (f.fd < 0) return fail(Status::ioError("cannot open: " + errnoText()));
  struct stat st{};
  if (::fstat(f.fd, &st) != 0) return fail(Status::ioError("cannot stat: " + errnoText()));
  if (!S_ISREG(st.st_mode))
    return fail(Status::invalidData(std::string("not a regular file (") + kindOf(st.st_mode) + ")"));
  const int flags = ::fcntl(f.fd, F_GETFL);
  if (flags < 0 || ::fcntl(f.fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
    return fail(Status::ioError("cannot set blocking mode: " + errnoText()));

  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<uint64_t>(st.st_size);
  if (file->size_ > 0) {
    void* map = ::mmap(nullptr, static_cast<size_t>(file->size_), PROT_READ, MAP_PRIVATE, f.fd, 0);
    if (map == MAP_FAILED) return fail(Status::ioError("cannot map: " + errnoText()));
    file->mapping_ = map;
    file->data_ = static_cast<const uint8_t*>(map);
  }
  return std::shared_ptr<const MappedFile>(std::move(file));
}

}  // namespace kvscope
