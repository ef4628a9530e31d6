// SPDX-License-Identifier: GPL-3.0-or-later
// GGUF `llama` (SentencePiece) vocabularies tokenize as llama.cpp's llm_tokenizer_spm_session
// (src/llama-vocab.cpp): space prefix on the first text and after special tokens, ' ' → '▁',
// merges of the adjacent pair whose concatenation is the best-scoring token (leftmost on ties),
// byte fallback <0xNN>. Each expected segmentation is worked out by hand in the comments.
#include <gtest/gtest.h>

#include "core/tokenize/tokenizer.h"
#include "tests/support/vocabulary_fixtures.h"

namespace kvscope {
namespace {

using test::llamaVocabulary;
using test::SpmPiece;
using test::tokenIds;

std::unique_ptr<Tokenizer> make(const VocabularyData& v) {
  auto t = tokenizerFromGguf(v, "model.gguf");
  EXPECT_TRUE(t) << t.status().message();
  return t ? std::move(*t) : nullptr;
}

std::vector<int> encode(const Tokenizer& t, std::string_view text, bool addSpecial = false, bool parseSpecial = false) {
  auto ids = t.encode(text, addSpecial, parseSpecial);
  EXPECT_TRUE(ids) << ids.status().message();
  return ids ? *ids : std::vector<int>{};
}

constexpr int kBos = 1, kEos = 2, kUnk = 0;
int byteId(unsigned char b) { return 3 + b; }  // llamaVocabulary puts <0x00> at 3

TEST(GgufLlama, ByteFallbackForCharactersOutsideTheVocabulary) {
  const VocabularyData v = llamaVocabulary({{" a", -1.0f}});
  auto t = make(v);
  // "a\n" → " a\n" (space prefix) → "▁a\n": symbols ▁ a \n; only "▁a" is a token, so ▁+a merge;
  // "\n" is no token → <0x0A>. "é" (C3 A9) after it: two byte tokens.
  EXPECT_EQ(encode(*t, "a\n\xC3\xA9", true),
            (std::vector<int>{kBos, test::tokenId(v, " a"), byteId(0x0A), byteId(0xC3), byteId(0xA9)}));
}

TEST(GgufLlama, EqualScoresMergeTheLeftmostPairFirst) {
  VocabularyData v = llamaVocabulary({{"a", -5}, {"b", -5}, {"c", -5}, {"ab", -1}, {"bc", -1}});
  v.addSpacePrefix = false;
  auto t = make(v);
  // a b c: "ab" and "bc" both score -1; the left one (index 0) wins, then "ab"+"c" is no token.
  EXPECT_EQ(encode(*t, "abc"), tokenIds(v, {"ab", "c"}));
  // A better score wins over position: "bc" at -0.5 merges first, leaving a + bc.
  VocabularyData w = llamaVocabulary({{"a", -5}, {"b", -5}, {"c", -5}, {"ab", -1}, {"bc", -0.5f}});
  w.addSpacePrefix = false;
  EXPECT_EQ(encode(*make(w), "abc"), tokenIds(w, {"a", "bc"}));
}

TEST(GgufLlama, LeadingSpacesGetThePrefixSpaceAndMergeByScore) {
  const std::vector<SpmPiece> pieces = {{" ", -10}, {"  ", -2}, {"h", -10}, {"i", -10}, {"hi", -1}, {" hi", -0.5f}};
  const VocabularyData v = llamaVocabulary(pieces);
  // "  hi" → prefix → "▁▁▁hi": symbols ▁0 ▁1 ▁2 h3 i4. Queue: hi(-1) at 3, ▁▁(-2) at 0 and 1.
  // hi merges; then ▁+hi = "▁hi" (-0.5) merges at 2; then ▁▁ at 0 (tie with 1, leftmost) merges;
  // the entry at 1 is stale. Result: "▁▁", "▁hi".
  EXPECT_EQ(encode(*make(v), "  hi", true), (std::vector<int>{kBos, test::tokenId(v, "  "), test::tokenId(v, " hi")}));
  // Without the prefix (add_space_prefix false): "▁▁hi" → hi, then ▁hi at 1, leaving "▁", "▁hi".
  VocabularyData w = v;
  w.addSpacePrefix = false;
  EXPECT_EQ(encode(*make(w), "  hi"), tokenIds(w, {" ", " hi"}));
}

TEST(GgufLlama, OnlySpacesBecomeMetaspaceNotTabsOrNewlines) {
  const VocabularyData v = llamaVocabulary({{" x", -1}});
  // "x\ty" → "▁x\ty": ▁x merges; \t and y are bytes.
  EXPECT_EQ(encode(*make(v), "x\ty"),
            (std::vector<int>{test::tokenId(v, " x"), byteId('\t'), byteId('y')}));
}

TEST(GgufLlama, UnknownTokenWhenThereAreNoByteTokens) {
  const VocabularyData v = llamaVocabulary({{" ", -1}}, /*byteTokens=*/false);
  // " x": ▁ is a token, x is neither a token nor has <0x78> or a one-byte token "x": llama.cpp
  // would throw; kvscope writes <unk> as SentencePiece does.
  EXPECT_EQ(encode(*make(v), "x", true), (std::vector<int>{kBos, test::tokenId(v, " "), kUnk}));
}

TEST(GgufLlama, SpecialTokensInTextOnlyWithParseSpecialAndThenAPrefixSpaceFollows) {
  const VocabularyData v = llamaVocabulary({{"hi", -2}, {" hi", -1}, {"<tool>", 0, 4}});
  auto t = make(v);
  // parse_special: "<s>hi" → [<s>] then "hi" gets the space prefix (previous fragment special):
  // "▁hi" → h+i (-2), then ▁+hi (-1).
  EXPECT_EQ(encode(*t, "<s>hi", false, true), (std::vector<int>{kBos, test::tokenId(v, " hi")}));
  // Without it "<s>" is text: "▁<s>hi" → hi merges; ▁ (E2 96 81), <, s, > are bytes.
  EXPECT_EQ(encode(*t, "<s>hi"),
            (std::vector<int>{byteId(0xE2), byteId(0x96), byteId(0x81), byteId('<'), byteId('s'), byteId('>'),
                              test::tokenId(v, "hi")}));
  // A user-defined token is split out either way, and the text after it gets the prefix again.
  EXPECT_EQ(encode(*t, "<tool>hi"), (std::vector<int>{test::tokenId(v, "<tool>"), test::tokenId(v, " hi")}));
}

TEST(GgufLlama, BosAndEosFollowTheFile) {
  VocabularyData v = llamaVocabulary({{" a", -1}});
  EXPECT_EQ(encode(*make(v), "a", true), (std::vector<int>{kBos, test::tokenId(v, " a")}));
  EXPECT_EQ(encode(*make(v), "", true), (std::vector<int>{kBos}));  // llama.cpp: "" → [BOS]
  EXPECT_EQ(encode(*make(v), "", false), (std::vector<int>{}));
  v.addBos = false;
  v.addEos = true;
  auto t = make(v);
  EXPECT_FALSE(t->addsBos());
  EXPECT_TRUE(t->addsEos());
  EXPECT_EQ(encode(*t, "a", true), (std::vector<int>{test::tokenId(v, " a"), kEos}));
  EXPECT_EQ(t->bos(), kBos);
  EXPECT_EQ(t->eos(), kEos);
}

TEST(GgufLlama, TokenTextIsThePieceAsAUserReadsIt) {
  const VocabularyData v = llamaVocabulary({{" hi", -1}});
  auto t = make(v);
  EXPECT_EQ(t->tokenText(test::tokenId(v, " hi")), " hi");   // ▁ → space
  EXPECT_EQ(t->tokenText(byteId(0x0A)), "\n");                // a byte token is its byte
  EXPECT_EQ(t->tokenText(byteId(0xC3)), "<0xC3>");            // half a character: not UTF-8 alone
  EXPECT_EQ(t->tokenText(byteId(0x00)), "<0x00>");            // NUL cannot live in an HDF5 string
  EXPECT_EQ(t->tokenText(kBos), "<s>");                       // special tokens show their text
  EXPECT_EQ(t->tokenBytes(byteId(0xC3)), "\xC3");
  EXPECT_EQ(t->tokenPiece(test::tokenId(v, " hi")), "\xE2\x96\x81hi");
  EXPECT_EQ(t->tokenText(-1), "");
  // Only a byte-typed token is read as a byte; a normal token spelled like one stays as it is.
  const VocabularyData w = llamaVocabulary({{"<0x41>", 0, 1}}, /*byteTokens=*/false);
  EXPECT_EQ(make(w)->tokenText(3), "<0x41>");
  EXPECT_EQ(t->tokenText(t->vocabSize()), "");
}

TEST(GgufLlama, DescribeNamesKindSizeAndSpecialTokens) {
  auto t = make(llamaVocabulary({{" hi", -1}}));
  const std::string d = t->describe();
  EXPECT_NE(d.find("GGUF llama (SentencePiece"), std::string::npos) << d;
  EXPECT_NE(d.find("260 tokens"), std::string::npos) << d;
  EXPECT_NE(d.find("BOS 1 '<s>' (added)"), std::string::npos) << d;
  EXPECT_EQ(t->kind(), TokenizerKind::GgufLlama);
  EXPECT_EQ(t->vocabSize(), 260);
}

}  // namespace
}  // namespace kvscope
