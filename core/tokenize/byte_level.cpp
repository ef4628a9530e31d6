// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/tokenize/byte_level.h"

#include <array>

#include "core/tokenize/utf8.h"

namespace kvscope::tok {

namespace {

bool printable(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

struct Tables {
  std::array<char32_t, 256> toCp{};
  std::array<std::string, 256> toUtf8{};
  Tables() {
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      toCp[static_cast<size_t>(b)] = printable(b) ? static_cast<char32_t>(b) : next++;
      toUtf8[static_cast<size_t>(b)] = utf8(toCp[static_cast<size_t>(b)]);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byteToCodePoint(unsigned char byte) { return tables().toCp[byte]; }

int codePointToByte(char32_t cp) {
  if (cp < 0x100) return printable(static_cast<int>(cp)) ? static_cast<int>(cp) : -1;
  if (cp >= 0x100 + 68) return -1;  // 256 - 188 printable bytes = 68 remapped ones
  const Tables& t = tables();
  for (int b = 0; b < 256; ++b)
    if (t.toCp[static_cast<size_t>(b)] == cp) return b;
  return -1;
}

std::string byteLevelEncode(std::string_view text) {
  const Tables& t = tables();
  std::string out;
  out.reserve(text.size() * 2);
  for (char c : text) out += t.toUtf8[static_cast<unsigned char>(c)];
  return out;
}

bool byteLevelDecode(std::string_view text, std::string& out) {
  std::string bytes;
  bytes.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = validSequenceLength(text, i);
    if (n == 0) return false;
    const char32_t cp = decodeAt(text, i);
    const int b = codePointToByte(cp);
    if (b < 0) return false;
    bytes.push_back(static_cast<char>(b));
  }
  out = std::move(bytes);
  return true;
}

}  // namespace kvscope::tok
