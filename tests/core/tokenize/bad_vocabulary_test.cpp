// SPDX-License-Identifier: GPL-3.0-or-later
// Bad GGUF vocabularies and bad text are refused with a message naming the file, the key and
// what was expected (issue 28, "Bad input").
#include <gtest/gtest.h>

#include <limits>

#include "core/tokenize/tokenizer.h"
#include "tests/support/vocabulary_fixtures.h"

namespace kvscope {
namespace {

using Merges = std::vector<std::pair<std::string, std::string>>;

// The refusal's message, or "accepted".
std::string refusal(const VocabularyData& v) {
  auto t = tokenizerFromGguf(v, "model.gguf");
  if (t) return "accepted";
  EXPECT_NE(t.status().code(), StatusCode::Internal);
  EXPECT_EQ(t.status().message().rfind("model.gguf: ", 0), 0u) << t.status().message();
  return t.status().message();
}

VocabularyData tiny() {
  VocabularyData v;
  v.model = "gpt2";
  v.pre = "gpt-2";
  v.tokens = {"a", "b", "ab"};
  v.merges = {"a b"};
  return v;
}

#define EXPECT_REFUSED(v, text) EXPECT_NE(refusal(v).find(text), std::string::npos) << refusal(v)

TEST(BadVocabulary, TheTinyVocabularyIsAccepted) { EXPECT_EQ(refusal(tiny()), "accepted"); }

TEST(BadVocabulary, Gpt2WithoutMerges) {
  VocabularyData v = tiny();
  v.merges.clear();
  EXPECT_REFUSED(v, "tokenizer.ggml.merges is missing or empty");
}

TEST(BadVocabulary, MergeNamingAnUnknownToken) {
  VocabularyData v = tiny();
  v.merges = {"a zz"};
  EXPECT_REFUSED(v, "tokenizer.ggml.merges[0] 'a zz': 'zz' is not in tokenizer.ggml.tokens");
  v.merges = {"b a"};  // both parts known, "ba" is not
  EXPECT_REFUSED(v, "'ba' is not in tokenizer.ggml.tokens");
  v.merges = {"ab"};
  EXPECT_REFUSED(v, "tokenizer.ggml.merges[0] 'ab' is not two tokens separated by a space");
  v.merges = {"a \xFF"};
  EXPECT_REFUSED(v, "tokenizer.ggml.merges[0]: invalid UTF-8 at byte offset 2 (0xFF)");
}

TEST(BadVocabulary, DuplicateTokens) {
  VocabularyData v = tiny();
  v.tokens.push_back("a");
  EXPECT_REFUSED(v, "tokenizer.ggml.tokens[3] 'a' duplicates tokenizer.ggml.tokens[0]");
}

TEST(BadVocabulary, IdsOutOfRange) {
  VocabularyData v = test::llamaVocabulary({});
  v.bos = 300;
  EXPECT_REFUSED(v, "tokenizer.ggml.bos_token_id = 300 is outside the vocabulary (259 tokens)");
  v.bos.reset();
  v.eos = -1;
  EXPECT_REFUSED(v, "tokenizer.ggml.eos_token_id = -1 is outside the vocabulary");
  v.eos.reset();
  v.unk = 259;
  EXPECT_REFUSED(v, "tokenizer.ggml.unknown_token_id = 259");
}

TEST(BadVocabulary, AddBosWithoutABosToken) {
  VocabularyData v;
  v.model = "llama";
  v.tokens = {"a"};  // llama.cpp's default BOS id 1 does not fit: no BOS
  EXPECT_REFUSED(v, "tokenizer.ggml.add_bos_token is true, but tokenizer.ggml.bos_token_id is not set");
  v.addBos = false;
  EXPECT_EQ(refusal(v), "accepted");
}

TEST(BadVocabulary, ArraysOfDifferentLengths) {
  VocabularyData v = tiny();
  v.scores = {0.0f, 1.0f};
  EXPECT_REFUSED(v, "tokenizer.ggml.scores has 2 entries for 3 tokens");
  v.scores.clear();
  v.tokenTypes = {1, 1, 1, 1};
  EXPECT_REFUSED(v, "tokenizer.ggml.token_type has 4 entries for 3 tokens");
}

TEST(BadVocabulary, InvalidUtf8AndNonFiniteScores) {
  VocabularyData v = tiny();
  v.tokens[1] = "b\xC3";
  EXPECT_REFUSED(v, "tokenizer.ggml.tokens[1]: invalid UTF-8 at byte offset 1 (0xC3)");
  VocabularyData w = test::llamaVocabulary({{"x", 0}});
  w.scores.back() = std::numeric_limits<float>::quiet_NaN();
  EXPECT_REFUSED(w, "tokenizer.ggml.scores[259] is not finite");
}

TEST(BadVocabulary, UnknownModelAndPreTokenizerAreNamed) {
  VocabularyData v = tiny();
  v.model = "bert";
  EXPECT_REFUSED(v, "tokenizer.ggml.model 'bert' is not supported");
  v = tiny();
  v.pre = "foo-bpe";
  const std::string m = refusal(v);
  EXPECT_NE(m.find("tokenizer.ggml.pre 'foo-bpe' is not supported"), std::string::npos) << m;
  EXPECT_NE(m.find("llama-bpe"), std::string::npos) << m;  // and lists what is known
  v = tiny();
  v.tokens.clear();
  EXPECT_REFUSED(v, "tokenizer.ggml.tokens is missing or empty");
}

TEST(BadText, InvalidUtf8IsRefusedNamingTheByteOffset) {
  auto t = tokenizerFromGguf(tiny(), "model.gguf");
  ASSERT_TRUE(t);
  for (const auto& [text, offset] : {std::pair<std::string, std::string>{"abc\xC3", "3 (0xC3)"},
                                     {"a\xC0\x80", "1 (0xC0)"},          // overlong NUL
                                     {"ab\xED\xA0\x80", "2 (0xED)"},     // a surrogate
                                     {"\xF4\x90\x80\x80", "0 (0xF4)"},   // past U+10FFFF
                                     {"\x80", "0 (0x80)"}}) {
    auto ids = (*t)->encode(text, true);
    ASSERT_FALSE(ids) << offset;
    EXPECT_EQ(ids.status().message(), "text to tokenize: invalid UTF-8 at byte offset " + offset);
  }
}

}  // namespace
}  // namespace kvscope
