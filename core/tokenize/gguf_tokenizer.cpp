// SPDX-License-Identifier: GPL-3.0-or-later
// GGUF tokenizers with llama.cpp's semantics (src/llama-vocab.cpp): `llama` as
// llm_tokenizer_spm_session, `gpt2` as llm_tokenizer_bpe_session, special tokens split out as
// llama_vocab::impl::tokenizer_st_partition does, BOS/EOS and defaults as llama_vocab::impl::load.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <queue>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/tokenize/bpe_merge.h"
#include "core/tokenize/byte_level.h"
#include "core/tokenize/string_map.h"
#include "core/tokenize/tokenizer.h"
#include "core/tokenize/unicode_regex.h"
#include "core/tokenize/utf8.h"

namespace kvscope {
namespace {

using tok::UnicodeRegex;

// llama.cpp's token attributes (llama_token_attr), from tokenizer.ggml.token_type.
enum Attr : uint32_t {
  kUndefined = 0,
  kUnknown = 1u << 0,
  kUnused = 1u << 1,
  kNormal = 1u << 2,
  kControl = 1u << 3,
  kUserDefined = 1u << 4,
  kByte = 1u << 5,
};

uint32_t attrOfType(int32_t type) {
  switch (type) {
    case 1: return kNormal;
    case 2: return kUnknown;
    case 3: return kControl;
    case 4: return kUserDefined;
    case 5: return kUnused;
    case 6: return kByte;
    default: return kUndefined;  // 0 (undefined) and anything else, as llama.cpp
  }
}

constexpr const char* kSpace = "\xE2\x96\x81";  // U+2581 '▁', SentencePiece's space

// ---------------------------------------------------------------------------------------------
// gpt2 pre-tokenizers: the regexes llama.cpp's llm_tokenizer_bpe constructor picks for each
// tokenizer.ggml.pre, applied one after the other, each splitting every piece the previous left
// into matches and the gaps between them (unicode_regex_split). Written here in PCRE2 syntax;
// `\s`/`\S` are Unicode White_Space, llama.cpp's is_whitespace table (unicode_regex.h).

// GPT-2's pattern (openai/gpt-2 encoder.py); llama.cpp runs it as unicode_regex_split_custom_gpt2.
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3's pattern with the case-insensitive contractions spelled out, as llama.cpp does
// (unicode_regex_split_custom_llama3 lowers only the letter after the apostrophe; PCRE2's (?i)
// would also let "'ſ" and "'K" (Kelvin sign) match).
constexpr const char* kLlama3Pattern =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2's: Llama 3's with single digits.
constexpr const char* kQwen2Pattern =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

enum class PreFamily { Default, Gpt2, Llama3, Qwen2, Smollm };

struct PreName {
  const char* name;
  PreFamily family;
  bool ignoreMerges;  // a pre-token that is itself a token is that token
  bool addBos;        // llama.cpp's add_bos default for the pre-tokenizer
};

// The names llama_vocab::impl::load maps to these regex sets, with the flags it sets there.
constexpr PreName kPreNames[] = {
    {"default", PreFamily::Default, false, false},
    {"gpt-2", PreFamily::Gpt2, false, false},
    {"phi-2", PreFamily::Gpt2, false, false},
    {"mpt", PreFamily::Gpt2, false, false},
    {"olmo", PreFamily::Gpt2, false, false},
    {"llama3", PreFamily::Llama3, true, true},
    {"llama-v3", PreFamily::Llama3, true, true},
    {"llama-bpe", PreFamily::Llama3, true, true},
    {"falcon3", PreFamily::Llama3, true, true},
    {"pixtral", PreFamily::Llama3, true, true},
    {"dbrx", PreFamily::Llama3, false, false},
    {"smaug-bpe", PreFamily::Llama3, false, false},
    {"qwen2", PreFamily::Qwen2, false, false},
    {"deepseek-r1-qwen", PreFamily::Qwen2, false, false},
    {"megrez", PreFamily::Qwen2, false, false},
    {"stablelm2", PreFamily::Qwen2, false, false},
    {"smollm", PreFamily::Smollm, false, false},
    {"starcoder", PreFamily::Smollm, false, false},
    {"refact", PreFamily::Smollm, false, false},
    {"command-r", PreFamily::Smollm, false, false},
    {"codeshell", PreFamily::Smollm, false, false},
};

std::vector<const char*> patternsOf(PreFamily f) {
  switch (f) {
    case PreFamily::Default:
      // llama.cpp's `default:` branch: punctuation runs, GPT-2's pattern, digit runs, then
      // runs of three ASCII digits.
      return {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2Pattern, R"(\p{N}+)", "[0-9][0-9][0-9]"};
    case PreFamily::Gpt2: return {kGpt2Pattern};
    case PreFamily::Llama3: return {kLlama3Pattern};
    case PreFamily::Qwen2: return {kQwen2Pattern};
    case PreFamily::Smollm: return {R"(\p{N})", kGpt2Pattern};
  }
  return {};
}

std::string knownPreNames() {
  std::string s;
  for (const PreName& p : kPreNames) {
    if (!s.empty()) s += ", ";
    s += p.name;
  }
  return s;
}

// Texts llama.cpp's loader marks as control tokens whatever the file's token type says (its
// EOT / EOM / FIM / EOG detection by text), so parse_special treats them as special.
const std::unordered_set<std::string>& controlByText() {
  static const std::unordered_set<std::string> s = {
      "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
      "<EOT>", "_<EOT>", "[EOT]", "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>",
      "<end_of_utterance>", "<|eom_id|>", "<|return|>", "<|call|>",
      "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>",
      "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>",
      "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>",
      "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
      "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>",
      "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>",
      "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>"};
  return s;
}

std::string quoted(std::string_view s) {
  std::string d = displayableText(s.substr(0, 40));
  if (s.size() > 40) d += "…";
  return "'" + d + "'";
}

// A piece of the input: raw text [off, off+len) or a special token.
struct Fragment {
  int token = -1;
  size_t off = 0;
  size_t len = 0;
};

class GgufTokenizer final : public Tokenizer {
 public:
  static Expected<std::unique_ptr<Tokenizer>> build(const VocabularyData& v, std::string_view origin);

  std::string tokenBytes(int id) const override;
  std::string tokenPiece(int id) const override {
    return inRange(id) ? texts_[static_cast<size_t>(id)] : std::string();
  }
  int vocabSize() const override { return static_cast<int>(texts_.size()); }
  std::optional<int> bos() const override { return bos_; }
  std::optional<int> eos() const override { return eos_; }
  bool addsBos() const override { return addBos_; }
  bool addsEos() const override { return addEos_; }
  std::string describe() const override;
  TokenizerKind kind() const override { return spm_ ? TokenizerKind::GgufLlama : TokenizerKind::GgufGpt2; }

 protected:
  Expected<std::vector<int>> encodeImpl(std::string_view text, bool addSpecial, bool parseSpecial) const override;

 private:
  bool inRange(int id) const { return id >= 0 && static_cast<size_t>(id) < texts_.size(); }
  int find(std::string_view text) const {
    auto it = ids_.find(text);
    return it == ids_.end() ? -1 : it->second;
  }
  std::vector<Fragment> partition(std::string_view text, bool parseSpecial) const;
  Status encodeSpm(std::string_view text, std::vector<int>& out) const;
  Status encodeBpe(std::string_view text, std::vector<int>& out) const;
  void encodeBpeWord(const std::string& word, std::vector<int>& out) const;

  std::string origin_;
  bool spm_ = true;
  std::vector<std::string> texts_;
  std::vector<float> scores_;
  std::vector<uint32_t> attrs_;
  tok::StringMap ids_;
  std::vector<int> specials_;  // control, user-defined and unknown tokens, longest text first
  std::optional<int> bos_, eos_, unk_;
  bool addBos_ = false, addEos_ = false, addSpacePrefix_ = false;
  // gpt2
  std::string pre_;
  std::vector<UnicodeRegex> regexes_;
  tok::MergeTable merges_;
  bool ignoreMerges_ = false;
};

Expected<std::unique_ptr<Tokenizer>> GgufTokenizer::build(const VocabularyData& v, std::string_view origin) {
  auto t = std::make_unique<GgufTokenizer>();
  t->origin_ = std::string(origin);
  const std::string o = t->origin_ + ": ";
  if (v.model == "llama") {
    t->spm_ = true;
  } else if (v.model == "gpt2") {
    t->spm_ = false;
  } else {
    return Status::unsupported(o + "tokenizer.ggml.model '" + displayableText(v.model) +
                               "' is not supported (kvscope reads 'llama', SentencePiece, and 'gpt2', "
                               "byte-level BPE)");
  }
  const size_t n = v.tokens.size();
  if (n == 0) return Status::invalidArgument(o + "tokenizer.ggml.tokens is missing or empty");
  if (n > static_cast<size_t>(INT32_MAX))
    return Status::invalidArgument(o + "tokenizer.ggml.tokens holds more than 2^31 tokens");
  if (!v.scores.empty() && v.scores.size() != n)
    return Status::invalidArgument(o + "tokenizer.ggml.scores has " + std::to_string(v.scores.size()) +
                                   " entries for " + std::to_string(n) + " tokens");
  if (!v.tokenTypes.empty() && v.tokenTypes.size() != n)
    return Status::invalidArgument(o + "tokenizer.ggml.token_type has " + std::to_string(v.tokenTypes.size()) +
                                   " entries for " + std::to_string(n) + " tokens");

  t->texts_.resize(n);
  t->attrs_.assign(n, kNormal);
  t->scores_.assign(n, 0.0f);
  t->ids_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string& s = v.tokens[i];
    const std::string key = "tokenizer.ggml.tokens[" + std::to_string(i) + "]";
    KVS_RETURN_IF_ERROR(checkUtf8(s, o + key));
    // llama.cpp renames an empty token rather than refusing the file.
    std::string text = s.empty() ? "[EMPTY_" + std::to_string(i) + "]" : s;
    auto [it, inserted] = t->ids_.emplace(text, static_cast<int>(i));
    if (!inserted)
      return Status::invalidArgument(o + key + " " + quoted(text) + " duplicates tokenizer.ggml.tokens[" +
                                     std::to_string(it->second) + "]");
    t->texts_[i] = std::move(text);
    if (!v.scores.empty()) {
      if (!std::isfinite(v.scores[i]))
        return Status::invalidArgument(o + "tokenizer.ggml.scores[" + std::to_string(i) + "] is not finite");
      t->scores_[i] = v.scores[i];
    }
    if (!v.tokenTypes.empty()) t->attrs_[i] = attrOfType(v.tokenTypes[i]);
  }

  // Special ids: the file's, or llama.cpp's defaults for the model when they fit the vocabulary.
  auto checkId = [&](const std::optional<int>& id, const char* key) -> Status {
    if (id && (*id < 0 || static_cast<size_t>(*id) >= n))
      return Status::invalidArgument(o + "tokenizer.ggml." + key + " = " + std::to_string(*id) +
                                     " is outside the vocabulary (" + std::to_string(n) + " tokens)");
    return Status::ok();
  };
  KVS_RETURN_IF_ERROR(checkId(v.bos, "bos_token_id"));
  KVS_RETURN_IF_ERROR(checkId(v.eos, "eos_token_id"));
  KVS_RETURN_IF_ERROR(checkId(v.unk, "unknown_token_id"));
  KVS_RETURN_IF_ERROR(checkId(v.pad, "padding_token_id"));
  auto orDefault = [&](const std::optional<int>& id, int def) -> std::optional<int> {
    if (id) return id;
    if (def >= 0 && static_cast<size_t>(def) < n) return def;
    return std::nullopt;
  };

  if (t->spm_) {
    t->bos_ = orDefault(v.bos, 1);
    t->eos_ = orDefault(v.eos, 2);
    t->unk_ = orDefault(v.unk, 0);
    t->addBos_ = v.addBos.value_or(true);
    t->addSpacePrefix_ = v.addSpacePrefix.value_or(true);
  } else {
    // llama.cpp's BPE defaults are 11 for both (GPT-2's vocabulary has no such tokens; its
    // files set them).
    t->bos_ = orDefault(v.bos, 11);
    t->eos_ = orDefault(v.eos, 11);
    t->unk_ = v.unk;
    t->pre_ = v.pre.empty() ? "default" : v.pre;  // llama.cpp's choice (with a warning) when absent
    const PreName* pre = nullptr;
    for (const PreName& p : kPreNames)
      if (t->pre_ == p.name) pre = &p;
    if (pre == nullptr)
      return Status::unsupported(o + "tokenizer.ggml.pre '" + displayableText(t->pre_) +
                                 "' is not supported; kvscope knows " + knownPreNames());
    t->ignoreMerges_ = pre->ignoreMerges;
    t->addBos_ = v.addBos.value_or(pre->addBos);
    for (const char* p : patternsOf(pre->family)) {
      auto r = UnicodeRegex::compile(p, o + "pre-tokenizer '" + t->pre_ + "'");
      if (!r) return Status::internal(r.status().message());
      t->regexes_.push_back(std::move(*r));
    }
    if (v.merges.empty())
      return Status::invalidArgument(o + "tokenizer.ggml.merges is missing or empty; a gpt2 (byte-level BPE) "
                                         "vocabulary needs its merges");
    t->merges_.reserve(v.merges.size());
    for (size_t i = 0; i < v.merges.size(); ++i) {
      const std::string& m = v.merges[i];
      const std::string key = "tokenizer.ggml.merges[" + std::to_string(i) + "]";
      KVS_RETURN_IF_ERROR(checkUtf8(m, o + key));
      const size_t space = m.size() > 1 ? m.find(' ', 1) : std::string::npos;  // as llama.cpp splits it
      if (space == std::string::npos)
        return Status::invalidArgument(o + key + " " + quoted(m) + " is not two tokens separated by a space");
      const std::string a = m.substr(0, space), b = m.substr(space + 1);
      const int ia = t->find(a), ib = t->find(b), ir = t->find(a + b);
      for (const auto& [id, s] : {std::pair{ia, a}, std::pair{ib, b}, std::pair{ir, a + b}})
        if (id < 0)
          return Status::invalidArgument(o + key + " " + quoted(m) + ": " + quoted(s) +
                                         " is not in tokenizer.ggml.tokens");
      t->merges_.add(ia, ib, static_cast<int>(i), ir, /*keepFirst=*/true);
    }
  }
  t->addEos_ = v.addEos.value_or(false);
  if (t->addBos_ && !t->bos_)
    return Status::invalidArgument(o + "tokenizer.ggml.add_bos_token is true, but tokenizer.ggml.bos_token_id is not set");
  if (t->addEos_ && !t->eos_)
    return Status::invalidArgument(o + "tokenizer.ggml.add_eos_token is true, but tokenizer.ggml.eos_token_id is not set");

  // llama.cpp's loader fixes some token types by their text: end-of-generation, FIM and similar
  // tokens are control tokens; gpt-oss's channel markers are user-defined (always split out).
  const auto& control = controlByText();
  for (size_t i = 0; i < n; ++i)
    if (control.count(t->texts_[i])) t->attrs_[i] |= kControl;
  for (const char* s : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    const int id = t->find(s);
    if (id >= 0) t->attrs_[static_cast<size_t>(id)] = kUserDefined;
  }
  if (t->find("<|return|>") >= 0 && t->find("<|call|>") >= 0 && t->find("<|end|>") >= 0)
    t->attrs_[static_cast<size_t>(t->find("<|end|>"))] = kUserDefined;  // gpt-oss: <|end|> does not end generation

  for (size_t i = 0; i < n; ++i)
    if (t->attrs_[i] & (kControl | kUserDefined | kUnknown)) t->specials_.push_back(static_cast<int>(i));
  // Longest first (llama.cpp sorts by length; ties in id order here, std::sort leaves them open).
  std::stable_sort(t->specials_.begin(), t->specials_.end(), [&](int a, int b) {
    return t->texts_[static_cast<size_t>(a)].size() > t->texts_[static_cast<size_t>(b)].size();
  });
  return std::unique_ptr<Tokenizer>(std::move(t));
}

std::vector<Fragment> GgufTokenizer::partition(std::string_view text, bool parseSpecial) const {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;
  for (int id : specials_) {
    const uint32_t attr = attrs_[static_cast<size_t>(id)];
    // Control and unknown tokens only with parse_special; user-defined ones always.
    if (!parseSpecial && (attr & (kControl | kUnknown))) continue;
    const std::string& s = texts_[static_cast<size_t>(id)];
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      const size_t end = f.off + f.len;
      const std::string_view window = text.substr(0, end);
      size_t base = f.off;
      while (true) {
        const size_t m = window.find(s, base);
        if (m == std::string_view::npos) {
          if (base < end) next.push_back({-1, base, end - base});
          break;
        }
        if (m > base) next.push_back({-1, base, m - base});
        next.push_back({id, m, s.size()});
        base = m + s.size();
      }
    }
    frags.swap(next);
  }
  return frags;
}

Expected<std::vector<int>> GgufTokenizer::encodeImpl(std::string_view text, bool addSpecial, bool parseSpecial) const {
  KVS_RETURN_IF_ERROR(checkUtf8(text, "text to tokenize"));
  std::vector<int> out;
  if (addSpecial && addBos_) out.push_back(*bos_);
  bool prevSpecial = true;  // SentencePiece's space prefix goes on the first text and after special tokens
  for (const Fragment& f : partition(text, parseSpecial)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      prevSpecial = true;
      continue;
    }
    const std::string_view piece = text.substr(f.off, f.len);
    if (spm_) {
      std::string s;
      if (addSpacePrefix_ && prevSpecial) s = " ";
      s.append(piece);
      std::string escaped;  // spaces (U+0020 only) → '▁'
      escaped.reserve(s.size() + s.size() / 2);
      for (char c : s) {
        if (c == ' ') escaped += kSpace;
        else escaped += c;
      }
      KVS_RETURN_IF_ERROR(encodeSpm(escaped, out));
    } else {
      KVS_RETURN_IF_ERROR(encodeBpe(piece, out));
    }
    prevSpecial = false;
  }
  if (addSpecial && addEos_) out.push_back(*eos_);
  return out;
}

// llm_tokenizer_spm_session::tokenize: start from the UTF-8 characters; repeatedly merge the
// adjacent pair whose concatenation is the token with the highest score (the leftmost pair
// among equal scores); then each symbol is its token, or its bytes as <0xNN> tokens.
Status GgufTokenizer::encodeSpm(std::string_view text, std::vector<int>& out) const {
  struct Symbol {
    int prev, next;
    size_t off, len;  // len 0: merged into its left neighbour
  };
  std::vector<Symbol> sym;
  for (size_t off = 0; off < text.size();) {
    const size_t len = tok::sequenceLength(static_cast<unsigned char>(text[off]));
    const int idx = static_cast<int>(sym.size());
    sym.push_back({idx - 1, off + len < text.size() ? idx + 1 : -1, off, len});
    off += len;
  }
  struct Bigram {
    float score;
    int left, right;
    size_t size;
  };
  auto lower = [](const Bigram& a, const Bigram& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::priority_queue<Bigram, std::vector<Bigram>, decltype(lower)> queue(lower);
  auto tryAdd = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const Symbol& a = sym[static_cast<size_t>(l)];
    const Symbol& b = sym[static_cast<size_t>(r)];
    const int id = find(text.substr(a.off, a.len + b.len));
    if (id < 0) return;
    queue.push({scores_[static_cast<size_t>(id)], l, r, a.len + b.len});
  };
  for (size_t i = 1; i < sym.size(); ++i) tryAdd(static_cast<int>(i) - 1, static_cast<int>(i));
  while (!queue.empty()) {
    const Bigram bg = queue.top();
    queue.pop();
    Symbol& l = sym[static_cast<size_t>(bg.left)];
    Symbol& r = sym[static_cast<size_t>(bg.right)];
    // Stale: one side was merged since (symbols only grow, so the sizes tell).
    if (l.len == 0 || r.len == 0 || l.len + r.len != bg.size) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[static_cast<size_t>(r.next)].prev = bg.left;
    tryAdd(l.prev, bg.left);
    tryAdd(bg.left, l.next);
  }
  for (int i = sym.empty() ? -1 : 0; i != -1; i = sym[static_cast<size_t>(i)].next) {
    const Symbol& s = sym[static_cast<size_t>(i)];
    const std::string_view piece = text.substr(s.off, s.len);
    const int id = find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // Byte fallback: <0xNN>, else the byte as a one-character token (llama_vocab::byte_to_token).
    std::vector<int> bytes;
    for (char c : piece) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "<0x%02X>", static_cast<unsigned>(static_cast<unsigned char>(c)));
      int b = find(hex);
      if (b < 0) b = find(std::string(1, c));
      if (b < 0) break;
      bytes.push_back(b);
    }
    if (bytes.size() == piece.size()) {
      out.insert(out.end(), bytes.begin(), bytes.end());
    } else if (unk_) {
      // llama.cpp stops with an exception here; kvscope writes the unknown token, as
      // SentencePiece does without byte fallback.
      out.push_back(*unk_);
    } else {
      return Status::invalidArgument(origin_ + ": the vocabulary has no token for " + quoted(piece) +
                                     ", no byte tokens <0xNN> for it and no unknown token");
    }
  }
  return Status::ok();
}

// llm_tokenizer_bpe_session::tokenize: the pre-tokenizer's regexes split the text into words;
// each word is byte-level encoded and merged by rank.
Status GgufTokenizer::encodeBpe(std::string_view text, std::vector<int>& out) const {
  std::vector<tok::Span> pieces{{0, text.size(), false}};
  std::vector<tok::Span> next;
  for (const UnicodeRegex& re : regexes_) {
    next.clear();
    for (const tok::Span& p : pieces) {
      auto spans = re.split(text.substr(p.begin, p.end - p.begin));
      if (!spans) return spans.status().withContext(origin_);
      for (const tok::Span& s : *spans) next.push_back({p.begin + s.begin, p.begin + s.end, s.match});
    }
    pieces.swap(next);
  }
  for (const tok::Span& p : pieces) encodeBpeWord(tok::byteLevelEncode(text.substr(p.begin, p.end - p.begin)), out);
  return Status::ok();
}

void GgufTokenizer::encodeBpeWord(const std::string& word, std::vector<int>& out) const {
  if (ignoreMerges_) {
    const int id = find(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<int> symbols;
  symbols.reserve(word.size());
  for (size_t i = 0; i < word.size();) {
    const size_t len = tok::sequenceLength(static_cast<unsigned char>(word[i]));
    symbols.push_back(find(std::string_view(word).substr(i, len)));  // -1: not in the vocabulary
    i += len;
  }
  tok::applyMerges(symbols, merges_);
  // A character missing from the vocabulary is dropped: llama.cpp looks its bytes up as
  // one-byte tokens, which a byte-level vocabulary does not have.
  for (int id : symbols)
    if (id >= 0) out.push_back(id);
}

std::string GgufTokenizer::tokenBytes(int id) const {
  if (!inRange(id)) return {};
  const std::string& text = texts_[static_cast<size_t>(id)];
  const uint32_t attr = attrs_[static_cast<size_t>(id)];
  // llama_vocab::impl::token_to_piece with special = true.
  if (attr & (kUnknown | kControl | kUserDefined)) return text;
  if (attr & kNormal) {
    if (spm_) {
      std::string s;
      for (size_t i = 0; i < text.size();) {
        if (text.compare(i, 3, kSpace) == 0) {
          s += ' ';
          i += 3;
        } else {
          s += text[i++];
        }
      }
      return s;
    }
    // Byte-level: each code point is a byte; one outside the alphabet stays as it is (llama.cpp
    // writes an [UNK_BYTE_…] marker there).
    std::string s;
    for (size_t i = 0; i < text.size();) {
      const size_t start = i;
      const int b = tok::codePointToByte(tok::decodeAt(text, i));
      if (b >= 0) s += static_cast<char>(b);
      else s.append(text, start, i - start);
    }
    return s;
  }
  if ((attr & kByte) && text.size() == 6 && text.compare(0, 3, "<0x") == 0 && text[5] == '>') {
    const auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    const int hi = hex(text[3]), lo = hex(text[4]);
    if (hi >= 0 && lo >= 0) return std::string(1, static_cast<char>(hi * 16 + lo));
  }
  // Unused and undefined tokens: llama.cpp writes nothing; kvscope keeps their text so that a
  // dump never shows an empty token.
  return text;
}

std::string GgufTokenizer::describe() const {
  auto tokenName = [&](const std::optional<int>& id) {
    return id ? std::to_string(*id) + " " + quoted(texts_[static_cast<size_t>(*id)]) : std::string("none");
  };
  std::string s = spm_ ? "GGUF llama (SentencePiece BPE, llama.cpp semantics)"
                       : "GGUF gpt2 (byte-level BPE, llama.cpp semantics), pre-tokenizer '" + pre_ + "'";
  s += ", " + std::to_string(texts_.size()) + " tokens";
  if (!spm_) s += ", " + std::to_string(merges_.size()) + " merges" + (ignoreMerges_ ? ", ignore_merges" : "");
  s += ", BOS " + tokenName(bos_) + (addBos_ ? " (added)" : " (not added)");
  s += ", EOS " + tokenName(eos_) + (addEos_ ? " (added)" : " (not added)");
  if (spm_ && !addSpacePrefix_) s += ", no space prefix";
  return s;
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> tokenizerFromGguf(const VocabularyData& vocabulary, std::string_view origin) {
  return GgufTokenizer::build(vocabulary, origin);
}

}  // namespace kvscope
