// SPDX-License-Identifier: GPL-3.0-or-later
// Hugging Face tokenizer.json with a BPE model, with the semantics of the `tokenizers` library
// (huggingface/tokenizers, tokenizers/src): added tokens split out first
// (tokenizer/added_vocabulary.rs: extract_and_normalize), then the normalizer, the
// pre-tokenizer, the BPE model (models/bpe/model.rs: merge_word, word.rs: merge_all) and the
// post-processor's special tokens; the decoder gives each token's text.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tokenize/bpe_merge.h"
#include "core/tokenize/byte_level.h"
#include "core/tokenize/normalize.h"
#include "core/tokenize/string_map.h"
#include "core/tokenize/tokenizer.h"
#include "core/tokenize/unicode_regex.h"
#include "core/tokenize/utf8.h"

namespace kvscope {
namespace {

using json = nlohmann::json;
using tok::Span;
using tok::UnicodeRegex;

// GPT-2's pattern, the one Hugging Face's ByteLevel pre-tokenizer uses when use_regex is set.
constexpr const char* kByteLevelPattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// ---------------------------------------------------------------------------------------------
// The pipeline's steps, as read from the file.

struct NormStep {
  enum class Kind { Form, Prepend, Replace } kind = Kind::Form;
  tok::NormalForm form = tok::NormalForm::Nfc;
  std::string text;                  // Prepend's string, Replace's content
  std::optional<UnicodeRegex> regex;  // Replace's pattern
};

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
enum class Prepend { Always, First, Never };

struct PreStep {
  enum class Kind { ByteLevel, Metaspace, Split, Digits } kind = Kind::ByteLevel;
  bool addPrefixSpace = false;  // ByteLevel
  bool useRegex = true;         // ByteLevel
  std::string replacement;      // Metaspace
  Prepend prepend = Prepend::Always;
  bool split = true;            // Metaspace
  std::optional<UnicodeRegex> regex;  // Split, Digits, ByteLevel
  Behavior behavior = Behavior::Isolated;
  bool invert = false;
};

struct DecStep {
  enum class Kind { ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip } kind = Kind::ByteLevel;
  std::string replacement;  // Metaspace
  std::optional<UnicodeRegex> regex;  // Replace
  std::string content;                // Replace
};

struct AddedToken {
  std::string content;
  std::string pattern;  // what is matched: content, or its normalized form when `normalized`
  int id = 0;
  bool singleWord = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

// A byte trie of the added tokens' patterns: the longest one starting at a position.
class Trie {
 public:
  void insert(std::string_view s, int value) {
    int node = 0;
    for (char c : s) {
      int child = -1;
      for (const auto& [k, v] : nodes_[static_cast<size_t>(node)].next)
        if (k == c) child = v;
      if (child < 0) {
        child = static_cast<int>(nodes_.size());
        nodes_[static_cast<size_t>(node)].next.emplace_back(c, child);
        nodes_.emplace_back();
      }
      node = child;
    }
    if (nodes_[static_cast<size_t>(node)].value < 0) nodes_[static_cast<size_t>(node)].value = value;
  }
  [[nodiscard]] bool empty() const { return nodes_.size() == 1; }
  // (length, value) of the longest pattern at text[pos…], or (0, -1).
  [[nodiscard]] std::pair<size_t, int> longest(std::string_view text, size_t pos) const {
    std::pair<size_t, int> best{0, -1};
    int node = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      int child = -1;
      for (const auto& [k, v] : nodes_[static_cast<size_t>(node)].next)
        if (k == text[i]) child = v;
      if (child < 0) break;
      node = child;
      if (nodes_[static_cast<size_t>(node)].value >= 0) best = {i + 1 - pos, nodes_[static_cast<size_t>(node)].value};
    }
    return best;
  }

 private:
  struct Node {
    std::vector<std::pair<char, int>> next;
    int value = -1;
  };
  std::vector<Node> nodes_{Node{}};
};

// A piece of the input on its way through the pipeline.
struct Piece {
  std::string text;
  bool atStart = false;  // begins at offset 0 of the original text (Metaspace's "first")
  int token = -1;        // an added token already
};

// ---------------------------------------------------------------------------------------------
// Reading the JSON.

std::string typeName(const json& j) { return j.type_name(); }

class Reader {
 public:
  explicit Reader(std::string origin) : origin_(std::move(origin)) {}
  [[nodiscard]] Status bad(const std::string& path, const std::string& msg) const {
    return Status::invalidArgument(origin_ + ": " + path + ": " + msg);
  }
  [[nodiscard]] Status unsupported(const std::string& path, const std::string& msg) const {
    return Status::unsupported(origin_ + ": " + path + ": " + msg);
  }
  [[nodiscard]] const std::string& origin() const { return origin_; }

  // obj[key] as a string; `def` when absent or null (and no default: an error).
  Expected<std::string> str(const json& obj, const std::string& path, const char* key,
                            std::optional<std::string> def = std::nullopt) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) {
      if (def) return *def;
      return bad(path + "." + key, "missing (expected a string)");
    }
    if (!it->is_string()) return bad(path + "." + key, "expected a string, found " + typeName(*it));
    return it->get<std::string>();
  }
  Expected<bool> boolean(const json& obj, const std::string& path, const char* key, bool def) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return def;
    if (!it->is_boolean()) return bad(path + "." + key, "expected true or false, found " + typeName(*it));
    return it->get<bool>();
  }
  Expected<int> id(const json& j, const std::string& path) const {
    if (!j.is_number_integer() || j.get<int64_t>() < 0 || j.get<int64_t>() > INT32_MAX)
      return bad(path, "expected a token id (an integer from 0 to 2^31-1), found " +
                           (j.is_number() ? j.dump() : typeName(j)));
    return static_cast<int>(j.get<int64_t>());
  }
  // A Split/Replace pattern: {"String": "..."} or {"Regex": "..."}.
  Expected<UnicodeRegex> pattern(const json& obj, const std::string& path) const {
    auto it = obj.find("pattern");
    if (it == obj.end() || !it->is_object() || it->size() != 1)
      return bad(path + ".pattern", "expected {\"String\": …} or {\"Regex\": …}");
    const std::string kind = it->begin().key();
    const json& value = it->begin().value();
    if (!value.is_string()) return bad(path + ".pattern." + kind, "expected a string");
    const std::string s = value.get<std::string>();
    if (kind == "String") return UnicodeRegex::literal(s, origin_ + ": " + path + ".pattern");
    if (kind == "Regex") {
      auto r = UnicodeRegex::compile(s, origin_ + ": " + path + ".pattern");
      if (!r) return Status::invalidArgument(r.status().message());
      return r;
    }
    return bad(path + ".pattern", "'" + kind + "' is neither String nor Regex");
  }

 private:
  std::string origin_;
};

// nlohmann's parse error as "line L, column C: what was expected".
Status jsonSyntaxError(std::string_view origin, std::string_view text, const json::exception& e) {
  std::string detail = displayableText(e.what());  // nlohmann quotes what it read, bad bytes too
  size_t line = 1, column = 0;
  if (const auto* pe = dynamic_cast<const json::parse_error*>(&e)) {
    // pe->byte counts the bytes read, the offending one included.
    const size_t last = std::min<size_t>(pe->byte > 0 ? pe->byte - 1 : 0, text.size());
    for (size_t i = 0; i < last; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 0;
      } else {
        ++column;
      }
    }
    column += 1;
    // "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error while
    // parsing object key - unexpected '}'; expected string literal" → the part that says what
    // was found and what was expected.
    const std::string_view key = "syntax error while parsing ";
    if (auto p = detail.find(key); p != std::string::npos) {
      std::string rest = detail.substr(p + key.size());
      if (auto dash = rest.find(" - "); dash != std::string::npos)
        rest = rest.substr(dash + 3) + " (in a JSON " + rest.substr(0, dash) + ")";
      detail = rest;
    } else if (auto colon = detail.find(": "); colon != std::string::npos) {
      detail = detail.substr(colon + 2);
    }
    return Status::invalidArgument(std::string(origin) + ": line " + std::to_string(line) + ", column " +
                                   std::to_string(column) + ": not valid JSON: " + detail);
  }
  if (auto p = detail.find("] "); p != std::string::npos) detail = detail.substr(p + 2);
  return Status::invalidArgument(std::string(origin) + ": not valid JSON: " + detail);
}

Expected<json> parseJson(std::string_view text, std::string_view origin) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    return jsonSyntaxError(origin, text, e);
  }
}

// ---------------------------------------------------------------------------------------------

class HfTokenizer final : public Tokenizer {
 public:
  static Expected<std::unique_ptr<Tokenizer>> build(const json& root, const Reader& r, const json* config,
                                                    const Reader& cr);

  std::string tokenBytes(int id) const override;
  std::string tokenPiece(int id) const override {
    if (id < 0 || id >= vocabSize_) return {};
    if (const AddedToken* a = addedById(id)) return a->content;
    return static_cast<size_t>(id) < pieces_.size() ? pieces_[static_cast<size_t>(id)] : std::string();
  }
  int vocabSize() const override { return vocabSize_; }
  std::optional<int> bos() const override { return bos_; }
  std::optional<int> eos() const override { return eos_; }
  bool addsBos() const override { return bos_ && !prefix_.empty() && prefix_.front() == *bos_; }
  bool addsEos() const override { return eos_ && !suffix_.empty() && suffix_.back() == *eos_; }
  std::string describe() const override;
  TokenizerKind kind() const override { return TokenizerKind::HuggingFaceBpe; }

 protected:
  Expected<std::vector<int>> encodeImpl(std::string_view text, bool addSpecial, bool parseSpecial) const override;

 private:
  Status parseModel(const json& m, const Reader& r);
  Status parseAdded(const json& list, const Reader& r);
  Status parseNormalizer(const json& j, const std::string& path, const Reader& r);
  Status parsePreTokenizer(const json& j, const std::string& path, const Reader& r);
  Status parsePostProcessor(const json& j, const std::string& path, const Reader& r);
  Status parseDecoder(const json& j, const std::string& path, const Reader& r);
  Status applyConfig(const json& config, const Reader& cr);

  const AddedToken* addedById(int id) const {
    auto it = std::lower_bound(addedOrder_.begin(), addedOrder_.end(), id,
                               [&](size_t a, int v) { return added_[a].id < v; });
    return it != addedOrder_.end() && added_[*it].id == id ? &added_[*it] : nullptr;
  }
  int lookup(std::string_view s) const {  // an added token first, then the model's vocabulary
    if (auto it = addedIds_.find(s); it != addedIds_.end()) return it->second;
    if (auto it = vocab_.find(s); it != vocab_.end()) return it->second;
    return -1;
  }
  Expected<std::string> normalize(std::string s) const;
  Status extractAdded(const Piece& in, const Trie& trie, bool parseSpecial, std::vector<Piece>& out) const;
  Status preTokenize(const PreStep& step, const Piece& in, std::vector<Piece>& out) const;
  void bpe(const std::string& word, std::vector<int>& out) const;

  std::vector<std::string> normNames_, preNames_, postNames_;  // component names for describe()
  // model
  tok::StringMap vocab_;
  std::vector<std::string> pieces_;  // id → the model's token string
  tok::MergeTable merges_;
  size_t mergeCount_ = 0;
  std::optional<int> unk_;
  std::string unkText_;
  std::string prefix_s_, suffix_s_;  // continuing_subword_prefix, end_of_word_suffix
  bool byteFallback_ = false, fuseUnk_ = false, ignoreMerges_ = false;
  // added tokens
  std::vector<AddedToken> added_;
  std::vector<size_t> addedOrder_;  // indices into added_, by id
  tok::StringMap addedIds_;
  Trie rawTrie_, normalizedTrie_;
  // pipeline
  std::vector<NormStep> norm_;
  std::vector<PreStep> pre_;
  std::vector<DecStep> dec_;
  std::vector<int> prefix_, suffix_;  // what the post-processor puts around a single sequence
  std::optional<int> bos_, eos_;
  int vocabSize_ = 0;
};

Status HfTokenizer::parseModel(const json& m, const Reader& r) {
  if (!m.is_object()) return r.bad("model", "expected an object, found " + typeName(m));
  std::string type;
  if (auto it = m.find("type"); it != m.end() && it->is_string()) {
    type = it->get<std::string>();
  } else if (m.contains("merges")) {
    type = "BPE";  // old files leave the type out
  } else {
    return r.bad("model.type", "missing, and the model has no merges (kvscope reads BPE models)");
  }
  if (type != "BPE")
    return r.unsupported("model.type", "'" + type + "' is not supported (kvscope reads BPE models; WordPiece, "
                                       "Unigram and WordLevel are refused)");
  if (auto it = m.find("dropout"); it != m.end() && !it->is_null()) {
    if (!it->is_number()) return r.bad("model.dropout", "expected a number or null");
    if (it->get<double>() != 0.0)
      return r.unsupported("model.dropout", it->dump() + ": BPE dropout makes tokenization random; kvscope "
                                            "needs a deterministic tokenizer");
  }
  auto unk = r.str(m, "model", "unk_token", std::string());
  auto prefix = r.str(m, "model", "continuing_subword_prefix", std::string());
  auto suffix = r.str(m, "model", "end_of_word_suffix", std::string());
  auto fuse = r.boolean(m, "model", "fuse_unk", false);
  auto fallback = r.boolean(m, "model", "byte_fallback", false);
  auto ignore = r.boolean(m, "model", "ignore_merges", false);
  for (const Status& s : {unk.status(), prefix.status(), suffix.status(), fuse.status(), fallback.status(), ignore.status()})
    KVS_RETURN_IF_ERROR(s);
  prefix_s_ = *prefix;
  suffix_s_ = *suffix;
  fuseUnk_ = *fuse;
  byteFallback_ = *fallback;
  ignoreMerges_ = *ignore;

  auto vit = m.find("vocab");
  if (vit == m.end() || !vit->is_object())
    return r.bad("model.vocab", vit == m.end() ? "missing" : "expected an object, found " + typeName(*vit));
  vocab_.reserve(vit->size());
  int maxId = -1;
  for (const auto& [text, idJson] : vit->items()) {
    auto id = r.id(idJson, "model.vocab['" + displayableText(text) + "']");
    if (!id) return id.status();
    vocab_.emplace(text, *id);
    maxId = std::max(maxId, *id);
  }
  if (vocab_.empty()) return r.bad("model.vocab", "is empty");
  pieces_.assign(static_cast<size_t>(maxId) + 1, std::string());
  std::vector<bool> seen(pieces_.size(), false);
  for (const auto& [text, id] : vocab_) {
    if (seen[static_cast<size_t>(id)])
      return r.bad("model.vocab", "'" + displayableText(text) + "' and '" +
                                      displayableText(pieces_[static_cast<size_t>(id)]) + "' both have id " +
                                      std::to_string(id));
    seen[static_cast<size_t>(id)] = true;
    pieces_[static_cast<size_t>(id)] = text;
  }
  if (!unk->empty()) {
    auto it = vocab_.find(*unk);
    if (it == vocab_.end())
      return r.bad("model.unk_token", "'" + displayableText(*unk) + "' is not in model.vocab");
    unk_ = it->second;
    unkText_ = *unk;
  }

  auto mit = m.find("merges");
  if (mit == m.end() || !mit->is_array())
    return r.bad("model.merges", mit == m.end() ? "missing" : "expected an array, found " + typeName(*mit));
  merges_.reserve(mit->size());
  int rank = 0;
  for (size_t i = 0; i < mit->size(); ++i) {
    const json& e = (*mit)[i];
    const std::string path = "model.merges[" + std::to_string(i) + "]";
    std::string a, b;
    if (e.is_string()) {
      const std::string s = e.get<std::string>();
      if (s.rfind("#version", 0) == 0) continue;  // merges.txt's header line
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        return r.bad(path, "'" + displayableText(s) + "' is not two tokens separated by one space");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>();
      b = e[1].get<std::string>();
    } else {
      return r.bad(path, "expected \"a b\" or [\"a\", \"b\"]");
    }
    const auto ia = vocab_.find(a), ib = vocab_.find(b);
    if (ia == vocab_.end()) return r.bad(path, "'" + displayableText(a) + "' is not in model.vocab");
    if (ib == vocab_.end()) return r.bad(path, "'" + displayableText(b) + "' is not in model.vocab");
    // The merged token drops the right part's continuing_subword_prefix (BpeBuilder::build).
    const std::string bTail = b.size() >= prefix_s_.size() ? b.substr(prefix_s_.size()) : std::string();
    const auto ir = vocab_.find(a + bTail);
    if (ir == vocab_.end()) return r.bad(path, "'" + displayableText(a + bTail) + "' is not in model.vocab");
    merges_.add(ia->second, ib->second, rank++, ir->second, /*keepFirst=*/false);
  }
  mergeCount_ = static_cast<size_t>(rank);
  return Status::ok();
}

Expected<std::string> HfTokenizer::normalize(std::string s) const {
  for (const NormStep& n : norm_) {
    switch (n.kind) {
      case NormStep::Kind::Form: {
        auto t = tok::normalizeText(s, n.form);
        if (!t) return t.status();
        s = std::move(*t);
        break;
      }
      case NormStep::Kind::Prepend:
        if (!s.empty()) s = n.text + s;
        break;
      case NormStep::Kind::Replace: {
        auto spans = n.regex->split(s);
        if (!spans) return spans.status();
        std::string t;
        for (const Span& sp : *spans) t += sp.match ? n.text : s.substr(sp.begin, sp.end - sp.begin);
        s = std::move(t);
        break;
      }
    }
  }
  return s;
}

Status HfTokenizer::parseNormalizer(const json& j, const std::string& path, const Reader& r) {
  if (j.is_null()) return Status::ok();
  if (!j.is_object()) return r.bad(path, "expected an object or null, found " + typeName(j));
  auto type = r.str(j, path, "type");
  if (!type) return type.status();
  const std::string& t = *type;
  if (t == "Sequence") {
    auto it = j.find("normalizers");
    if (it == j.end() || !it->is_array()) return r.bad(path + ".normalizers", "expected an array");
    for (size_t i = 0; i < it->size(); ++i)
      KVS_RETURN_IF_ERROR(parseNormalizer((*it)[i], path + ".normalizers[" + std::to_string(i) + "]", r));
    return Status::ok();
  }
  NormStep s;
  if (t == "NFC" || t == "NFD" || t == "NFKC" || t == "NFKD") {
    s.form = t == "NFC" ? tok::NormalForm::Nfc : t == "NFD" ? tok::NormalForm::Nfd
             : t == "NFKC" ? tok::NormalForm::Nfkc : tok::NormalForm::Nfkd;
  } else if (t == "Prepend") {
    s.kind = NormStep::Kind::Prepend;
    auto p = r.str(j, path, "prepend");
    if (!p) return p.status();
    s.text = *p;
  } else if (t == "Replace") {
    s.kind = NormStep::Kind::Replace;
    auto re = r.pattern(j, path);
    if (!re) return re.status();
    s.regex = std::move(*re);
    auto c = r.str(j, path, "content");
    if (!c) return c.status();
    s.text = *c;
  } else {
    return r.unsupported(path + ".type", "normalizer '" + t + "' is not supported (kvscope reads NFC, NFD, NFKC, "
                                         "NFKD, Prepend, Replace and Sequence)");
  }
  norm_.push_back(std::move(s));
  normNames_.push_back(t);
  return Status::ok();
}

Status HfTokenizer::parsePreTokenizer(const json& j, const std::string& path, const Reader& r) {
  if (j.is_null()) return Status::ok();
  if (!j.is_object()) return r.bad(path, "expected an object or null, found " + typeName(j));
  auto type = r.str(j, path, "type");
  if (!type) return type.status();
  const std::string& t = *type;
  if (t == "Sequence") {
    auto it = j.find("pretokenizers");
    if (it == j.end() || !it->is_array()) return r.bad(path + ".pretokenizers", "expected an array");
    for (size_t i = 0; i < it->size(); ++i)
      KVS_RETURN_IF_ERROR(parsePreTokenizer((*it)[i], path + ".pretokenizers[" + std::to_string(i) + "]", r));
    return Status::ok();
  }
  PreStep s;
  if (t == "ByteLevel") {
    s.kind = PreStep::Kind::ByteLevel;
    auto aps = r.boolean(j, path, "add_prefix_space", true);
    auto ur = r.boolean(j, path, "use_regex", true);
    if (!aps) return aps.status();
    if (!ur) return ur.status();
    s.addPrefixSpace = *aps;
    s.useRegex = *ur;
    if (s.useRegex) {
      auto re = UnicodeRegex::compile(kByteLevelPattern, r.origin() + ": " + path);
      if (!re) return Status::internal(re.status().message());
      s.regex = std::move(*re);
    }
  } else if (t == "Metaspace") {
    s.kind = PreStep::Kind::Metaspace;
    auto rep = r.str(j, path, "replacement");
    if (!rep) return rep.status();
    if (tok::firstInvalidUtf8(*rep) != std::string::npos || rep->empty() ||
        tok::sequenceLength(static_cast<unsigned char>((*rep)[0])) != rep->size())
      return r.bad(path + ".replacement", "expected one character");
    s.replacement = *rep;
    auto scheme = r.str(j, path, "prepend_scheme", std::string("always"));
    if (!scheme) return scheme.status();
    if (*scheme == "always") s.prepend = Prepend::Always;
    else if (*scheme == "first") s.prepend = Prepend::First;
    else if (*scheme == "never") s.prepend = Prepend::Never;
    else return r.bad(path + ".prepend_scheme", "'" + *scheme + "'; expected always, first or never");
    // The older add_prefix_space: false means "never" (and contradicts any other scheme).
    if (auto it = j.find("add_prefix_space"); it != j.end() && it->is_boolean() && !it->get<bool>()) {
      if (j.contains("prepend_scheme") && s.prepend != Prepend::Never)
        return r.bad(path + ".add_prefix_space", "false does not match prepend_scheme '" + *scheme + "'");
      s.prepend = Prepend::Never;
    }
    auto split = r.boolean(j, path, "split", true);
    if (!split) return split.status();
    s.split = *split;
  } else if (t == "Split") {
    s.kind = PreStep::Kind::Split;
    auto re = r.pattern(j, path);
    if (!re) return re.status();
    s.regex = std::move(*re);
    auto b = r.str(j, path, "behavior");
    if (!b) return b.status();
    if (*b == "Removed") s.behavior = Behavior::Removed;
    else if (*b == "Isolated") s.behavior = Behavior::Isolated;
    else if (*b == "MergedWithPrevious") s.behavior = Behavior::MergedWithPrevious;
    else if (*b == "MergedWithNext") s.behavior = Behavior::MergedWithNext;
    else if (*b == "Contiguous") s.behavior = Behavior::Contiguous;
    else return r.bad(path + ".behavior", "'" + *b + "'; expected Removed, Isolated, MergedWithPrevious, "
                                            "MergedWithNext or Contiguous");
    auto inv = r.boolean(j, path, "invert", false);
    if (!inv) return inv.status();
    s.invert = *inv;
  } else if (t == "Digits") {
    s.kind = PreStep::Kind::Digits;
    auto ind = r.boolean(j, path, "individual_digits", false);
    if (!ind) return ind.status();
    // Rust's char::is_numeric (general category N), one by one or in runs.
    auto re = UnicodeRegex::compile(*ind ? R"(\p{N})" : R"(\p{N}+)", r.origin() + ": " + path);
    if (!re) return Status::internal(re.status().message());
    s.regex = std::move(*re);
  } else {
    return r.unsupported(path + ".type", "pre-tokenizer '" + t + "' is not supported (kvscope reads ByteLevel, "
                                         "Metaspace, Split, Digits and Sequence)");
  }
  pre_.push_back(std::move(s));
  preNames_.push_back(t);
  return Status::ok();
}

Status HfTokenizer::parsePostProcessor(const json& j, const std::string& path, const Reader& r) {
  if (j.is_null()) return Status::ok();
  if (!j.is_object()) return r.bad(path, "expected an object or null, found " + typeName(j));
  auto type = r.str(j, path, "type");
  if (!type) return type.status();
  const std::string& t = *type;
  if (t == "Sequence") {
    auto it = j.find("processors");
    if (it == j.end() || !it->is_array()) return r.bad(path + ".processors", "expected an array");
    for (size_t i = 0; i < it->size(); ++i)
      KVS_RETURN_IF_ERROR(parsePostProcessor((*it)[i], path + ".processors[" + std::to_string(i) + "]", r));
    return Status::ok();
  }
  postNames_.push_back(t);
  if (t == "ByteLevel") return Status::ok();  // trims offsets only
  std::vector<int> before, after;
  if (t == "TemplateProcessing") {
    auto single = j.find("single");
    if (single == j.end() || !single->is_array()) return r.bad(path + ".single", "expected an array");
    auto specials = j.find("special_tokens");
    bool seenA = false;
    for (size_t i = 0; i < single->size(); ++i) {
      const json& piece = (*single)[i];
      const std::string p = path + ".single[" + std::to_string(i) + "]";
      if (!piece.is_object() || piece.size() != 1) return r.bad(p, "expected {\"SpecialToken\": …} or {\"Sequence\": …}");
      const std::string kind = piece.begin().key();
      const json& body = piece.begin().value();
      if (!body.is_object()) return r.bad(p + "." + kind, "expected an object");
      auto name = r.str(body, p + "." + kind, "id");
      if (!name) return name.status();
      if (kind == "Sequence") {
        if (*name != "A" || seenA) return r.bad(p, "a single-sequence template holds sequence A once");
        seenA = true;
      } else if (kind == "SpecialToken") {
        if (specials == j.end() || !specials->is_object() || !specials->contains(*name))
          return r.bad(p, "special token '" + displayableText(*name) + "' is not in " + path + ".special_tokens");
        const json& st = (*specials)[*name];
        auto ids = st.find("ids");
        if (ids == st.end() || !ids->is_array())
          return r.bad(path + ".special_tokens['" + *name + "'].ids", "expected an array of ids");
        for (size_t k = 0; k < ids->size(); ++k) {
          auto id = r.id((*ids)[k], path + ".special_tokens['" + *name + "'].ids[" + std::to_string(k) + "]");
          if (!id) return id.status();
          (seenA ? after : before).push_back(*id);
        }
      } else {
        return r.bad(p, "'" + kind + "'; expected SpecialToken or Sequence");
      }
    }
    if (!seenA) return r.bad(path + ".single", "has no sequence A");
  } else if (t == "BertProcessing" || t == "RobertaProcessing") {
    for (const char* key : {"cls", "sep"}) {
      auto it = j.find(key);
      if (it == j.end() || !it->is_array() || it->size() != 2)
        return r.bad(path + "." + key, "expected [token, id]");
      auto id = r.id((*it)[1], path + "." + key + "[1]");
      if (!id) return id.status();
      (std::string(key) == "cls" ? before : after).push_back(*id);
    }
  } else {
    return r.unsupported(path + ".type", "post-processor '" + t + "' is not supported (kvscope reads "
                                         "TemplateProcessing, ByteLevel, BertProcessing, RobertaProcessing "
                                         "and Sequence)");
  }
  prefix_.insert(prefix_.begin(), before.begin(), before.end());
  suffix_.insert(suffix_.end(), after.begin(), after.end());
  return Status::ok();
}

Status HfTokenizer::parseDecoder(const json& j, const std::string& path, const Reader& r) {
  if (j.is_null()) return Status::ok();
  if (!j.is_object()) return r.bad(path, "expected an object or null, found " + typeName(j));
  auto type = r.str(j, path, "type");
  if (!type) return type.status();
  const std::string& t = *type;
  if (t == "Sequence") {
    auto it = j.find("decoders");
    if (it == j.end() || !it->is_array()) return r.bad(path + ".decoders", "expected an array");
    for (size_t i = 0; i < it->size(); ++i)
      KVS_RETURN_IF_ERROR(parseDecoder((*it)[i], path + ".decoders[" + std::to_string(i) + "]", r));
    return Status::ok();
  }
  DecStep s;
  if (t == "ByteLevel") {
    s.kind = DecStep::Kind::ByteLevel;
  } else if (t == "Metaspace") {
    s.kind = DecStep::Kind::Metaspace;
    auto rep = r.str(j, path, "replacement");
    if (!rep) return rep.status();
    s.replacement = *rep;
  } else if (t == "Replace") {
    s.kind = DecStep::Kind::Replace;
    auto re = r.pattern(j, path);
    if (!re) return re.status();
    s.regex = std::move(*re);
    auto c = r.str(j, path, "content");
    if (!c) return c.status();
    s.content = *c;
  } else if (t == "ByteFallback") {
    s.kind = DecStep::Kind::ByteFallback;
  } else if (t == "Fuse") {
    s.kind = DecStep::Kind::Fuse;
  } else if (t == "Strip") {
    s.kind = DecStep::Kind::Strip;
  } else {
    return r.unsupported(path + ".type", "decoder '" + t + "' is not supported (kvscope reads ByteLevel, "
                                         "Metaspace, Replace, ByteFallback, Fuse, Strip and Sequence)");
  }
  dec_.push_back(std::move(s));
  return Status::ok();
}

Status HfTokenizer::parseAdded(const json& list, const Reader& r) {
  if (list.is_null()) return Status::ok();
  if (!list.is_array()) return r.bad("added_tokens", "expected an array, found " + typeName(list));
  // Ids as AddedVocabulary::add_tokens gives them: the model's id when the content is in its
  // vocabulary, else the next free one from the vocabulary's size on (the file's "id" is only
  // checked by Hugging Face, with a warning).
  int nextId = static_cast<int>(vocab_.size());
  for (size_t i = 0; i < list.size(); ++i) {
    const json& e = list[i];
    const std::string path = "added_tokens[" + std::to_string(i) + "]";
    if (!e.is_object()) return r.bad(path, "expected an object, found " + typeName(e));
    AddedToken a;
    auto content = r.str(e, path, "content");
    if (!content) return content.status();
    a.content = *content;
    if (a.content.empty()) continue;  // ignored, as Hugging Face does
    for (auto [key, field, def] : {std::tuple{"single_word", &a.singleWord, false}, std::tuple{"lstrip", &a.lstrip, false},
                                   std::tuple{"rstrip", &a.rstrip, false}, std::tuple{"normalized", &a.normalized, true},
                                   std::tuple{"special", &a.special, false}}) {
      auto b = r.boolean(e, path, key, def);
      if (!b) return b.status();
      *field = *b;
    }
    if (auto it = addedIds_.find(a.content); it != addedIds_.end()) {
      // The same content again: the later entry's flags win, the id stays.
      for (AddedToken& old : added_)
        if (old.content == a.content) {
          a.id = old.id;
          old = a;
        }
      continue;
    }
    if (auto it = vocab_.find(a.content); it != vocab_.end()) a.id = it->second;
    else a.id = nextId++;
    addedIds_.emplace(a.content, a.id);
    added_.push_back(std::move(a));
  }
  return Status::ok();
}

Status HfTokenizer::applyConfig(const json& config, const Reader& cr) {
  if (!config.is_object()) return cr.bad("(top level)", "expected a JSON object, found " + typeName(config));
  // A special token in tokenizer_config.json: a string, {"content": …} (an AddedToken) or null.
  auto tokenId = [&](const char* key, std::optional<int>& out) -> Status {
    auto it = config.find(key);
    if (it == config.end() || it->is_null()) return Status::ok();
    std::string text;
    if (it->is_string()) {
      text = it->get<std::string>();
    } else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
      text = (*it)["content"].get<std::string>();
    } else {
      return cr.bad(key, "expected a string, {\"content\": …} or null");
    }
    const int id = lookup(text);
    if (id < 0) return cr.bad(key, "'" + displayableText(text) + "' is not a token of the tokenizer");
    out = id;
    return Status::ok();
  };
  KVS_RETURN_IF_ERROR(tokenId("bos_token", bos_));
  KVS_RETURN_IF_ERROR(tokenId("eos_token", eos_));
  // add_bos_token / add_eos_token, when given, decide BOS and EOS as transformers'
  // LlamaTokenizerFast.update_post_processor does; when absent the post-processor decides.
  for (const auto& [key, isBos] : {std::pair{"add_bos_token", true}, std::pair{"add_eos_token", false}}) {
    auto it = config.find(key);
    if (it == config.end() || it->is_null()) continue;
    if (!it->is_boolean()) return cr.bad(key, "expected true or false, found " + typeName(*it));
    const std::optional<int>& id = isBos ? bos_ : eos_;
    std::vector<int>& ids = isBos ? prefix_ : suffix_;
    if (id) ids.erase(std::remove(ids.begin(), ids.end(), *id), ids.end());
    if (it->get<bool>()) {
      if (!id) return cr.bad(key, std::string("is true, but ") + (isBos ? "bos_token" : "eos_token") + " is not set");
      if (isBos) ids.insert(ids.begin(), *id);
      else ids.push_back(*id);
    }
  }
  return Status::ok();
}

Expected<std::unique_ptr<Tokenizer>> HfTokenizer::build(const json& root, const Reader& r, const json* config,
                                                        const Reader& cr) {
  auto t = std::make_unique<HfTokenizer>();
  if (!root.is_object()) return r.bad("(top level)", "expected a JSON object, found " + typeName(root));
  auto model = root.find("model");
  if (model == root.end()) return r.bad("model", "missing");
  KVS_RETURN_IF_ERROR(t->parseModel(*model, r));
  static const json kNull;
  auto part = [&](const char* key) -> const json& {
    auto it = root.find(key);
    return it == root.end() ? kNull : *it;
  };
  KVS_RETURN_IF_ERROR(t->parseNormalizer(part("normalizer"), "normalizer", r));
  KVS_RETURN_IF_ERROR(t->parsePreTokenizer(part("pre_tokenizer"), "pre_tokenizer", r));
  KVS_RETURN_IF_ERROR(t->parsePostProcessor(part("post_processor"), "post_processor", r));
  KVS_RETURN_IF_ERROR(t->parseDecoder(part("decoder"), "decoder", r));
  KVS_RETURN_IF_ERROR(t->parseAdded(part("added_tokens"), r));

  // Patterns of the added tokens: normalized ones are matched in normalized text, by their
  // normalized form (AddedVocabulary::refresh_added_tokens).
  for (size_t i = 0; i < t->added_.size(); ++i) {
    AddedToken& a = t->added_[i];
    a.pattern = a.content;
    if (a.normalized) {
      auto n = t->normalize(a.content);
      if (!n) return n.status().withContext(r.origin() + ": added_tokens");
      a.pattern = *n;
    }
    if (a.pattern.empty()) continue;
    (a.normalized ? t->normalizedTrie_ : t->rawTrie_).insert(a.pattern, static_cast<int>(i));
  }
  t->addedOrder_.resize(t->added_.size());
  for (size_t i = 0; i < t->added_.size(); ++i) t->addedOrder_[i] = i;
  std::sort(t->addedOrder_.begin(), t->addedOrder_.end(),
            [&](size_t a, size_t b) { return t->added_[a].id < t->added_[b].id; });

  t->vocabSize_ = static_cast<int>(t->pieces_.size());
  for (const AddedToken& a : t->added_) t->vocabSize_ = std::max(t->vocabSize_, a.id + 1);
  for (int id : t->prefix_)
    if (id >= t->vocabSize_) return r.bad("post_processor", "special token id " + std::to_string(id) + " is outside the vocabulary");
  for (int id : t->suffix_)
    if (id >= t->vocabSize_) return r.bad("post_processor", "special token id " + std::to_string(id) + " is outside the vocabulary");
  // BOS / EOS without a config: what the post-processor puts first and last.
  if (!t->prefix_.empty()) t->bos_ = t->prefix_.front();
  if (!t->suffix_.empty()) t->eos_ = t->suffix_.back();
  if (config) KVS_RETURN_IF_ERROR(t->applyConfig(*config, cr));
  return std::unique_ptr<Tokenizer>(std::move(t));
}

// AddedVocabulary::find_matches: leftmost-longest matches of the added tokens; a special token
// when special tokens are not parsed, or a single_word token inside a word, stays text (and
// nothing else is looked for inside it); lstrip / rstrip take the white space beside it.
Status HfTokenizer::extractAdded(const Piece& in, const Trie& trie, bool parseSpecial, std::vector<Piece>& out) const {
  const std::string& s = in.text;
  if (trie.empty()) {
    if (!s.empty()) out.push_back(in);
    return Status::ok();
  }
  auto emit = [&](size_t b, size_t e, int token) {
    if (e <= b) return;
    out.push_back({s.substr(b, e - b), in.atStart && b == 0, token});
  };
  auto charBefore = [&](size_t pos) -> char32_t {  // the code point ending at pos
    size_t b = pos - 1;
    while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
    return tok::decodeAt(s, b);
  };
  size_t done = 0;  // start of text not yet emitted
  for (size_t pos = 0; pos < s.size();) {
    auto [len, index] = trie.longest(s, pos);
    if (index < 0) {
      pos += tok::sequenceLength(static_cast<unsigned char>(s[pos]));
      continue;
    }
    const AddedToken& a = added_[static_cast<size_t>(index)];
    size_t start = pos, stop = pos + len;
    bool skip = a.special && !parseSpecial;
    if (!skip && a.singleWord) {
      size_t after = stop;
      const bool wordBefore = start > 0 && tok::isWordChar(charBefore(start));
      const bool wordAfter = after < s.size() && tok::isWordChar(tok::decodeAt(s, after));
      skip = wordBefore || wordAfter;
    }
    if (skip) {
      pos = stop;
      continue;
    }
    if (a.lstrip) {
      while (start > done) {
        size_t b = start - 1;
        while (b > done && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
        size_t k = b;
        if (!tok::isWhiteSpace(tok::decodeAt(s, k))) break;
        start = b;
      }
    }
    if (a.rstrip) {
      while (stop < s.size()) {
        size_t k = stop;
        if (!tok::isWhiteSpace(tok::decodeAt(s, k))) break;
        stop = k;
      }
    }
    emit(done, start, -1);
    out.push_back({s.substr(start, stop - start), in.atStart && start == 0, a.id});
    done = stop;
    pos = stop;
  }
  emit(done, s.size(), -1);
  return Status::ok();
}

// Split behaviours (NormalizedString::split): which spans become pieces.
std::vector<std::pair<size_t, size_t>> applyBehavior(const std::vector<Span>& spans, Behavior b) {
  std::vector<std::pair<size_t, size_t>> out;
  switch (b) {
    case Behavior::Isolated:
      for (const Span& s : spans) out.emplace_back(s.begin, s.end);
      break;
    case Behavior::Removed:
      for (const Span& s : spans)
        if (!s.match) out.emplace_back(s.begin, s.end);
      break;
    case Behavior::Contiguous: {
      bool prev = false;
      for (const Span& s : spans) {
        if (!out.empty() && s.match == prev) out.back().second = s.end;
        else out.emplace_back(s.begin, s.end);
        prev = s.match;
      }
      break;
    }
    case Behavior::MergedWithPrevious: {
      bool prev = false;
      for (const Span& s : spans) {
        if (s.match && !prev && !out.empty()) out.back().second = s.end;
        else out.emplace_back(s.begin, s.end);
        prev = s.match;
      }
      break;
    }
    case Behavior::MergedWithNext: {
      bool prev = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->match && !prev && !out.empty()) out.back().first = it->begin;
        else out.emplace_back(it->begin, it->end);
        prev = it->match;
      }
      std::reverse(out.begin(), out.end());
      break;
    }
  }
  return out;
}

Status HfTokenizer::preTokenize(const PreStep& step, const Piece& in, std::vector<Piece>& out) const {
  auto push = [&](const std::string& text, size_t b, size_t e, bool startsPiece) {
    if (e > b) out.push_back({text.substr(b, e - b), in.atStart && startsPiece && b == 0, -1});
  };
  switch (step.kind) {
    case PreStep::Kind::ByteLevel: {
      std::string text = in.text;
      if (step.addPrefixSpace && (text.empty() || text[0] != ' ')) text = " " + text;
      std::vector<Span> spans{{0, text.size(), false}};
      if (step.useRegex) {
        auto sp = step.regex->split(text);
        if (!sp) return sp.status();
        spans = std::move(*sp);
      }
      for (const Span& s : spans)
        if (s.end > s.begin)
          out.push_back({tok::byteLevelEncode(std::string_view(text).substr(s.begin, s.end - s.begin)),
                         in.atStart && s.begin == 0, -1});
      return Status::ok();
    }
    case PreStep::Kind::Metaspace: {
      std::string text;
      for (char c : in.text) {
        if (c == ' ') text += step.replacement;
        else text += c;
      }
      const bool starts = text.compare(0, step.replacement.size(), step.replacement) == 0;
      if (!starts && (step.prepend == Prepend::Always || (step.prepend == Prepend::First && in.atStart)))
        text = step.replacement + text;
      if (!step.split) {
        push(text, 0, text.size(), true);
        return Status::ok();
      }
      // Split on the replacement, each one beginning a piece (MergedWithNext).
      size_t b = 0;
      for (size_t p = text.find(step.replacement, 1); p != std::string::npos;
           p = text.find(step.replacement, p + step.replacement.size())) {
        push(text, b, p, true);
        b = p;
      }
      push(text, b, text.size(), true);
      return Status::ok();
    }
    case PreStep::Kind::Split:
    case PreStep::Kind::Digits: {
      auto sp = step.regex->split(in.text);
      if (!sp) return sp.status();
      std::vector<Span> spans = std::move(*sp);
      if (step.invert)
        for (Span& s : spans) s.match = !s.match;
      for (const auto& [b, e] : applyBehavior(spans, step.kind == PreStep::Kind::Digits ? Behavior::Isolated : step.behavior))
        push(in.text, b, e, true);
      return Status::ok();
    }
  }
  return Status::ok();
}

// BPE::merge_word: characters (with the subword prefix / suffix), byte fallback <0xNN>, the
// unknown token (fused when fuse_unk), then the merges.
void HfTokenizer::bpe(const std::string& word, std::vector<int>& out) const {
  if (ignoreMerges_) {
    if (auto it = vocab_.find(word); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  std::vector<int> symbols;
  symbols.reserve(word.size());
  bool pendingUnk = false;
  for (size_t i = 0; i < word.size();) {
    const size_t len = tok::sequenceLength(static_cast<unsigned char>(word[i]));
    std::string s = word.substr(i, len);
    if (i > 0 && !prefix_s_.empty()) s = prefix_s_ + s;
    if (i + len >= word.size() && !suffix_s_.empty()) s += suffix_s_;
    i += len;
    if (auto it = vocab_.find(s); it != vocab_.end()) {
      if (pendingUnk) symbols.push_back(*unk_);
      pendingUnk = false;
      symbols.push_back(it->second);
      continue;
    }
    if (byteFallback_) {
      std::vector<int> bytes;
      for (char c : s) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "<0x%02X>", static_cast<unsigned>(static_cast<unsigned char>(c)));
        auto it = vocab_.find(std::string_view(hex));
        if (it == vocab_.end()) break;
        bytes.push_back(it->second);
      }
      if (bytes.size() == s.size()) {
        // Hugging Face adds these without flushing a pending unknown token first.
        symbols.insert(symbols.end(), bytes.begin(), bytes.end());
        continue;
      }
    }
    if (unk_) {
      if (pendingUnk && !fuseUnk_) symbols.push_back(*unk_);
      pendingUnk = true;
    }
    // No unknown token: the character is dropped, as Hugging Face does.
  }
  if (pendingUnk) symbols.push_back(*unk_);
  tok::applyMerges(symbols, merges_);
  out.insert(out.end(), symbols.begin(), symbols.end());
}

Expected<std::vector<int>> HfTokenizer::encodeImpl(std::string_view text, bool addSpecial, bool parseSpecial) const {
  KVS_RETURN_IF_ERROR(checkUtf8(text, "text to tokenize"));
  std::vector<Piece> pieces, next;
  if (!text.empty()) KVS_RETURN_IF_ERROR(extractAdded(Piece{std::string(text), true, -1}, rawTrie_, parseSpecial, pieces));
  // Normalize what is text, then split out the normalized added tokens.
  for (Piece& p : pieces) {
    if (p.token >= 0) {
      next.push_back(std::move(p));
      continue;
    }
    auto n = normalize(p.text);
    if (!n) return n.status();
    p.text = std::move(*n);
    KVS_RETURN_IF_ERROR(extractAdded(p, normalizedTrie_, parseSpecial, next));
  }
  pieces.swap(next);
  for (const PreStep& step : pre_) {
    next.clear();
    for (const Piece& p : pieces) {
      if (p.token >= 0) next.push_back(p);
      else KVS_RETURN_IF_ERROR(preTokenize(step, p, next));
    }
    pieces.swap(next);
  }
  std::vector<int> ids;
  if (addSpecial) ids = prefix_;
  for (const Piece& p : pieces) {
    if (p.token >= 0) ids.push_back(p.token);
    else if (!p.text.empty()) bpe(p.text, ids);
  }
  if (addSpecial) ids.insert(ids.end(), suffix_.begin(), suffix_.end());
  return ids;
}

// The decoder applied to the token alone, as if it stood inside a text: Metaspace turns its
// replacement into a space (Hugging Face drops it on a text's first token), Strip (which only
// trims a decoded text's ends) does nothing; ByteLevel and ByteFallback give bytes.
std::string HfTokenizer::tokenBytes(int id) const {
  if (id < 0 || id >= vocabSize_) return {};
  if (const AddedToken* a = addedById(id)) return a->content;
  if (static_cast<size_t>(id) >= pieces_.size()) return {};
  std::string s = pieces_[static_cast<size_t>(id)];
  for (const DecStep& d : dec_) {
    switch (d.kind) {
      case DecStep::Kind::ByteLevel: {
        std::string bytes;
        if (tok::byteLevelDecode(s, bytes)) s = std::move(bytes);
        break;  // a token with characters outside the alphabet stays as it is (ByteLevel::decode_chain)
      }
      case DecStep::Kind::Metaspace: {
        std::string t;
        for (size_t i = 0; i < s.size();) {
          if (!d.replacement.empty() && s.compare(i, d.replacement.size(), d.replacement) == 0) {
            t += ' ';
            i += d.replacement.size();
          } else {
            t += s[i++];
          }
        }
        s = std::move(t);
        break;
      }
      case DecStep::Kind::Replace: {
        if (tok::firstInvalidUtf8(s) != std::string::npos) break;
        auto spans = d.regex->split(s);
        if (!spans) break;
        std::string t;
        for (const Span& sp : *spans) t += sp.match ? d.content : s.substr(sp.begin, sp.end - sp.begin);
        s = std::move(t);
        break;
      }
      case DecStep::Kind::ByteFallback: {
        const auto hex = [](char c) -> int {
          if (c >= '0' && c <= '9') return c - '0';
          if (c >= 'A' && c <= 'F') return c - 'A' + 10;
          if (c >= 'a' && c <= 'f') return c - 'a' + 10;
          return -1;
        };
        if (s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>' && hex(s[3]) >= 0 && hex(s[4]) >= 0)
          s = std::string(1, static_cast<char>(hex(s[3]) * 16 + hex(s[4])));
        break;
      }
      case DecStep::Kind::Fuse:
      case DecStep::Kind::Strip:
        break;
    }
  }
  return s;
}

std::string HfTokenizer::describe() const {
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& x : v) s += (s.empty() ? "" : "+") + x;
    return s.empty() ? std::string("none") : s;
  };
  auto tokenName = [&](const std::optional<int>& id) {
    return id ? std::to_string(*id) + " '" + displayableText(tokenPiece(*id)) + "'" : std::string("none");
  };
  std::string s = "tokenizer.json BPE (Hugging Face tokenizers semantics), normalizer " + join(normNames_) +
                  ", pre-tokenizer " + join(preNames_) + ", post-processor " + join(postNames_) + ", " +
                  std::to_string(vocab_.size()) + " tokens + " +
                  std::to_string(added_.size()) + " added, " + std::to_string(mergeCount_) + " merges";
  if (byteFallback_) s += ", byte_fallback";
  if (ignoreMerges_) s += ", ignore_merges";
  s += ", BOS " + tokenName(bos_) + (addsBos() ? " (added)" : " (not added)");
  s += ", EOS " + tokenName(eos_) + (addsEos() ? " (added)" : " (not added)");
  return s;
}

Expected<std::string> readFile(const std::filesystem::path& p) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(p, ec);
  if (ec) return Status::ioError(p.string() + ": cannot read: " + ec.message());
  if (size > (static_cast<uintmax_t>(1) << 30))
    return Status::resourceLimit(p.string() + ": " + std::to_string(size) + " bytes; a tokenizer file over 1 GiB is refused");
  std::ifstream in(p, std::ios::binary);
  if (!in) return Status::ioError(p.string() + ": cannot open");
  std::string s(static_cast<size_t>(size), '\0');
  in.read(s.data(), static_cast<std::streamsize>(size));
  if (static_cast<uintmax_t>(in.gcount()) != size) return Status::ioError(p.string() + ": cannot read");
  return s;
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> tokenizerFromJson(std::string_view tokenizerJson, std::string_view origin,
                                                       std::string_view configJson, std::string_view configOrigin) {
  auto root = parseJson(tokenizerJson, origin);
  if (!root) return root.status();
  std::optional<json> config;
  if (!configJson.empty()) {
    auto c = parseJson(configJson, configOrigin);
    if (!c) return c.status();
    config = std::move(*c);
  }
  return HfTokenizer::build(*root, Reader(std::string(origin)), config ? &*config : nullptr,
                            Reader(std::string(configOrigin)));
}

Expected<std::unique_ptr<Tokenizer>> loadTokenizerJson(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path file = path;
  if (fs::is_directory(file, ec)) file /= "tokenizer.json";
  if (!fs::exists(file, ec))
    return Status::ioError(file.string() + ": no such file" +
                           (file.filename() == "tokenizer.json" ? " (a Hugging Face folder needs its tokenizer.json)" : ""));
  auto text = readFile(file);
  if (!text) return text.status();
  const fs::path configPath = file.parent_path() / "tokenizer_config.json";
  std::string config;
  if (fs::exists(configPath, ec)) {
    auto c = readFile(configPath);
    if (!c) return c.status();
    if (c->empty()) return Status::invalidArgument(configPath.string() + ": empty file (expected a JSON object)");
    config = std::move(*c);
  }
  return tokenizerFromJson(*text, file.string(), config, configPath.string());
}

}  // namespace kvscope
