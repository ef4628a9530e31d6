// SPDX-License-Identifier: GPL-3.0-or-later
#define PCRE2_CODE_UNIT_WIDTH 8
#include "core/tokenize/unicode_regex.h"

#include <pcre2.h>

#include "core/tokenize/utf8.h"

namespace kvscope::tok {

namespace {

// Unicode White_Space as a class body. PCRE2's own \s (with UCP) leaves out U+0085, which
// llama.cpp's tables, Oniguruma and Rust's regex all count as white space.
constexpr const char* kWhiteSpaceBody =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"
    "\\x{205F}\\x{3000}";
// Rust's and Oniguruma's \w: Alphabetic, marks, decimal digits, connector punctuation, Join_Control
// (ZWNJ, ZWJ). PCRE2 10.42's \w with UCP is [\p{L}\p{N}_]. \p{L} and \p{Nl} stand in for
// Alphabetic, which also holds a few hundred Other_Alphabetic marks that \p{M} covers anyway.
constexpr const char* kWordBody = "\\p{L}\\p{Nl}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}";

}  // namespace

struct UnicodeRegex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

std::string translatePattern(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 32);
  bool inClass = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char n = p[i + 1];
      if (n == 's') {
        out += inClass ? std::string(kWhiteSpaceBody) : "[" + std::string(kWhiteSpaceBody) + "]";
        ++i;
        continue;
      }
      if (n == 'S' && !inClass) {
        out += "[^" + std::string(kWhiteSpaceBody) + "]";
        ++i;
        continue;
      }
      if (n == 'w') {
        out += inClass ? std::string(kWordBody) : "[" + std::string(kWordBody) + "]";
        ++i;
        continue;
      }
      if (n == 'W' && !inClass) {
        out += "[^" + std::string(kWordBody) + "]";
        ++i;
        continue;
      }
      out += c;
      out += n;
      ++i;
      continue;
    }
    if (!inClass && c == '[') {
      inClass = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (inClass && c == ']') inClass = false;
    out += c;
  }
  return out;
}

std::string escapeLiteral(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (std::string_view("\\^$.|?*+()[]{}-#&~ ").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

Expected<UnicodeRegex> UnicodeRegex::compile(std::string_view pattern, std::string_view what) {
  const std::string translated = translatePattern(pattern);
  int err = 0;
  PCRE2_SIZE errOffset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &errOffset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof buf);
    return Status::invalidArgument(std::string(what) + ": the regex '" + std::string(pattern) +
                                   "' does not compile: " + reinterpret_cast<const char*>(buf));
  }
  auto holder = std::make_shared<Code>();
  holder->code = code;
  UnicodeRegex r;
  r.code_ = std::move(holder);
  r.pattern_ = std::string(pattern);
  r.what_ = std::string(what);
  return r;
}

Expected<UnicodeRegex> UnicodeRegex::literal(std::string_view literal, std::string_view what) {
  // \Q…\E would need care with a literal "\E"; escaping each metacharacter does not.
  return compile(escapeLiteral(literal), what);
}

Expected<std::vector<Span>> UnicodeRegex::split(std::string_view text) const {
  std::vector<Span> spans;
  if (text.empty()) return spans;
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
      pcre2_match_data_create_from_pattern(code_->code, nullptr), &pcre2_match_data_free);
  if (!md) return Status::resourceLimit(what_ + ": out of memory for a regex match");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const size_t n = text.size();
  size_t pos = 0;      // where the next search starts
  size_t covered = 0;  // end of the last span pushed
  uint32_t options = 0;
  while (pos <= n) {
    const int rc = pcre2_match(code_->code, subject, n, pos, options | PCRE2_NO_UTF_CHECK, md.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) {
      if (options == 0 || pos >= n) break;
      // After an empty match, nothing non-empty starts here: move on one character.
      pos += sequenceLength(static_cast<unsigned char>(text[pos]));
      options = 0;
      continue;
    }
    if (rc < 0) {
      PCRE2_UCHAR buf[256];
      pcre2_get_error_message(rc, buf, sizeof buf);
      return Status::resourceLimit(what_ + ": the regex '" + pattern_ + "' failed at byte offset " +
                                   std::to_string(pos) + ": " + reinterpret_cast<const char*>(buf));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    size_t begin = ov[0], end = ov[1];
    if (begin < covered) begin = covered;  // \K or lookbehind tricks: never overlap
    if (end <= begin) {
      if (begin >= n) break;
      // Empty match: look for a non-empty one at the same place, then step past it.
      pos = begin;
      options = PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED;
      continue;
    }
    if (begin > covered) spans.push_back({covered, begin, false});
    spans.push_back({begin, end, true});
    covered = end;
    pos = end;
    options = 0;
  }
  if (covered < n) spans.push_back({covered, n, false});
  return spans;
}

}  // namespace kvscope::tok
