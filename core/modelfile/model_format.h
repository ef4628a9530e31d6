// SPDX-License-Identifier: GPL-3.0-or-later
// Which kind of model a path holds, recognised from the content, not the name.
#pragma once

#include <string>

#include "core/util/status.h"

namespace kvscope {

/// The model files kvscope reads.
enum class ModelFormat {
  Gguf,         ///< a file starting with "GGUF"
  Safetensors,  ///< one .safetensors file (an 8-byte header length, then a JSON object)
  HfFolder,     ///< a folder with config.json (Hugging Face)
  Llama2c,      ///< any other regular file: a llama2.c checkpoint (its loader validates the header)
};

/// "GGUF", "safetensors", "Hugging Face folder", "llama2.c checkpoint".
const char* modelFormatName(ModelFormat format);

/// Looks at `path`: a folder must hold config.json; a file is GGUF by its magic, safetensors by
/// a plausible header length followed by '{', and llama2.c otherwise. Errors name the path
/// (missing, unreadable, a FIFO or device, a folder without config.json).
Expected<ModelFormat> detectModelFormat(const std::string& path);

}  // namespace kvscope
