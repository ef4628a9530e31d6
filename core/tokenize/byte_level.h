// SPDX-License-Identifier: GPL-3.0-or-later
// GPT-2's byte-level alphabet (openai/gpt-2 encoder.py bytes_to_unicode, used by llama.cpp's
// unicode_byte_to_utf8 and Hugging Face's ByteLevel): every byte is written as one printable
// code point, so byte-level BPE vocabularies hold only valid UTF-8.
#pragma once

#include <string>
#include <string_view>

namespace kvscope::tok {

/// The code point that stands for `byte`: itself for '!'..'~', '¡'..'¬' and '®'..'ÿ', and
/// U+0100 + n for the n-th remaining byte in ascending order (so ' ' is 'Ġ', '\n' is 'Ċ').
char32_t byteToCodePoint(unsigned char byte);

/// The byte that `cp` stands for, or -1 when `cp` is not in the alphabet.
int codePointToByte(char32_t cp);

/// Each byte of `text` as its code point, in UTF-8.
std::string byteLevelEncode(std::string_view text);

/// The bytes a byte-level string stands for; false (and `out` untouched) when some code point is
/// not in the alphabet.
bool byteLevelDecode(std::string_view text, std::string& out);

}  // namespace kvscope::tok
