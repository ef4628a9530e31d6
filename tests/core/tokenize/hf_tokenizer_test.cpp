// SPDX-License-Identifier: GPL-3.0-or-later
// tokenizer.json files tokenize as Hugging Face `tokenizers` does (tokenizers/src): added
// tokens first (tokenizer/added_vocabulary.rs), then the normalizer, the pre-tokenizer
// (pre_tokenizers/metaspace.rs, byte_level.rs, split.rs), the BPE model (models/bpe) and the
// post-processor (processors/template.rs). The files are written here; each expected
// segmentation is worked out in the comments.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/tokenize/tokenizer.h"
#include "tests/support/test_support.h"
#include "tests/support/vocabulary_fixtures.h"

namespace kvscope {
namespace {

using json = nlohmann::json;
using Merges = std::vector<std::pair<std::string, std::string>>;

const std::string kMeta = "\xE2\x96\x81";  // '▁'

json bpeModel(const std::vector<std::string>& vocab, const Merges& merges) {
  json v = json::object();
  for (size_t i = 0; i < vocab.size(); ++i) v[vocab[i]] = i;
  json m = json::array();
  for (const auto& [a, b] : merges) m.push_back(json::array({a, b}));
  return {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"fuse_unk", false},
          {"byte_fallback", false}, {"vocab", v}, {"merges", m}};
}

json added(int id, const std::string& content, bool special, bool normalized = false) {
  return {{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
          {"normalized", normalized}, {"special", special}};
}

json tokenizerJson(const json& model) {
  return {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", json::array()},
          {"normalizer", nullptr}, {"pre_tokenizer", nullptr}, {"post_processor", nullptr},
          {"decoder", nullptr}, {"model", model}};
}

std::unique_ptr<Tokenizer> make(const json& j, const std::string& config = "") {
  auto t = tokenizerFromJson(j.dump(), "tokenizer.json", config, "tokenizer_config.json");
  EXPECT_TRUE(t) << t.status().message();
  return t ? std::move(*t) : nullptr;
}

std::string refusal(const std::string& text, const std::string& config = "") {
  auto t = tokenizerFromJson(text, "tokenizer.json", config, "tokenizer_config.json");
  if (t) return "accepted";
  EXPECT_NE(t.status().code(), StatusCode::Internal);
  return t.status().message();
}

std::vector<int> encode(const Tokenizer& t, std::string_view text, bool addSpecial = false, bool parseSpecial = true) {
  auto ids = t.encode(text, addSpecial, parseSpecial);
  EXPECT_TRUE(ids) << ids.status().message();
  return ids ? *ids : std::vector<int>{};
}

// A SentencePiece-like vocabulary: <unk> <s> </s> ▁ H i ▁▁ Hi ▁Hi, merges ▁+▁ (0), H+i (1), ▁+Hi (2).
enum { kUnk, kBos, kEos, kSp, kH, kI, kSpSp, kHi, kSpHi };
json spmLike() {
  json j = tokenizerJson(bpeModel({"<unk>", "<s>", "</s>", kMeta, "H", "i", kMeta + kMeta, "Hi", kMeta + "Hi"},
                                  Merges{{kMeta, kMeta}, {"H", "i"}, {kMeta, "Hi"}}));
  j["added_tokens"] = json::array({added(0, "<unk>", true), added(1, "<s>", true), added(2, "</s>", true)});
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                                 {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
                         {"pair", json::array()},
                         {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}};
  return j;
}

json metaspace(const std::string& scheme, bool split = false) {
  json j = spmLike();
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", kMeta}, {"prepend_scheme", scheme}, {"split", split}};
  j["decoder"] = {{"type", "Metaspace"}, {"replacement", kMeta}, {"prepend_scheme", scheme}, {"split", split}};
  return j;
}

json legacy() {
  json j = spmLike();
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers", json::array({{{"type", "Prepend"}, {"prepend", kMeta}},
                                                  {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMeta}}})}};
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", kMeta}}}, {"content", " "}},
                                            {{"type", "ByteFallback"}}, {{"type", "Fuse"}},
                                            {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}};
  return j;
}

TEST(HfMetaspace, FirstAddsNoMetaspaceToATextThatStartsWithASpaceUnlikeTheLegacyLayout) {
  // " Hi": Metaspace turns the space into ▁ and, the text now starting with ▁, prepends none:
  // ▁ H i → H+i → ▁+Hi. The legacy normalizer prepends ▁ first: ▁▁Hi → ▁+▁ (rank 0), H+i → ▁▁ Hi.
  EXPECT_EQ(encode(*make(metaspace("first")), " Hi"), (std::vector<int>{kSpHi}));
  EXPECT_EQ(encode(*make(metaspace("always")), " Hi"), (std::vector<int>{kSpHi}));
  EXPECT_EQ(encode(*make(legacy()), " Hi"), (std::vector<int>{kSpSp, kHi}));
  // "Hi": all three prepend ▁.
  for (const json& j : {metaspace("first"), metaspace("always"), legacy()})
    EXPECT_EQ(encode(*make(j), "Hi"), (std::vector<int>{kSpHi}));
  EXPECT_EQ(encode(*make(metaspace("never")), "Hi"), (std::vector<int>{kHi}));
}

TEST(HfMetaspace, FirstPrependsOnlyAtTheStartOfTheText) {
  // "<s>Hi": <s> is split out; "Hi" does not start the text: "first" leaves it, "always" and
  // the legacy normalizer (which runs on each piece) prepend ▁.
  EXPECT_EQ(encode(*make(metaspace("first")), "<s>Hi"), (std::vector<int>{kBos, kHi}));
  EXPECT_EQ(encode(*make(metaspace("always")), "<s>Hi"), (std::vector<int>{kBos, kSpHi}));
  EXPECT_EQ(encode(*make(legacy()), "<s>Hi"), (std::vector<int>{kBos, kSpHi}));
}

TEST(HfMetaspace, SplitMakesEachMetaspaceStartAWord) {
  // "Hi  Hi" → "▁Hi▁▁Hi". Split: "▁Hi" "▁" "▁Hi". One word: ▁+▁ (0) at 3, H+i twice, ▁+Hi at 0 → ▁Hi ▁▁ Hi.
  EXPECT_EQ(encode(*make(metaspace("first", true)), "Hi  Hi"), (std::vector<int>{kSpHi, kSp, kSpHi}));
  EXPECT_EQ(encode(*make(metaspace("first", false)), "Hi  Hi"), (std::vector<int>{kSpHi, kSpSp, kHi}));
}

TEST(HfMetaspace, TokenTextWritesTheMetaspaceAsASpace) {
  for (const json& j : {metaspace("first"), legacy()}) {
    auto t = make(j);
    EXPECT_EQ(t->tokenText(kSpHi), " Hi");  // as inside a text (decode([id]) alone would drop it)
    EXPECT_EQ(t->tokenText(kBos), "<s>");
    EXPECT_EQ(t->tokenPiece(kSpHi), kMeta + "Hi");
  }
}

TEST(HfNormalizer, NfcComposesACombiningAccent) {
  // e + U+0301 (CC 81) → é (C3 A9) under NFC; without a normalizer they stay two tokens.
  json j = tokenizerJson(bpeModel({"e", "\xCC\x81", "\xC3\xA9"}, Merges{}));
  EXPECT_EQ(encode(*make(j), "e\xCC\x81"), (std::vector<int>{0, 1}));
  j["normalizer"] = {{"type", "NFC"}};
  EXPECT_EQ(encode(*make(j), "e\xCC\x81"), (std::vector<int>{2}));
  j["normalizer"] = {{"type", "NFD"}};
  EXPECT_EQ(encode(*make(j), "\xC3\xA9"), (std::vector<int>{0, 1}));
}

// Characters a b ' ' < | > i m _ s t r o l k y, then added tokens from id 16 on.
json withAddedTokens() {
  json j = tokenizerJson(
      bpeModel({"a", "b", " ", "<", "|", ">", "i", "m", "_", "s", "t", "r", "o", "l", "k", "y"}, Merges{}));
  json mask = added(18, "<m>", true);
  mask["lstrip"] = true;
  json ok = added(19, "ok", false);
  ok["single_word"] = true;
  j["added_tokens"] = json::array({added(16, "<|im_start|>", true), added(17, "<tool>", false), mask, ok});
  return j;
}

TEST(HfAddedTokens, SpecialTokensAreSplitOutWhenParsed) {
  auto t = make(withAddedTokens());
  EXPECT_EQ(encode(*t, "<|im_start|>a", false, true), (std::vector<int>{16, 0}));
  // Not parsed (Hugging Face's split_special_tokens): the characters.
  EXPECT_EQ(encode(*t, "<|im_start|>a", false, false), (std::vector<int>{3, 4, 6, 7, 8, 9, 10, 0, 11, 10, 4, 5, 0}));
  // A non-special added token is split out either way.
  EXPECT_EQ(encode(*t, "a<tool>b", false, false), (std::vector<int>{0, 17, 1}));
}

TEST(HfAddedTokens, LstripAndSingleWord) {
  auto t = make(withAddedTokens());
  EXPECT_EQ(encode(*t, "a <m>"), (std::vector<int>{0, 18}));  // lstrip takes the space
  EXPECT_EQ(encode(*t, "ok"), (std::vector<int>{19}));
  EXPECT_EQ(encode(*t, " ok "), (std::vector<int>{2, 19, 2}));
  EXPECT_EQ(encode(*t, "okay"), (std::vector<int>{12, 14, 0, 15}));  // inside a word: text
}

TEST(HfPostProcessor, BosAndEosFromTheTemplateAndTokenizerConfig) {
  const json j = metaspace("first");
  auto t = make(j);
  EXPECT_EQ(encode(*t, "Hi", true), (std::vector<int>{kBos, kSpHi}));
  EXPECT_TRUE(t->addsBos());
  EXPECT_EQ(t->bos(), kBos);
  EXPECT_FALSE(t->eos());
  // tokenizer_config.json decides when it says: no BOS; EOS added.
  EXPECT_EQ(encode(*make(j, R"({"add_bos_token": false})"), "Hi", true), (std::vector<int>{kSpHi}));
  auto e = make(j, R"({"add_eos_token": true, "eos_token": "</s>", "bos_token": {"content": "<s>"}})");
  EXPECT_EQ(encode(*e, "Hi", true), (std::vector<int>{kBos, kSpHi, kEos}));
  EXPECT_TRUE(e->addsEos());
  EXPECT_EQ(e->eos(), kEos);
  EXPECT_EQ(encode(*e, "Hi", false), (std::vector<int>{kSpHi}));
  EXPECT_NE(refusal(j.dump(), R"({"add_eos_token": true})").find("tokenizer_config.json: add_eos_token: is true, but eos_token is not set"),
            std::string::npos);
  EXPECT_NE(refusal(j.dump(), R"({"add_bos_token": "yes"})").find("tokenizer_config.json: add_bos_token: expected true or false"),
            std::string::npos);
}

// The 256 byte-level characters (id = byte), then the given tokens, then merge results not
// listed yet (plain text in, byte-level strings stored).
json byteLevelModel(const std::vector<std::string>& extra, const Merges& merges) {
  std::vector<std::string> vocab;
  auto add = [&](const std::string& s) {
    if (std::find(vocab.begin(), vocab.end(), s) == vocab.end()) vocab.push_back(s);
  };
  for (int b = 0; b < 256; ++b) add(test::byteLevel(std::string(1, static_cast<char>(b))));
  for (const std::string& e : extra) add(test::byteLevel(e));
  Merges m;
  for (const auto& [a, b] : merges) {
    m.emplace_back(test::byteLevel(a), test::byteLevel(b));
    add(test::byteLevel(a + b));
  }
  return bpeModel(vocab, m);
}

TEST(HfByteLevel, PrefixSpaceRegexAndDecoder) {
  json j = tokenizerJson(byteLevelModel({"hi", " hi"}, Merges{{"h", "i"}, {" ", "hi"}}));
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  j["decoder"] = {{"type", "ByteLevel"}};
  j["post_processor"] = {{"type", "ByteLevel"}, {"trim_offsets", false}};
  auto t = make(j);
  // "hi hi" → " hi hi" → words " hi" " hi" → Ġ+(h+i) each.
  EXPECT_EQ(encode(*t, "hi hi", true), (std::vector<int>{257, 257}));
  EXPECT_EQ(t->tokenText(257), " hi");
  EXPECT_EQ(t->tokenText(0xE4), "<0xE4>");
  EXPECT_FALSE(t->addsBos());
  j["pre_tokenizer"]["add_prefix_space"] = false;
  EXPECT_EQ(encode(*make(j), "hi hi"), (std::vector<int>{256, 257}));
}

TEST(HfByteLevel, Llama3StyleSplitIsCaseInsensitiveAndDigitsGoByThree) {
  // Llama 3's tokenizer.json: Split(regex, Isolated) then ByteLevel without its own regex.
  json j = tokenizerJson(byteLevelModel({}, Merges{{"'", "S"}, {"1", "2"}, {"12", "3"}, {"4", "5"}, {"3", "4"}}));
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       json::array({{{"type", "Split"},
                     {"pattern", {{"Regex", R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}},
                     {"behavior", "Isolated"},
                     {"invert", false}},
                    {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}})}};
  auto t = make(j);
  // "'S" is a contraction word; "12345" → "123" "45" (3+4, rank 4, never meets).
  EXPECT_EQ(encode(*t, "'S12345"), (std::vector<int>{256, 258, 259}));
}

TEST(HfModel, ByteFallbackUnknownTokenAndFuseUnk) {
  json model = bpeModel({"<unk>", "a", "<0xC3>", "<0xA9>"}, Merges{});
  model["unk_token"] = "<unk>";
  model["byte_fallback"] = true;
  json j = tokenizerJson(model);
  j["decoder"] = {{"type", "ByteFallback"}};
  auto t = make(j);
  EXPECT_EQ(encode(*t, "a\xC3\xA9"), (std::vector<int>{1, 2, 3}));  // é → <0xC3> <0xA9>
  EXPECT_EQ(t->tokenText(2), "<0xC3>");                             // half a character
  EXPECT_EQ(encode(*t, "a\xC3\xA8"), (std::vector<int>{1, 0}));     // è: <0xA8> missing → <unk>
  j["model"]["byte_fallback"] = false;
  j["model"]["fuse_unk"] = true;
  EXPECT_EQ(encode(*make(j), "a\xC3\xA9\xC3\xA9"), (std::vector<int>{1, 0}));
  j["model"]["fuse_unk"] = false;
  EXPECT_EQ(encode(*make(j), "a\xC3\xA9\xC3\xA9"), (std::vector<int>{1, 0, 0}));
  j["model"]["unk_token"] = nullptr;
  EXPECT_EQ(encode(*make(j), "a\xC3\xA9"), (std::vector<int>{1}));  // no unknown token: dropped
}

TEST(HfModel, IgnoreMergesAndMergeRanks) {
  json j = tokenizerJson(bpeModel({"a", "b", "c", "ab", "abc", "bc"}, Merges{{"b", "c"}, {"a", "b"}}));
  // b+c has rank 0: a bc.
  EXPECT_EQ(encode(*make(j), "abc"), (std::vector<int>{0, 5}));
  j["model"]["ignore_merges"] = true;
  EXPECT_EQ(encode(*make(j), "abc"), (std::vector<int>{4}));
  // Merges written as "a b" strings (the older layout) read the same.
  j["model"]["ignore_merges"] = false;
  j["model"]["merges"] = json::array({"#version: 0.2", "b c", "a b"});
  EXPECT_EQ(encode(*make(j), "abc"), (std::vector<int>{0, 5}));
}

TEST(HfRefusals, UnsupportedComponentsAreNamed) {
  const json base = spmLike();
  auto check = [&](const char* key, const json& value, const std::string& expected) {
    json j = base;
    j[key] = value;
    const std::string m = refusal(j.dump());
    EXPECT_NE(m.find(expected), std::string::npos) << m;
  };
  json wp = base["model"];
  wp["type"] = "WordPiece";
  check("model", wp, "tokenizer.json: model.type: 'WordPiece' is not supported");
  check("model", json{{"type", "Unigram"}, {"vocab", json::array()}}, "model.type: 'Unigram' is not supported");
  check("pre_tokenizer", json{{"type", "Whitespace"}}, "pre_tokenizer.type: pre-tokenizer 'Whitespace' is not supported");
  check("pre_tokenizer", json{{"type", "Sequence"}, {"pretokenizers", json::array({{{"type", "Digits"}}, {{"type", "Punctuation"}}})}},
        "pre_tokenizer.pretokenizers[1].type: pre-tokenizer 'Punctuation'");
  check("normalizer", json{{"type", "Lowercase"}}, "normalizer.type: normalizer 'Lowercase' is not supported");
  check("decoder", json{{"type", "WordPiece"}}, "decoder.type: decoder 'WordPiece' is not supported");
  check("post_processor", json{{"type", "Mystery"}}, "post_processor.type: post-processor 'Mystery' is not supported");
  json drop = base["model"];
  drop["dropout"] = 0.1;
  check("model", drop, "model.dropout: 0.1: BPE dropout makes tokenization random");
}

TEST(HfRefusals, BadModelContents) {
  json j = spmLike();
  j["model"]["merges"] = json::array({json::array({"H", "zz"})});
  EXPECT_NE(refusal(j.dump()).find("model.merges[0]: 'zz' is not in model.vocab"), std::string::npos);
  j = spmLike();
  j["model"]["merges"] = json::array({"H i x"});
  EXPECT_NE(refusal(j.dump()).find("model.merges[0]: 'H i x' is not two tokens"), std::string::npos);
  j = spmLike();
  j["model"]["vocab"]["again"] = 4;
  EXPECT_NE(refusal(j.dump()).find("both have id 4"), std::string::npos) << refusal(j.dump());
  j = spmLike();
  j["model"]["vocab"]["neg"] = -3;
  EXPECT_NE(refusal(j.dump()).find("model.vocab['neg']: expected a token id"), std::string::npos);
  j = spmLike();
  j["model"]["unk_token"] = "<nope>";
  EXPECT_NE(refusal(j.dump()).find("model.unk_token: '<nope>' is not in model.vocab"), std::string::npos);
}

TEST(HfRefusals, MalformedJsonNamesLineAndColumn) {
  const std::string m = refusal("{\n  \"model\": ,\n}");
  EXPECT_NE(m.find("tokenizer.json: line 2, column 12: not valid JSON: "), std::string::npos) << m;
  EXPECT_EQ(m.find("json.exception"), std::string::npos) << m;
  const std::string u = refusal("{\"model\": \"\xFF\"}");
  EXPECT_NE(u.find("tokenizer.json: line 1, column "), std::string::npos) << u;
  EXPECT_NE(refusal("[1, 2]").find("tokenizer.json: (top level): expected a JSON object"), std::string::npos);
  EXPECT_NE(refusal(spmLike().dump(), "{").find("tokenizer_config.json: line 1, column "), std::string::npos);
}

TEST(HfFiles, LoadsAFolderWithItsTokenizerConfig) {
  test::TempDir dir;
  std::ofstream(dir.file("tokenizer.json")) << metaspace("first").dump(2);
  std::ofstream(dir.file("tokenizer_config.json")) << R"({"add_bos_token": false, "eos_token": "</s>"})";
  auto t = loadTokenizerJson(dir.path().string());
  ASSERT_TRUE(t) << t.status().message();
  EXPECT_EQ(*(*t)->encode("Hi", true), (std::vector<int>{kSpHi}));
  EXPECT_EQ((*t)->eos(), kEos);
  const std::string d = (*t)->describe();
  EXPECT_NE(d.find("pre-tokenizer Metaspace"), std::string::npos) << d;
  auto missing = loadTokenizerJson((dir.path() / "nothing").string());
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.status().message().find("nothing"), std::string::npos);
}

}  // namespace
}  // namespace kvscope
