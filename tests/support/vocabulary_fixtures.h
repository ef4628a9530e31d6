// SPDX-License-Identifier: GPL-3.0-or-later
// Small GGUF vocabularies built from arrays, for the tokenizer tests and for the conformance
// stage (which writes them into GGUF files and asks llama.cpp to tokenize the same texts).
// Tokens are given as plain text; the helpers store them as the file would (SentencePiece's
// '▁' for spaces, GPT-2's byte-level alphabet for gpt2) with their own independent copy of
// GPT-2's byte table (openai/gpt-2 encoder.py bytes_to_unicode), not core's.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/tokenize/tokenizer.h"

namespace kvscope::test {

inline void appendCodePoint(std::string& out, unsigned cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

/// GPT-2's character for a byte: printable Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') stand
/// for themselves, the other 68 get U+0100, U+0101, … in byte order (' ' → 'Ġ' U+0120, '\n' →
/// 'Ċ' U+010A).
inline unsigned byteLevelCodePoint(unsigned char b) {
  auto printable = [](unsigned x) { return (x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE); };
  if (printable(b)) return b;
  unsigned n = 0;
  for (unsigned x = 0; x < b; ++x)
    if (!printable(x)) ++n;
  return 0x100 + n;
}

/// `text`'s bytes in GPT-2's byte-level alphabet.
inline std::string byteLevel(std::string_view text) {
  std::string out;
  for (char c : text) appendCodePoint(out, byteLevelCodePoint(static_cast<unsigned char>(c)));
  return out;
}

/// `text` with spaces as SentencePiece's '▁'.
inline std::string metaspace(std::string_view text) {
  std::string out;
  for (char c : text) out += c == ' ' ? std::string("\xE2\x96\x81") : std::string(1, c);
  return out;
}

/// One entry of a hand-made `llama` vocabulary (plain text: ' ' is stored as '▁').
struct SpmPiece {
  std::string text;
  float score = 0.0f;
  int32_t type = 1;  ///< 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
};

/// A GGUF `llama` vocabulary laid out as Llama 2's: 0 "<unk>" (unknown), 1 "<s>", 2 "</s>"
/// (control), then with `byteTokens` the 256 byte tokens "<0x00>"…"<0xFF>" (ids 3…258, type 6),
/// then `pieces` in order.
inline VocabularyData llamaVocabulary(const std::vector<SpmPiece>& pieces, bool byteTokens = true) {
  VocabularyData v;
  v.model = "llama";
  auto add = [&](std::string text, float score, int32_t type) {
    v.tokens.push_back(std::move(text));
    v.scores.push_back(score);
    v.tokenTypes.push_back(type);
  };
  add("<unk>", 0.0f, 2);
  add("<s>", 0.0f, 3);
  add("</s>", 0.0f, 3);
  if (byteTokens) {
    for (int b = 0; b < 256; ++b) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "<0x%02X>", b);
      add(hex, 0.0f, 6);
    }
  }
  for (const SpmPiece& p : pieces) add(metaspace(p.text), p.score, p.type);
  return v;
}

/// A GGUF `gpt2` vocabulary: the 256 byte-level characters in byte order (ids 0…255), then
/// `tokens` (plain text; control tokens such as "<|endoftext|>" go in `special` with type 3),
/// then the result of each merge that is not there yet, in merge order. Merges are pairs of
/// plain-text tokens, ranked by their order.
inline VocabularyData gpt2Vocabulary(std::string pre, const std::vector<std::string>& tokens,
                                     const std::vector<std::pair<std::string, std::string>>& merges,
                                     const std::vector<std::pair<std::string, int32_t>>& special = {}) {
  VocabularyData v;
  v.model = "gpt2";
  v.pre = std::move(pre);
  std::unordered_set<std::string> known;
  auto add = [&](const std::string& s) {
    if (known.insert(s).second) v.tokens.push_back(s);
  };
  for (int b = 0; b < 256; ++b) {
    std::string s;
    appendCodePoint(s, byteLevelCodePoint(static_cast<unsigned char>(b)));
    add(s);
  }
  for (const std::string& t : tokens) add(byteLevel(t));
  for (const auto& [a, b] : merges) {
    v.merges.push_back(byteLevel(a) + " " + byteLevel(b));
    add(byteLevel(a + b));
  }
  v.tokenTypes.assign(v.tokens.size(), 1);
  for (const auto& [text, type] : special) {
    v.tokens.push_back(text);  // stored as written, as converters store added tokens
    v.tokenTypes.push_back(type);
  }
  return v;
}

/// The id of a token given as plain text (stored form: '▁' for llama, byte-level for gpt2; a
/// special token as written), or -1.
inline int tokenId(const VocabularyData& v, std::string_view plain) {
  const std::string stored = v.model == "gpt2" ? byteLevel(plain) : metaspace(plain);
  for (size_t i = 0; i < v.tokens.size(); ++i)
    if (v.tokens[i] == stored || v.tokens[i] == plain) return static_cast<int>(i);
  return -1;
}

/// The ids of tokens given as plain text; -1 for a text that is not a token.
inline std::vector<int> tokenIds(const VocabularyData& v, const std::vector<std::string>& plain) {
  std::vector<int> ids;
  for (const std::string& p : plain) ids.push_back(tokenId(v, p));
  return ids;
}

}  // namespace kvscope::test
