// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/util/atomic_file.h"
#include "core/util/temporary_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <set>

#include "core/util/input_file.h"

namespace kvscope {
namespace fs = std::filesystem;

namespace {

std::string errnoText(int err) { return std::strerror(err); }

bool existsAndNotRegular(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  return !S_ISREG(st.st_mode);
}

Status writeAll(int fd, std::string_view content, const std::string& shownPath) {
  const char* data = content.data();
  size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::ioError(shownPath + ": cannot write: " + errnoText(errno));
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
  return Status::ok();
}

/// The temporary files in flight. Never destroyed: a thread ending the process may still use it
/// while static destructors run.
struct InFlight {
  std::mutex mutex;
  std::set<std::string> paths;
};
InFlight& inFlight() {
  static InFlight* registry = new InFlight;
  return *registry;
}

}  // namespace

void forgetTemporaryFile(const std::string& path) {
  InFlight& r = inFlight();
  std::lock_guard lock(r.mutex);
  r.paths.erase(path);
}

void removeTemporaryFiles() {
  InFlight& r = inFlight();
  std::lock_guard lock(r.mutex);
  for (const std::string& p : r.paths) ::unlink(p.c_str());
  r.paths.clear();
}

std::string temporaryPathFor(const std::string& path) {
  fs::path p(path);
  std::random_device rd;
  // Built by appending: GCC 12 warns falsely (-Wrestrict) on "." + std::string.
  std::string name(1, '.');
  name += p.filename().string();
  name += ".kvscope-tmp-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
  std::string tmp = (p.parent_path() / name).string();
  InFlight& r = inFlight();
  std::lock_guard lock(r.mutex);
  r.paths.insert(tmp);
  return tmp;
}

Status writeViaTemporary(const std::string& path,
                         const std::function<Status(const std::string& temporaryPath)>& writer) {
  if (path.empty()) return Status::invalidArgument("empty output path");
  if (existsAndNotRegular(path)) {
    if (fs::is_directory(path)) return Status::invalidArgument(path + ": is a folder, not a file");
    return writer(path);
  }
  fs::path parent = fs::path(path).parent_path();
  if (!parent.empty() && !fs::is_directory(parent))
    return Status::ioError(path + ": folder " + parent.string() + " does not exist");
  const std::string tmp = temporaryPathFor(path);
  Status st = writer(tmp);
  if (st.isOk()) {
    int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      if (::fsync(fd) != 0) st = Status::ioError(path + ": cannot flush to disk: " + errnoText(errno));
      ::close(fd);
    } else {
      st = Status::ioError(path + ": temporary file vanished: " + errnoText(errno));
    }
  }
  if (st.isOk() && ::rename(tmp.c_str(), path.c_str()) != 0)
    st = Status::ioError(path + ": cannot rename temporary file into place: " + errnoText(errno));
  if (!st.isOk()) ::unlink(tmp.c_str());
  forgetTemporaryFile(tmp);
  return st;
}

Status writeFileAtomic(const std::string& path, std::string_view content) {
  return writeViaTemporary(path, [&](const std::string& target) -> Status {
    const bool direct = target == path && existsAndNotRegular(path);
    int flags = direct ? (O_WRONLY | O_CLOEXEC) : (O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC);
    int fd = ::open(target.c_str(), flags, 0644);
    if (fd < 0) return Status::ioError(path + ": cannot open for writing: " + errnoText(errno));
    Status st = writeAll(fd, content, path);
    if (::close(fd) != 0 && st.isOk())
      st = Status::ioError(path + ": cannot close: " + errnoText(errno));
    return st;
  });
}

Expected<std::string> readTextFile(const std::string& path, size_t maxBytes) {
  auto file = InputFile::open(path);  // a FIFO or a device would block or never end
  if (!file) return file.status();
  auto tooLarge = [&] {
    return Status::resourceLimit(path + ": larger than " + std::to_string(maxBytes) +
                                 " bytes; not a text file kvscope reads");
  };
  if (static_cast<uint64_t>(file->size()) > maxBytes) return tooLarge();
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(file->fd(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::ioError(path + ": cannot read: " + errnoText(errno));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > maxBytes) return tooLarge();
  }
  return out;
}

}  // namespace kvscope
