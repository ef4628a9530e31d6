// SPDX-License-Identifier: GPL-3.0-or-later
// TEMPORARY: placeholders until core/io lands (the io work replaces this file).
#include "core/io/dump.h"

namespace kvscope {
struct Dump::Impl {};
Dump::Dump(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Dump::~Dump() = default;
Expected<std::shared_ptr<const Dump>> Dump::open(const std::string& path, const OpenOptions&) {
  return Status::unsupported(path + ": reading dumps is not implemented yet");
}
Expected<Mapping> loadMapping(const std::string& path) {
  return Status::unsupported(path + ": mapping files are not implemented yet");
}
}  // namespace kvscope
