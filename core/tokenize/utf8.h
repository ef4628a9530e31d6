// SPDX-License-Identifier: GPL-3.0-or-later
// UTF-8 helpers of the tokenizers: strict validation, decoding and encoding of code points, and
// the Unicode properties the engines' pre-tokenizers use (White_Space, word characters).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kvscope::tok {

/// Length of the valid UTF-8 sequence that starts at `s[i]`, or 0 when none starts there.
size_t validSequenceLength(std::string_view s, size_t i);

/// Offset of the first byte of `s` that is not part of valid UTF-8, or npos.
size_t firstInvalidUtf8(std::string_view s);

/// Length of the sequence announced by a lead byte of valid UTF-8 (1 for anything else).
inline size_t sequenceLength(unsigned char lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

/// The code point at `s[i]` of valid UTF-8; advances `i` past it.
char32_t decodeAt(std::string_view s, size_t& i);

/// Appends the UTF-8 form of `cp`.
void appendUtf8(std::string& out, char32_t cp);

/// The UTF-8 form of `cp`.
inline std::string utf8(char32_t cp) {
  std::string s;
  appendUtf8(s, cp);
  return s;
}

/// Unicode's White_Space property (25 code points): what llama.cpp's tables, Oniguruma and
/// Rust's regex call `\s`.
bool isWhiteSpace(char32_t cp);

/// Whether `cp` is a word character as Rust's regex `\w` has it (Alphabetic, marks, decimal
/// digits, connector punctuation, Join_Control); Hugging Face's single_word test uses it.
bool isWordChar(char32_t cp);

/// Whether `cp` has the Unicode general category N (Nd, Nl, No), Rust's char::is_numeric.
bool isNumeric(char32_t cp);

}  // namespace kvscope::tok
