// SPDX-License-Identifier: GPL-3.0-or-later
// The one rule for every path kvscope reads (dumps, mappings, sessions, candidate and sweep
// files, tokenizers): a regular file, checked without blocking. A FIFO would block the open or
// the read forever, a device (/dev/zero, /dev/tty) never ends or waits for a person, a /proc or
// /sys file's size says nothing of what it yields; none of them is a file kvscope reads.
#pragma once

#include <string>

#include "core/util/status.h"

namespace kvscope {

/// Ok when `path` is a regular file that can be opened for reading; otherwise "PATH: is a named
/// pipe (FIFO), not a regular file" (socket, device, folder, /proc or /sys file) or "PATH: cannot
/// open: <OS error>". Never blocks: stat first, then an O_NONBLOCK open checked with fstat.
Status checkRegularFile(const std::string& path);

/// A read-only descriptor of a regular file, closed on destruction.
class InputFile {
 public:
  /// Opens `path` after checkRegularFile's checks, made on the opened descriptor itself (no
  /// window for a swap between check and open); the descriptor blocks normally afterwards.
  static Expected<InputFile> open(const std::string& path);
  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&& other) noexcept;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

  /// The descriptor (valid while this object lives).
  [[nodiscard]] int fd() const { return fd_; }
  /// The file's size when it was opened.
  [[nodiscard]] int64_t size() const { return size_; }

 private:
  InputFile(int fd, int64_t size) : fd_(fd), size_(size) {}
  int fd_ = -1;
  int64_t size_ = 0;
};

}  // namespace kvscope
