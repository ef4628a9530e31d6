// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/modelfile/model_format.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "core/modelfile/mapped_file.h"

namespace kvscope {

const char* modelFormatName(ModelFormat format) {
  switch (format) {
    case ModelFormat::Gguf: return "GGUF";
    case ModelFormat::Safetensors: return "safetensors";
    case ModelFormat::HfFolder: return "Hugging Face folder";
    case ModelFormat::Llama2c: return "llama2.c checkpoint";
  }
  return "?";
}

Expected<ModelFormat> detectModelFormat(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return Status::ioError(path + ": cannot open: " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) {
    const std::string config = path + (path.empty() || path.back() == '/' ? "" : "/") + "config.json";
    struct stat cs{};
    if (::stat(config.c_str(), &cs) != 0)
      return Status::invalidData(path + ": a folder without config.json (kvscope reads Hugging Face model folders, "
                                        "GGUF files and llama2.c checkpoints)");
    return ModelFormat::HfFolder;
  }
  auto file = MappedFile::open(path);
  if (!file) return file.status();
  const auto b = (*file)->bytes();
  if (b.size() >= 4 && std::memcmp(b.data(), "GGUF", 4) == 0) return ModelFormat::Gguf;
  if (b.size() >= 10) {
    uint64_t n = 0;
    std::memcpy(&n, b.data(), 8);
    if (n >= 2 && n <= b.size() - 8 && b[8] == '{') return ModelFormat::Safetensors;
  }
  return ModelFormat::Llama2c;
}

}  // namespace kvscope
