// SPDX-License-Identifier: GPL-3.0-or-later
// UTF-8 validation (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF), for
// names and strings read from files.
#pragma once

#include <cstddef>
#include <string_view>

namespace kvscope {

/// Length of the longest valid UTF-8 prefix of s: s.size() when all of s is valid.
size_t validUtf8Prefix(std::string_view s);

/// True when s is valid UTF-8.
inline bool isValidUtf8(std::string_view s) { return validUtf8Prefix(s) == s.size(); }

}  // namespace kvscope
