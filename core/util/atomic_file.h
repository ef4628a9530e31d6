// SPDX-License-Identifier: GPL-3.0-or-later
// Nothing half-written: every file kvscope writes goes to a temporary file in the target's
// folder and is renamed into place only when complete.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "core/util/status.h"

namespace kvscope {

/// Writes `content` to `path` atomically. A target that exists and is not a regular file
/// (/dev/stdout, /dev/null, a pipe) is written directly and never replaced. On failure the
/// previous file is intact and the temporary file is removed.
Status writeFileAtomic(const std::string& path, std::string_view content);

/// Calls `writer` with a temporary path in the target's folder, then fsyncs and renames it to
/// `path`. If `writer` fails (or the rename does), the temporary file is removed and the
/// previous `path` is left as it was. For non-regular targets, `writer` gets `path` itself.
Status writeViaTemporary(const std::string& path,
                         const std::function<Status(const std::string& temporaryPath)>& writer);

/// A fresh hidden temporary path beside `path` (".NAME.kvscope-tmp-PID-N"), for writers that
/// manage the temporary file themselves (the HDF5 dump writer).
std::string temporaryPathFor(const std::string& path);

/// Reads a whole file (for mappings, sessions, candidate lists); errors name the file.
Expected<std::string> readTextFile(const std::string& path, size_t maxBytes = size_t{64} << 20);

}  // namespace kvscope
