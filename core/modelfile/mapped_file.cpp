// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/modelfile/mapped_file.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "core/util/input_file.h"

namespace kvscope {

MappedFile::~MappedFile() {
  if (mapping_ != nullptr) ::munmap(mapping_, static_cast<size_t>(size_));
}

Expected<std::shared_ptr<const MappedFile>> MappedFile::open(const std::string& path) {
  // The one rule for files kvscope reads (core/util/input_file.h): a FIFO, a device, a folder or
  // a /proc file is refused without blocking, before anything is read.
  auto in = InputFile::open(path);
  if (!in) return in.status();
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<uint64_t>(in->size());
  if (file->size_ > 0) {
    void* map = ::mmap(nullptr, static_cast<size_t>(file->size_), PROT_READ, MAP_PRIVATE, in->fd(), 0);
    if (map == MAP_FAILED) return Status::ioError(path + ": cannot map: " + std::strerror(errno));
    file->mapping_ = map;
    file->data_ = static_cast<const uint8_t*>(map);
  }
  return std::shared_ptr<const MappedFile>(std::move(file));
}

}  // namespace kvscope
