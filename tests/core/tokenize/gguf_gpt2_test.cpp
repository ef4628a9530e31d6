// SPDX-License-Identifier: GPL-3.0-or-later
// GGUF `gpt2` (byte-level BPE) vocabularies tokenize as llama.cpp's llm_tokenizer_bpe_session
// (src/llama-vocab.cpp): the pre-tokenizer regexes llm_tokenizer_bpe picks for
// tokenizer.ggml.pre split the text into words (unicode_regex_split, src/unicode.cpp), each
// word is byte-level encoded and merged lowest rank first (leftmost on ties); llama-bpe sets
// ignore_merges. The vocabularies are gpt2Vocabulary's: byte b is token b, then the listed
// tokens, then merge results; each expected segmentation is worked out in the comments.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/tokenize/tokenizer.h"
#include "tests/support/vocabulary_fixtures.h"

namespace kvscope {
namespace {

using test::gpt2Vocabulary;
using test::tokenIds;
using Merges = std::vector<std::pair<std::string, std::string>>;

std::unique_ptr<Tokenizer> make(const VocabularyData& v) {
  auto t = tokenizerFromGguf(v, "model.gguf");
  EXPECT_TRUE(t) << t.status().message();
  return t ? std::move(*t) : nullptr;
}

std::vector<int> encode(const VocabularyData& v, std::string_view text, bool addSpecial = false,
                        bool parseSpecial = false) {
  auto t = make(v);
  if (!t) return {};
  auto ids = t->encode(text, addSpecial, parseSpecial);
  EXPECT_TRUE(ids) << ids.status().message();
  return ids ? *ids : std::vector<int>{};
}

VocabularyData withPre(VocabularyData v, std::string pre) {
  v.pre = std::move(pre);
  return v;
}

TEST(GgufGpt2, LowerRankMergesFirstWhateverThePairsFrequency) {
  const VocabularyData v = gpt2Vocabulary("gpt-2", {}, Merges{{"a", "b"}, {"a", "a"}});
  // "aaab": pairs aa (rank 1) twice, ab (rank 0) once: ab merges first → a a ab; then aa → aa ab.
  EXPECT_EQ(encode(v, "aaab"), tokenIds(v, {"aa", "ab"}));
  // "aab": ab first → a ab, and a+ab has no merge.
  EXPECT_EQ(encode(v, "aab"), tokenIds(v, {"a", "ab"}));
}

TEST(GgufGpt2, EqualRanksMergeTheLeftmostPairFirst) {
  const VocabularyData v = gpt2Vocabulary("gpt-2", {}, Merges{{"a", "a"}});
  // "aaa": aa at 0 and at 1, same rank: the left one merges, leaving aa + a.
  EXPECT_EQ(encode(v, "aaa"), tokenIds(v, {"aa", "a"}));
}

TEST(GgufGpt2, IgnoreMergesMakesAWordOfTheVocabularyOneToken) {
  VocabularyData v = gpt2Vocabulary("llama-bpe", {"abc"}, Merges{{"a", "b"}});
  // llama-bpe (ignore_merges): "abc" is a token, so it is one token although no merge makes it.
  EXPECT_EQ(encode(v, "abc"), tokenIds(v, {"abc"}));
  EXPECT_EQ(encode(v, "abd"), tokenIds(v, {"ab", "d"}));
  // gpt-2 has no ignore_merges: the merges decide, a+b then nothing.
  EXPECT_EQ(encode(withPre(v, "gpt-2"), "abc"), tokenIds(v, {"ab", "c"}));
}

TEST(GgufGpt2, DigitsSplitAsEachPreTokenizerSays) {
  const VocabularyData v =
      gpt2Vocabulary("gpt-2", {}, Merges{{"1", "2"}, {"12", "3"}, {"4", "5"}, {"3", "4"}, {"123", "45"}});
  // One word "12345" (gpt-2's ` ?\p{N}+`): 1+2 (r0), 12+3 (r1), 4+5 (r2), 123+45 (r4); 3+4 (r3) went stale.
  EXPECT_EQ(encode(v, "12345"), tokenIds(v, {"12345"}));
  // llama-bpe: \p{N}{1,3} → "123" "45"; both are tokens (ignore_merges or not).
  EXPECT_EQ(encode(withPre(v, "llama-bpe"), "12345"), tokenIds(v, {"123", "45"}));
  // … and "1234567" → "123" "456" "7": 456 → 4+5 (r2) then 45+6 has no merge.
  EXPECT_EQ(encode(withPre(v, "llama-bpe"), "1234567"), tokenIds(v, {"123", "45", "6", "7"}));
  // qwen2 and smollm: every digit alone.
  EXPECT_EQ(encode(withPre(v, "qwen2"), "12345"), tokenIds(v, {"1", "2", "3", "4", "5"}));
  EXPECT_EQ(encode(withPre(v, "smollm"), "12345"), tokenIds(v, {"1", "2", "3", "4", "5"}));
  // default: GPT-2's words, then digit runs, then runs of three ASCII digits: "123" "45".
  EXPECT_EQ(encode(withPre(v, "default"), "12345"), tokenIds(v, {"123", "45"}));
}

TEST(GgufGpt2, ContractionsAreCaseInsensitiveForLlamaBpeOnly) {
  const VocabularyData v = gpt2Vocabulary("gpt-2", {}, Merges{{"I", "T"}, {"'", "S"}, {"'", "s"}, {"i", "t"}});
  // gpt-2: "IT" "'" "S" " it" "'s" ('S is no contraction there); " it" → Ġ + it.
  EXPECT_EQ(encode(v, "IT'S it's"), tokenIds(v, {"IT", "'", "S", " ", "it", "'s"}));
  // llama-bpe: (?i:'s|…) → "IT" "'S" " it" "'s".
  EXPECT_EQ(encode(withPre(v, "llama-bpe"), "IT'S it's"), tokenIds(v, {"IT", "'S", " ", "it", "'s"}));
}

TEST(GgufGpt2, CjkWordsMergeTheirBytes) {
  // 你 = E4 BD A0, 好 = E5 A5 BD.
  const VocabularyData v = gpt2Vocabulary(
      "llama-bpe", {}, Merges{{"\xE4", "\xBD"}, {"\xE4\xBD", "\xA0"}, {"\xE5", "\xA5"}, {"\xE5\xA5", "\xBD"}});
  // Words "hi" and " 你好" ([^\r\n\p{L}\p{N}]?\p{L}+); the second is Ġ + six bytes → Ġ 你 好.
  EXPECT_EQ(encode(v, "hi \xE4\xBD\xA0\xE5\xA5\xBD"), tokenIds(v, {"h", "i", " ", "\xE4\xBD\xA0", "\xE5\xA5\xBD"}));
}

TEST(GgufGpt2, EmojiIsFourBytesAndItsTokensShowAsBytes) {
  // (A gpt2 vocabulary needs merges; this one has one that never applies.)
  const VocabularyData w = gpt2Vocabulary("gpt-2", {}, Merges{{"x", "y"}});
  // "a😀!": words "a" and "😀!" (one run of non-letters, non-digits); no merges apply.
  const std::vector<int> ids = encode(w, "a\xF0\x9F\x98\x80!");
  EXPECT_EQ(ids, (std::vector<int>{'a', 0xF0, 0x9F, 0x98, 0x80, '!'}));  // byte b is token b here
  EXPECT_EQ(make(w)->tokenTexts(ids), (std::vector<std::string>{"a", "<0xF0>", "<0x9F>", "<0x98>", "<0x80>", "!"}));
  // With merges that rebuild it, the emoji is one token and reads as itself.
  const VocabularyData e = gpt2Vocabulary(
      "gpt-2", {}, Merges{{"\xF0", "\x9F"}, {"\x98", "\x80"}, {"\xF0\x9F", "\x98\x80"}});
  auto t = make(e);
  const std::vector<int> ids2 = *t->encode("\xF0\x9F\x98\x80", false);
  ASSERT_EQ(ids2.size(), 1u);
  EXPECT_EQ(t->tokenText(ids2[0]), "\xF0\x9F\x98\x80");
}

TEST(GgufGpt2, SpacesAndNewlinesFollowTheWhiteSpaceRules) {
  const VocabularyData v = gpt2Vocabulary("gpt-2", {}, Merges{{" ", " "}, {" ", "b"}, {"\n", "\n"}});
  // \s+(?!\S) leaves the last space to the next word: "a" " " " b" (as one word "  b" would be ĠĠ b).
  EXPECT_EQ(encode(v, "a  b"), tokenIds(v, {"a", " ", " b"}));
  EXPECT_EQ(encode(v, "  b"), tokenIds(v, {" ", " b"}));
  // Trailing spaces stay together.
  EXPECT_EQ(encode(v, "a  "), tokenIds(v, {"a", "  "}));
  // gpt-2 splits newlines one by one before a letter; llama-bpe's \s*[\r\n]+ keeps them together.
  EXPECT_EQ(encode(v, "a\n\nb"), tokenIds(v, {"a", "\n", "\n", "b"}));
  EXPECT_EQ(encode(withPre(v, "llama-bpe"), "a\n\nb"), tokenIds(v, {"a", "\n\n", "b"}));
  EXPECT_EQ(encode(withPre(v, "llama-bpe"), "a  b"), tokenIds(v, {"a", " ", " b"}));
}

TEST(GgufGpt2, NextLineIsWhiteSpaceAsInLlamaCppsTables) {
  // U+0085 (C2 85) is White_Space for llama.cpp (and Oniguruma, Rust) but not for PCRE2's \s:
  // gpt-2 then splits "\u0085\u0085a" into NEL | NEL | a, not NEL NEL | a.
  const VocabularyData v = gpt2Vocabulary("gpt-2", {}, Merges{{"\xC2", "\x85"}, {"\xC2\x85", "\xC2\x85"}});
  EXPECT_EQ(encode(v, "\xC2\x85\xC2\x85" "a"), tokenIds(v, {"\xC2\x85", "\xC2\x85", "a"}));
}

TEST(GgufGpt2, SpecialTokensInText) {
  const VocabularyData v = gpt2Vocabulary("gpt-2", {}, Merges{{"x", "y"}},
                                          {{"<|endoftext|>", 3}, {"<|im_end|>", 1}, {"<tool>", 4}});
  const int eot = test::tokenId(v, "<|endoftext|>");
  EXPECT_EQ(encode(v, "x<|endoftext|>", false, true), (std::vector<int>{'x', eot}));
  // Not parsed: the text's characters (x < | endoftext | > → 14 byte tokens).
  const std::vector<int> asText = encode(v, "x<|endoftext|>");
  EXPECT_EQ(asText.size(), 14u);
  EXPECT_EQ(std::count(asText.begin(), asText.end(), eot), 0);
  // "<|im_end|>" is a normal token in this file, but llama.cpp's loader makes it a control token
  // by its text: parsed only with parse_special.
  const int imEnd = test::tokenId(v, "<|im_end|>");
  EXPECT_EQ(encode(v, "<|im_end|>", false, true), (std::vector<int>{imEnd}));
  EXPECT_EQ(encode(v, "<|im_end|>").size(), 10u);
  // A user-defined token is always split out.
  EXPECT_EQ(encode(v, "a<tool>b"), (std::vector<int>{'a', test::tokenId(v, "<tool>"), 'b'}));
}

TEST(GgufGpt2, BosAndEosDefaultsFollowLlamaCpp) {
  VocabularyData v = gpt2Vocabulary("llama-bpe", {}, Merges{{"x", "y"}}, {{"<|begin_of_text|>", 3}, {"<|end_of_text|>", 3}});
  v.bos = test::tokenId(v, "<|begin_of_text|>");
  v.eos = test::tokenId(v, "<|end_of_text|>");
  // llama-bpe adds BOS by default; gpt-2 does not; add_eos_token adds EOS.
  EXPECT_EQ(encode(v, "a", true), (std::vector<int>{*v.bos, 'a'}));
  EXPECT_EQ(encode(withPre(v, "gpt-2"), "a", true), (std::vector<int>{'a'}));
  VocabularyData w = v;
  w.addBos = false;
  w.addEos = true;
  EXPECT_EQ(encode(w, "a", true), (std::vector<int>{'a', *v.eos}));
  EXPECT_EQ(encode(w, "a", false), (std::vector<int>{'a'}));
  // Without bos_token_id llama.cpp's BPE default is id 11.
  auto t = make(gpt2Vocabulary("gpt-2", {}, Merges{{"x", "y"}}));
  EXPECT_EQ(t->bos(), 11);
  EXPECT_EQ(t->eos(), 11);
  EXPECT_FALSE(t->addsBos());
}

TEST(GgufGpt2, CharactersOutsideTheVocabularyAreDroppedAsLlamaCppDoes) {
  VocabularyData v;
  v.model = "gpt2";
  v.pre = "gpt-2";
  v.tokens = {"a", "b", "ab"};
  v.merges = {"a b"};
  // "abc": c is not a token and a byte-level vocabulary has no one-byte token for it.
  EXPECT_EQ(encode(v, "abc"), (std::vector<int>{2}));
}

TEST(GgufGpt2, TokenTextDecodesTheByteLevelAlphabet) {
  const VocabularyData v = gpt2Vocabulary("gpt-2", {" hi", "\n"}, Merges{{"x", "y"}}, {{"<|endoftext|>", 3}});
  auto t = make(v);
  EXPECT_EQ(t->tokenText(test::tokenId(v, " hi")), " hi");
  EXPECT_EQ(t->tokenPiece(test::tokenId(v, " hi")), "\xC4\xA0hi");  // "Ġhi" as stored
  EXPECT_EQ(t->tokenText('\n'), "\n");
  EXPECT_EQ(t->tokenText(0xC3), "<0xC3>");
  EXPECT_EQ(t->tokenText(0), "<0x00>");
  EXPECT_EQ(t->tokenText(test::tokenId(v, "<|endoftext|>")), "<|endoftext|>");
  const std::string d = t->describe();
  EXPECT_NE(d.find("pre-tokenizer 'gpt-2'"), std::string::npos) << d;
  EXPECT_NE(d.find("1 merges"), std::string::npos) << d;
  EXPECT_EQ(t->kind(), TokenizerKind::GgufGpt2);
}

}  // namespace
}  // namespace kvscope
