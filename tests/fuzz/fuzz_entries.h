// SPDX-License-Identifier: GPL-3.0-or-later
// The entry points the libFuzzer targets drive, shared with the normal build's regression test
// (tests/core/reliability/fuzz_regression_test.cpp) so a committed crash input replays through
// exactly the same code. Each returns "" when the input was handled correctly and otherwise a
// description of the broken property (the fuzzer aborts on it, the test fails on it). Crashes,
// hangs and sanitizer reports are caught by the fuzzer itself.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/engine/engine.h"
#include "core/io/dump.h"
#include "core/io/mapping.h"
#include "core/modelfile/gguf.h"
#include "core/modelfile/safetensors.h"
#include "core/quant/plan.h"
#include "core/quant/spec.h"
#include "core/tokenize/tokenizer.h"
#include "tests/support/vocabulary_fixtures.h"

namespace kvscope::fuzz {

/// The name every fuzzed file or mapping is opened under, so messages can be checked for it.
inline constexpr const char* kOrigin = "fuzz-input";

/// The bytes as a file in memory (tmpfs /dev/shm when present), removed on destruction. The
/// dump reader opens paths, so this needs no in-memory entry point in core (docs/reliability.md).
/// Not a memfd: HDF5 1.10 resolves /proc/self/fd/N symlinks to their target name and fails.
class MemoryFile {
 public:
  MemoryFile(const uint8_t* data, size_t size) {
    const char* dir = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    std::string name = std::string(dir) + "/" + kOrigin + "-XXXXXX";
    const int fd = ::mkstemp(name.data());
    if (fd < 0) return;
    size_t done = 0;
    while (done < size) {
      ssize_t n = ::write(fd, data + done, size - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    ::close(fd);
    path_ = name;
  }
  ~MemoryFile() {
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string checkFailure(const Status& st, const std::string& what, const std::string& mustName) {
  if (st.isOk()) return "";
  if (st.message().empty()) return what + ": failed with an empty message";
  if (st.code() == StatusCode::Internal) return what + ": internal error: " + st.message();
  if (!mustName.empty() && st.message().find(mustName) == std::string::npos)
    return what + ": message does not name '" + mustName + "': " + st.message();
  return "";
}

/// Opens the bytes as a dump and reads every tensor of every layer of the first and last sequence.
inline std::string fuzzDump(const uint8_t* data, size_t size) {
  MemoryFile file(data, size);
  if (file.path().empty()) return "";  // no temporary file: nothing to test
  auto dump = Dump::open(file.path());
  if (!dump) return checkFailure(dump.status(), "open", file.path());
  const DumpInfo& info = (*dump)->info();
  if (info.layers <= 0 || info.kvHeads <= 0 || info.tokens <= 0 || info.headDim <= 0)
    return "open accepted a dump with an empty axis";
  if (info.hasQuery && (info.heads % info.kvHeads != 0 || info.queries > info.tokens || info.queries < 1))
    return "open accepted inconsistent query shape";
  std::vector<TensorKind> kinds = {TensorKind::Key, TensorKind::Value};
  if (info.hasQuery) kinds.push_back(TensorKind::Query);
  if (info.hasKeyPreRope) kinds.push_back(TensorKind::KeyPreRope);
  for (int seq : {0, info.sequences - 1}) {
    for (int l = 0; l < info.layers; ++l) {
      for (TensorKind kind : kinds) {
        auto t = (*dump)->read(l, kind, seq);
        if (!t) {
          std::string bad = checkFailure(t.status(), std::string("read ") + tensorKindName(kind), file.path());
          if (!bad.empty()) return bad;
          continue;
        }
        const bool q = kind == TensorKind::Query;
        if (t->heads != (q ? info.heads : info.kvHeads) || t->tokens != (q ? info.queries : info.tokens) ||
            t->dim != info.headDim || t->data.size() != static_cast<size_t>(t->heads * t->tokens * t->dim))
          return std::string("read ") + tensorKindName(kind) + ": tensor shape disagrees with info()";
        (void)scanNonFinite(*t);
      }
    }
  }
  // Optional extras must fail cleanly too.
  if (auto tok = (*dump)->tokens(0); !tok) {
    if (auto bad = checkFailure(tok.status(), "tokens", ""); !bad.empty()) return bad;
  }
  if (auto txt = (*dump)->tokenText(0); !txt) {
    if (auto bad = checkFailure(txt.status(), "token_text", ""); !bad.empty()) return bad;
  }
  if (info.hasLogits) {
    if (auto lg = (*dump)->logits(0); !lg) {
      if (auto bad = checkFailure(lg.status(), "logits", ""); !bad.empty()) return bad;
    }
  }
  return "";
}

/// Parses the bytes as a mapping; an accepted mapping must survive mappingToJson and re-parse
/// to the same JSON.
inline std::string fuzzMapping(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto m = parseMapping(text, kOrigin);
  if (!m) return checkFailure(m.status(), "parseMapping", kOrigin);
  const std::string once = mappingToJson(*m);
  auto again = parseMapping(once, kOrigin);
  if (!again) return "mappingToJson wrote what parseMapping rejects: " + again.status().message() + "\n" + once;
  const std::string twice = mappingToJson(*again);
  if (once != twice) return "mapping round trip changed:\n" + once + "\n" + twice;
  return "";
}

/// Parses the bytes as a spec string or a plan (§12; a plain spec is a one-part plan): each
/// accepted part's spec is validated against a few tensor shapes, the plan is resolved and
/// validated on 1 and 5 layers (refusals must explain themselves), and its canonical string must
/// re-parse to the same plan (and print the same again).
inline std::string fuzzSpec(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto plan = parsePlan(text);
  if (!plan) return checkFailure(plan.status(), "parsePlan", "");
  std::vector<const QuantSpec*> specs{&plan->base};
  for (const PlanOverride& o : plan->overrides) specs.push_back(&o.spec);
  for (const QuantSpec* spec : specs) {
    for (const SpecContext& ctx : {SpecContext{true, 0, 0, true}, SpecContext{true, 8, 64, true},
                                   SpecContext{false, 2, 48, false}, SpecContext{true, 1, 1, false}}) {
      Status st = validateSpec(*spec, ctx);
      if (auto bad = checkFailure(st, "validateSpec", ""); !bad.empty()) return bad;
    }
    const std::string canonical = toString(*spec);
    auto again = parseSpec(canonical);
    if (!again) return "toString gave '" + canonical + "', which parseSpec rejects: " + again.status().message();
    if (!(*again == *spec)) {
      std::string why = "'";  // built piecewise: GCC 12's -Wrestrict misreads "'" + std::string(…)
      why.append(text).append("' -> '").append(canonical).append("' re-parses to a different spec");
      return why;
    }
    if (toString(*again) != canonical) return "canonical string is not stable: '" + canonical + "'";
  }
  for (int layers : {1, 5}) {
    auto resolved = resolve(*plan, layers);
    if (!resolved) {
      if (auto bad = checkFailure(resolved.status(), "resolve", ""); !bad.empty()) return bad;
    } else if (resolved->size() != static_cast<size_t>(layers)) {
      return "resolve gave " + std::to_string(resolved->size()) + " specs for " + std::to_string(layers) + " layers";
    }
    Status st = validatePlan(*plan, SpecContext{true, 8, 64, true}, layers);
    if (auto bad = checkFailure(st, "validatePlan", ""); !bad.empty()) return bad;
  }
  const std::string canonical = toString(*plan);
  auto again = parsePlan(canonical);
  if (!again) return "toString gave plan '" + canonical + "', which parsePlan rejects: " + again.status().message();
  if (!(*again == *plan)) {
    std::string why = "'";
    why.append(text).append("' -> '").append(canonical).append("' re-parses to a different plan");
    return why;
  }
  if (toString(*again) != canonical) return "canonical plan string is not stable: '" + canonical + "'";
  return "";
}

/// Resolves the bytes as an engine string (core/engine/engine.h) for an unknown shape and three
/// head dims: refusals explain themselves; a string accepted for the unknown shape is accepted at
/// every shape unless the refusal names that head dim ("D = 96", as vLLM's int4 cache and
/// quanto's groups refuse), a string refused for the unknown shape is refused at every shape; an
/// accepted string resolves the same way twice and gives specs that parse and validate for the
/// shape.
inline std::string fuzzEngine(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto unknown = resolveEngine(text, {});
  if (auto bad = checkFailure(unknown.status(), "resolveEngine", ""); !bad.empty()) return bad;
  for (const KvShape& shape : {KvShape{128, 2, 2}, KvShape{96, 2, 2}, KvShape{64, 1, 1}}) {
    auto r = resolveEngine(text, shape);
    if (r.hasValue() != unknown.hasValue()) {
      const bool namesTheShape =
          !r && r.status().message().find("D = " + std::to_string(shape.headDim)) != std::string::npos;
      if (!namesTheShape) {
        return "accepted for one shape and refused for another: " +
               (r ? unknown.status().message() : r.status().message());
      }
    }
    if (!r) {
      if (auto bad = checkFailure(r.status(), "resolveEngine", ""); !bad.empty()) return bad;
      continue;
    }
    auto again = resolveEngine(text, shape);
    if (!again || again->key != r->key || again->value != r->value || again->notes != r->notes)
      return "resolving twice gave different results";
    for (const auto& [spec, isKey] : {std::pair{r->key, true}, std::pair{r->value, false}}) {
      auto parsed = parseSpec(spec);
      if (!parsed) return "engine gave '" + spec + "', which parseSpec rejects: " + parsed.status().message();
      const Status st = validateSpec(*parsed, SpecContext{isKey, shape.kvHeads, shape.headDim, true});
      if (!st.isOk()) return "engine gave '" + spec + "', invalid for its shape: " + st.message();
    }
  }
  return "";
}

/// Reads an accepted model file's weights: every tensor must lie inside the file with as many
/// bytes as its shape and type need; readable types dequantize (up to 2^20 values each), the
/// others are refused as Unsupported naming the file.
inline std::string checkWeight(const WeightSource& source, const std::string& name, size_t fileSize) {
  auto w = source.weight(name);
  if (!w) return checkFailure(w.status(), "weight '" + name + "'", source.path());
  if (w->bytes > fileSize) return "tensor '" + name + "' claims more bytes than the file has";
  const GgmlTypeInfo& info = ggmlTypeInfo(w->type);
  const int64_t n = w->elements();
  if (static_cast<uint64_t>(n / info.blockSize * info.typeSize) != w->bytes)
    return "tensor '" + name + "': " + std::to_string(w->bytes) + " bytes for " + std::to_string(n) + " values of " + info.name;
  if (info.dequantize == nullptr) {
    float one = 0;
    const Status st = dequantizeRows(*w, 0, 0, &one);
    if (st.code() != StatusCode::Unsupported) return "tensor '" + name + "' of an unreadable type was not refused";
    return checkFailure(st, "dequantizeRows", source.path());
  }
  if (n > (1 << 20)) return "";
  auto values = dequantize(*w);
  if (!values) return checkFailure(values.status(), "dequantize '" + name + "'", source.path());
  if (values->size() != static_cast<size_t>(n)) return "dequantize gave the wrong count";
  (void)countNonFinite(values->data(), n);
  return "";
}

/// Opens the bytes as a GGUF file; an accepted file must answer every typed getter for every
/// key (a value or a refusal naming the file and the key) and pass checkWeight for every tensor.
inline std::string fuzzGguf(const uint8_t* data, size_t size) {
  MemoryFile file(data, size);
  if (file.path().empty()) return "";
  auto g = GgufFile::open(file.path());
  if (!g) return checkFailure(g.status(), "GgufFile::open", file.path());
  const GgufFile& f = **g;
  if (f.version() != 2 && f.version() != 3) return "accepted version " + std::to_string(f.version());
  if (f.alignment() == 0 || (f.alignment() & (f.alignment() - 1)) != 0) return "accepted a bad alignment";
  for (const GgufEntry& e : f.entries()) {
    if (f.find(e.key) != &e.value) return "find('" + e.key + "') does not give its entry";
    const std::string& k = e.key;
    for (const Status& st : {f.getString(k).status(), f.getInt(k).status(), f.getFloat(k).status(), f.getBool(k).status(),
                             f.getStringArray(k).status(), f.getIntArray(k).status(), f.getFloatArray(k).status()}) {
      if (auto bad = checkFailure(st, "getter of '" + k + "'", file.path()); !bad.empty()) return bad;
      if (!st.isOk() && st.message().find("'" + k + "'") == std::string::npos)
        return "a getter's refusal does not name the key: " + st.message();
    }
  }
  for (const GgufTensorInfo& t : f.tensors()) {
    if (t.fileOffset < f.dataOffset() || t.fileOffset > size || t.bytes > size - t.fileOffset)
      return "tensor '" + t.name + "' lies outside the file";
    if (auto bad = checkWeight(f, t.name, size); !bad.empty()) return bad;
  }
  return "";
}

/// Opens the bytes as a .safetensors file; an accepted file's tensors must tile its data
/// section and pass checkWeight (F32/F16/BF16) or be refused as Unsupported.
inline std::string fuzzSafetensors(const uint8_t* data, size_t size) {
  MemoryFile file(data, size);
  if (file.path().empty()) return "";
  auto s = SafetensorsFile::open(file.path());
  if (!s) return checkFailure(s.status(), "SafetensorsFile::open", file.path());
  uint64_t expected = 0;
  for (const SafetensorsTensorInfo& t : (*s)->tensors()) {
    if (t.begin != expected || t.end < t.begin) return "accepted tensors that do not tile the data section";
    expected = t.end;
    auto w = (*s)->weight(t.name);
    if (!w) {
      if (w.status().code() != StatusCode::Unsupported) return "weight '" + t.name + "': " + w.status().message();
      if (auto bad = checkFailure(w.status(), "weight", file.path()); !bad.empty()) return bad;
      continue;
    }
    if (auto bad = checkWeight(**s, t.name, size); !bad.empty()) return bad;
  }
  if ((*s)->dataOffset() + expected != size) return "accepted a data section the tensors do not cover";
  return "";
}

/// Checks one encode() of `text`: invalid UTF-8 is refused naming the first bad offset; valid
/// text gives ids inside the vocabulary whose tokenText() is valid UTF-8 without NUL; when
/// `roundTrip` is set the tokens' bytes put together are exactly *roundTrip; with addSpecial a
/// tokenizer that adds BOS puts it first. `mayRefuse`: the vocabulary may lack what the text
/// needs (a refusal is then fine if it explains itself).
inline std::string checkEncode(const Tokenizer& t, std::string_view text, bool addSpecial, bool parseSpecial,
                               const std::string* roundTrip, bool mayRefuse) {
  auto ids = t.encode(text, addSpecial, parseSpecial);
  const Status utf8 = checkUtf8(text, "text to tokenize");
  if (!utf8.isOk()) {
    if (ids) return "accepted invalid UTF-8";
    if (ids.status().message() != utf8.message()) return "invalid UTF-8 refused as: " + ids.status().message();
    return "";
  }
  if (!ids) {
    if (!mayRefuse) return "refused valid text: " + ids.status().message();
    return checkFailure(ids.status(), "encode", "");
  }
  std::string bytes;
  for (int id : *ids) {
    if (id < 0 || id >= t.vocabSize()) return "id " + std::to_string(id) + " outside the vocabulary";
    const std::string shown = t.tokenText(id);
    if (!checkUtf8(shown, "tokenText").isOk() || shown.find('\0') != std::string::npos)
      return "tokenText(" + std::to_string(id) + ") is not displayable UTF-8";
    bytes += t.tokenBytes(id);
  }
  if (addSpecial && t.addsBos() && (ids->empty() || ids->front() != *t.bos())) return "BOS missing";
  if (roundTrip && bytes != *roundTrip) return "the tokens do not spell the text again";
  return "";
}

/// A fixed `llama` vocabulary (byte tokens, no user-defined ones) and a fixed `gpt2` one for
/// each pre-tokenizer, built once.
inline const Tokenizer& fuzzLlama() {
  static const std::unique_ptr<Tokenizer> t = std::move(tokenizerFromGguf(
      test::llamaVocabulary({{" ", -9}, {"  ", -3}, {"a", -5}, {"b", -5}, {"ab", -2}, {" a", -1}, {"he", -4},
                             {"ll", -4}, {"hell", -3}, {"hello", -1}, {" hello", -0.5f}, {"\xC3\xA9", -2}}),
      kOrigin)).value();
  return *t;
}
inline constexpr const char* kFuzzPre[] = {"default", "gpt-2", "llama-bpe", "qwen2", "smollm"};
inline const Tokenizer& fuzzGpt2(size_t pre) {
  static const std::vector<std::unique_ptr<Tokenizer>> all = [] {
    std::vector<std::unique_ptr<Tokenizer>> v;
    for (const char* p : kFuzzPre)
      v.push_back(std::move(tokenizerFromGguf(
          test::gpt2Vocabulary(p, {"hello", " world"},
                               {{" ", "w"}, {"o", "r"}, {"l", "d"}, {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"1", "2"},
                                {"12", "3"}, {"'", "s"}, {"\n", "\n"}, {" ", " "}, {"\xE4", "\xBD"}},
                               {{"<|endoftext|>", 3}}),
          kOrigin)).value());
    return v;
  }();
  return *all[pre % all.size()];
}

/// A GGUF vocabulary from lines: the model, the pre-tokenizer, then tokens; "m a b" is a
/// merge, "c x" a control token, "u x" a user-defined one.
inline VocabularyData fuzzVocabularyFromLines(std::string_view text) {
  VocabularyData v;
  size_t line = 0;
  for (size_t start = 0; start <= text.size(); ++line) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string s(text.substr(start, end - start));
    start = end + 1;
    if (line == 0) v.model = s;
    else if (line == 1) v.pre = s;
    else if (s.rfind("m ", 0) == 0) v.merges.push_back(s.substr(2));
    else if (s.rfind("c ", 0) == 0 || s.rfind("u ", 0) == 0) {
      v.tokens.push_back(s.substr(2));
      v.tokenTypes.push_back(s[0] == 'c' ? 3 : 4);
      continue;
    } else v.tokens.push_back(s);
    if (line >= 2 && s.rfind("m ", 0) != 0) v.tokenTypes.push_back(1);
  }
  return v;
}

inline constexpr const char* kFuzzText = "Hello w\xC3\xB6rld! 12345 <s> it's IT'S\n\n  tab\t\xF0\x9F\x98\x80 "
                                         "\xE4\xBD\xA0\xE5\xA5\xBD\xC2\x85<|endoftext|> end  ";

/// Tokenizes the bytes. The first byte picks the tokenizer: 0 the fixed `llama` vocabulary and
/// 1 the fixed `gpt2` one (the rest is the text: invalid UTF-8 must be refused naming its
/// offset, and the tokens must spell the text again), 2 a tokenizer.json read from the rest and
/// 3 a GGUF vocabulary read from the rest's lines (each must be refused with a message or
/// tokenize a fixed text and the rest into valid ids and displayable texts).
inline std::string fuzzTokenizer(const uint8_t* data, size_t size) {
  if (size == 0) return "";
  const unsigned mode = data[0] % 4, sub = data[0] / 4;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (mode) {
    case 0: {
      // SentencePiece: a space in front, and '▁' typed in the text reads back as a space.
      std::string expected = rest.empty() ? "" : " ";
      for (size_t i = 0; i < rest.size(); ++i) {
        if (rest.compare(i, 3, "\xE2\x96\x81") == 0) {
          expected += ' ';
          i += 2;
        } else {
          expected += rest[i];
        }
      }
      for (bool add : {false, true}) {
        const std::string bad = checkEncode(fuzzLlama(), rest, add, false, add ? nullptr : &expected, false);
        if (!bad.empty()) return bad;
      }
      return checkEncode(fuzzLlama(), rest, true, true, nullptr, false);
    }
    case 1: {
      const std::string expected(rest);
      for (bool parse : {false, true}) {
        const std::string bad = checkEncode(fuzzGpt2(sub), rest, false, parse, &expected, false);
        if (!bad.empty()) return std::string(kFuzzPre[sub % 5]) + ": " + bad;
      }
      return "";
    }
    case 2: {
      auto t = tokenizerFromJson(rest, kOrigin, sub % 2 ? R"({"add_bos_token": true})" : "", "config");
      if (!t) return checkFailure(t.status(), "tokenizerFromJson", "");
      for (std::string_view text : {std::string_view(kFuzzText), rest}) {
        const std::string bad = checkEncode(**t, text, true, sub % 4 < 2, nullptr, true);
        if (!bad.empty()) return bad;
      }
      (void)(*t)->describe();
      return "";
    }
    default: {
      auto t = tokenizerFromGguf(fuzzVocabularyFromLines(rest), kOrigin);
      if (!t) return checkFailure(t.status(), "tokenizerFromGguf", kOrigin);
      for (std::string_view text : {std::string_view(kFuzzText), rest}) {
        const std::string bad = checkEncode(**t, text, true, sub % 2 == 0, nullptr, true);
        if (!bad.empty()) return bad;
      }
      (void)(*t)->describe();
      return "";
    }
  }
}

}  // namespace kvscope::fuzz

/// Defines LLVMFuzzerTestOneInput for one of the entry points above: a broken property aborts
/// with its description, which libFuzzer records as a crash.
#define KVSCOPE_FUZZ_TARGET(entry)                                              \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {     \
    const std::string bad = ::kvscope::fuzz::entry(data, size);                 \
    if (!bad.empty()) {                                                         \
      std::fprintf(stderr, "kvscope fuzz property broken: %s\n", bad.c_str()); \
      std::abort();                                                             \
    }                                                                           \
    return 0;                                                                   \
  }
