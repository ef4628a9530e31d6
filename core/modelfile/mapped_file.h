// SPDX-License-Identifier: GPL-3.0-or-later
// A model file mapped read-only into memory. Only regular files are mapped: a FIFO, a device or
// a folder is refused before anything is read, and opening never blocks (O_NONBLOCK, cleared
// once the file is known to be regular).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/util/status.h"

namespace kvscope {

/// A read-only private mapping of a whole regular file; immutable, shared between readers.
class MappedFile {
 public:
  /// Opens and maps `path`. Errors ("path: problem"): cannot open, cannot stat, not a regular
  /// file (naming what it is), cannot map. An empty file maps to an empty span.
  static Expected<std::shared_ptr<const MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  /// The path it was opened under.
  [[nodiscard]] const std::string& path() const { return path_; }
  /// Size in bytes.
  [[nodiscard]] uint64_t size() const { return size_; }
  /// The file's bytes, valid while this object lives.
  [[nodiscard]] std::span<const uint8_t> bytes() const { return {data_, static_cast<size_t>(size_)}; }

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  void* mapping_ = nullptr;
};

}  // namespace kvscope
