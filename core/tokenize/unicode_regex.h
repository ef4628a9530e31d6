// SPDX-License-Identifier: GPL-3.0-or-later
// Pre-tokenizer regexes run as Unicode regexes through PCRE2 (UTF + UCP). Patterns are written
// as the engines write them (Oniguruma / Rust / llama.cpp); translatePattern() gives `\s`, `\S`
// and `\w` the meaning those engines give them, which PCRE2's differ from (docs/real-models.md,
// "Tokenizers").
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/status.h"

namespace kvscope::tok {

/// A piece of a split: [begin, end) bytes and whether it is a match of the pattern (not a gap).
struct Span {
  size_t begin = 0;
  size_t end = 0;
  bool match = false;
};

/// A compiled pattern; copies share it, matching is thread-safe.
class UnicodeRegex {
 public:
  /// Compiles `pattern` (after translatePattern()); `what` names it in errors.
  static Expected<UnicodeRegex> compile(std::string_view pattern, std::string_view what);
  /// A pattern that matches `literal` exactly.
  static Expected<UnicodeRegex> literal(std::string_view literal, std::string_view what);

  /// The gaps and non-empty matches of `text` (valid UTF-8) in order, covering it without
  /// overlap; empty matches are skipped, as both engines' splitters drop empty pieces.
  [[nodiscard]] Expected<std::vector<Span>> split(std::string_view text) const;

  /// The pattern as written (before translation).
  [[nodiscard]] const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  std::shared_ptr<const Code> code_;
  std::string pattern_;
  std::string what_;
};

/// The pattern with `\s` and `\S` as Unicode White_Space (outside and inside classes, `\S` only
/// outside) and `\w` as Rust/Oniguruma's word characters, in PCRE2 syntax.
std::string translatePattern(std::string_view pattern);

/// `text` with regex metacharacters escaped.
std::string escapeLiteral(std::string_view text);

}  // namespace kvscope::tok
