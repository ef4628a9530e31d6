// SPDX-License-Identifier: GPL-3.0-or-later
// JSON from and to users' files. Reading: a syntax error is said as a person reads it
// ("map.json: line 3, column 12: unexpected '}'; expected a value"), without the library's
// internals. Writing: the one place where the JSON kvscope writes is made safe for text from users' files (token
// texts, model names, paths): JSON must be valid UTF-8, and a dump's /token_text may hold any
// bytes. Each invalid sequence becomes U+FFFD, the replacement character, as Python's
// errors="replace" shows it (docs/reliability.md, "Text from files"). No CSV kvscope writes
// holds text from a file (layers, heads, numbers and parsed spec strings only).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "core/util/status.h"

namespace kvscope {

/// Parses JSON text read from `origin` (a file name). A syntax error is "ORIGIN: line L, column
/// C: unexpected 'x'; expected …" (an empty file, a number too large for a double likewise).
Expected<nlohmann::json> parseJsonText(std::string_view text, const std::string& origin);

/// The message of a JSON library exception (a value of the wrong type while a file is read) without
/// the library's "[json.exception.type_error.302] " prefix.
std::string jsonErrorText(const nlohmann::json::exception& e);

/// `j` as JSON text (indent 2, a newline at the end), each invalid UTF-8 sequence in its strings
/// replaced by U+FFFD (nlohmann's error_handler_t::replace, the maximal-subpart rule of Unicode
/// §3.9). Every JSON file and JSON report kvscope writes goes through one of these two.
std::string jsonText(const nlohmann::json& j);
/// The same for an ordered_json (keys in insertion order).
std::string jsonText(const nlohmann::ordered_json& j);

}  // namespace kvscope
