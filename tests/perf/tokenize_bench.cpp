// SPDX-License-Identifier: GPL-3.0-or-later
// kvscope_tokenize_bench: encoding 100 KB of text with 150k-entry vocabularies (GGUF gpt2
// llama-bpe, tokenizer.json ByteLevel) and a 32k SentencePiece vocabulary (docs/performance.md,
// "Tokenizers"). The vocabularies are synthetic: random words whose every prefix is a token,
// built by one merge per letter, so a word of the text costs what a real one does.
#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>

#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/tokenize/tokenizer.h"
#include "tests/support/vocabulary_fixtures.h"

namespace kvscope {
namespace {

std::string randomWord(std::mt19937& g) {
  std::uniform_int_distribution<int> len(2, 9), letter(0, 25);
  std::string w;
  for (int i = len(g); i > 0; --i) w += static_cast<char>('a' + letter(g));
  return w;
}

// Words (half with a leading space, as GPT-2's pre-tokenizer leaves them) whose prefixes are
// tokens; `merges` builds each prefix from the previous one and a letter.
struct Words {
  std::vector<std::string> words;
  std::vector<std::pair<std::string, std::string>> merges;
  size_t tokens = 0;
};

Words makeWords(size_t vocabulary) {
  std::mt19937 g(11);
  Words w;
  std::unordered_set<std::string> known;
  for (int b = 0; b < 256; ++b) known.insert(std::string(1, static_cast<char>(b)));
  while (known.size() < vocabulary) {
    std::string word = (g() % 2 ? " " : "") + randomWord(g);
    w.words.push_back(word);
    for (size_t k = 2; k <= word.size(); ++k) {
      const std::string prefix = word.substr(0, k);
      if (known.insert(prefix).second) w.merges.emplace_back(word.substr(0, k - 1), word.substr(k - 1, 1));
    }
  }
  w.tokens = known.size();
  return w;
}

// 100 KB: mostly the vocabulary's words, some unknown ones, digits, punctuation, newlines and
// a little CJK.
std::string makeText(const std::vector<std::string>& words) {
  std::mt19937 g(13);
  std::string text;
  while (text.size() < 100 * 1024) {
    const unsigned r = g() % 100;
    if (r < 80) text += words[g() % words.size()];
    else if (r < 88) text += " " + randomWord(g);
    else if (r < 92) text += " " + std::to_string(g() % 100000);
    else if (r < 96) text += ".,;!?"[g() % 5];
    else if (r < 98) text += "\n\n";
    else text += " \xE4\xBD\xA0\xE5\xA5\xBD";
  }
  return text;
}

const Words& words150k() {
  static const Words w = makeWords(150000);
  return w;
}

void run(benchmark::State& state, const Tokenizer& t, const std::string& text) {
  size_t n = 0;
  for (auto _ : state) {
    auto ids = t.encode(text, true);
    if (!ids) state.SkipWithError(ids.status().message().c_str());
    n = ids ? ids->size() : 0;
    benchmark::DoNotOptimize(n);
  }
  state.counters["tokens"] = static_cast<double>(n);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(text.size()));
}

void BM_GgufGpt2LlamaBpe150k(benchmark::State& state) {
  const Words& w = words150k();
  VocabularyData v = test::gpt2Vocabulary("llama-bpe", {}, w.merges);
  v.bos = 0;
  auto t = tokenizerFromGguf(v, "bench");
  if (!t) {
    state.SkipWithError(t.status().message().c_str());
    return;
  }
  state.counters["vocabulary"] = (*t)->vocabSize();
  run(state, **t, makeText(w.words));
}
BENCHMARK(BM_GgufGpt2LlamaBpe150k)->Unit(benchmark::kMillisecond)->UseRealTime();

std::string byteLevelJson150k() {
  const Words& w = words150k();
  nlohmann::json vocab = nlohmann::json::object();
  int id = 0;
  for (int b = 0; b < 256; ++b) vocab[test::byteLevel(std::string(1, static_cast<char>(b)))] = id++;
  nlohmann::json merges = nlohmann::json::array();
  for (const auto& [a, b] : w.merges) {
    merges.push_back(test::byteLevel(a) + " " + test::byteLevel(b));
    vocab[test::byteLevel(a + b)] = id++;
  }
  const nlohmann::json j = {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}}};
  return j.dump();
}

// Reading the 150k tokenizer.json (parse, vocabulary and merge maps).
void BM_TokenizerJsonLoad150k(benchmark::State& state) {
  const std::string text = byteLevelJson150k();
  for (auto _ : state) {
    auto t = tokenizerFromJson(text, "bench.json");
    if (!t) state.SkipWithError(t.status().message().c_str());
    benchmark::DoNotOptimize(t);
  }
  state.counters["bytes"] = static_cast<double>(text.size());
}
BENCHMARK(BM_TokenizerJsonLoad150k)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_TokenizerJsonByteLevel150k(benchmark::State& state) {
  const Words& w = words150k();
  auto t = tokenizerFromJson(byteLevelJson150k(), "bench.json");
  if (!t) {
    state.SkipWithError(t.status().message().c_str());
    return;
  }
  state.counters["vocabulary"] = (*t)->vocabSize();
  run(state, **t, makeText(w.words));
}
BENCHMARK(BM_TokenizerJsonByteLevel150k)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_GgufLlama32k(benchmark::State& state) {
  const Words w = makeWords(32000 - 259);
  std::vector<test::SpmPiece> pieces;
  std::unordered_set<std::string> seen;
  float score = 0.0f;
  for (const auto& [a, b] : w.merges)
    if (seen.insert(a + b).second) pieces.push_back({a + b, score -= 0.001f, 1});
  for (char c = 'a'; c <= 'z'; ++c) pieces.push_back({std::string(1, c), -100.0f, 1});
  pieces.push_back({" ", -100.0f, 1});
  auto t = tokenizerFromGguf(test::llamaVocabulary(pieces), "bench");
  if (!t) {
    state.SkipWithError(t.status().message().c_str());
    return;
  }
  state.counters["vocabulary"] = (*t)->vocabSize();
  run(state, **t, makeText(w.words));
}
BENCHMARK(BM_GgufLlama32k)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace kvscope

BENCHMARK_MAIN();
