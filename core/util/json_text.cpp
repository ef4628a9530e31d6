// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/util/json_text.h"

#include <algorithm>
#include <utility>

namespace kvscope {

namespace {

/// "line L, column C" of the byte at `offset` (0-based; columns count bytes from 1).
std::string lineAndColumn(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  size_t line = 1, lineStart = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      lineStart = i + 1;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(offset - lineStart + 1);
}

/// What nlohmann's parse_error says after "syntax error while parsing <context> - ", which reads
/// as plain English ("unexpected '}'; expected '[', '{', or a literal"); its prefix and error id
/// are the library's internals.
std::string problemOf(const std::string& what) {
  std::string p = what;
  if (const size_t dash = p.find(" - "); dash != std::string::npos) p = p.substr(dash + 3);
  else if (const size_t colon = p.rfind(": "); colon != std::string::npos) p = p.substr(colon + 2);
  if (p.rfind("syntax error while parsing ", 0) == 0) p = "not valid JSON";
  // The library's "last read" is its whole token buffer, which reads as noise here.
  if (p.rfind("invalid literal", 0) == 0)
    return "not a JSON value (text needs double quotes; true, false and null are lowercase)";
  // "literal" is the library's word for true, false, null, a number or a string.
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"or a literal", "or a value"},
                                  {"expected string literal", "expected a name in double quotes"},
                                  {"last read: ", "after "}}) {
    if (const size_t at = p.find(from); at != std::string::npos) p.replace(at, from.size(), to);
  }
  return p;
}

}  // namespace

Expected<nlohmann::json> parseJsonText(std::string_view text, const std::string& origin) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    return Status::invalidArgument(origin + ": the file is empty; expected a JSON object");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is 1-based: the byte at which the parser gave up.
    const size_t at = e.byte > 0 ? static_cast<size_t>(e.byte - 1) : 0;
    return Status::invalidArgument(origin + ": " + lineAndColumn(text, at) + ": " + problemOf(e.what()));
  } catch (const nlohmann::json::out_of_range& e) {
    // A number beyond a double ("1e999"): the library names the literal, not where it is.
    std::string literal;
    const std::string what = e.what();
    if (const size_t q = what.find('\''); q != std::string::npos && what.rfind('\'') > q)
      literal = what.substr(q + 1, what.rfind('\'') - q - 1);
    const size_t at = literal.empty() ? std::string_view::npos : text.find(literal);
    return Status::invalidArgument(origin + ": " + (at == std::string_view::npos ? "" : lineAndColumn(text, at) + ": ") +
                                   "the number " + (literal.empty() ? "" : literal + " ") +
                                   "is too large (JSON numbers here must fit a double, at most about 1.8e308)");
  } catch (const nlohmann::json::exception& e) {
    return Status::invalidArgument(origin + ": not valid JSON: " + problemOf(e.what()));
  }
}

std::string jsonErrorText(const nlohmann::json::exception& e) {
  std::string what = e.what();
  if (what.rfind("[json.exception.", 0) == 0) {
    if (const size_t close = what.find("] "); close != std::string::npos) what.erase(0, close + 2);
  }
  return what;
}

std::string jsonText(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string jsonText(const nlohmann::ordered_json& j) {
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace kvscope
