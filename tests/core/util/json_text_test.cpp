// SPDX-License-Identifier: GPL-3.0-or-later
// Issue 33: JSON read from users' files says where it is broken as a person reads it; JSON
// written holds valid UTF-8 whatever bytes a dump's token texts hold.
#include "core/util/json_text.h"

#include <gtest/gtest.h>

namespace kvscope {
namespace {

std::string errorOf(const std::string& text) {
  auto j = parseJsonText(text, "map.json");
  return j ? std::string() : j.status().message();
}

void expectNoInternals(const std::string& message) {
  for (const char* internal : {"json.exception", "[json.", "parse_error", "out_of_range", "literal;", "last read"})
    EXPECT_EQ(message.find(internal), std::string::npos) << "library internals in: " << message;
}

TEST(ParseJsonText, SyntaxErrorsNameFileLineColumnAndWhatWasExpected) {
  // Line 2, column 10 is the '}' where a value belongs (columns count bytes from 1).
  const std::string e = errorOf("{\n  \"key\": }\n");
  EXPECT_EQ(e.rfind("map.json: line 2, column 10: unexpected '}'; expected", 0), 0u) << e;
  EXPECT_NE(e.find("or a value"), std::string::npos) << e;
  expectNoInternals(e);
  // The parser gives up at the '}' that ends "tru".
  const std::string word = errorOf("{\"layers\": tru}");
  EXPECT_EQ(word, "map.json: line 1, column 15: not a JSON value (text needs double quotes; true, false and null "
                  "are lowercase)");
  expectNoInternals(word);
  const std::string cut = errorOf("{\"key\": {\"path\": \"/k\"");
  EXPECT_NE(cut.find("line 1, column"), std::string::npos) << cut;
  EXPECT_NE(cut.find("unexpected end of input"), std::string::npos) << cut;
  expectNoInternals(cut);
}

TEST(ParseJsonText, EmptyFilesAndHugeNumbersAreSaidPlainly) {
  EXPECT_EQ(errorOf(""), "map.json: the file is empty; expected a JSON object");
  EXPECT_EQ(errorOf(" \n\t"), "map.json: the file is empty; expected a JSON object");
  const std::string huge = errorOf("{\n\"rope_theta\": 1e999}");
  EXPECT_EQ(huge.rfind("map.json: line 2, column 15: the number 1e999 is too large", 0), 0u) << huge;
  expectNoInternals(huge);
  auto ok = parseJsonText("{\"a\": [1, 2]}", "map.json");
  ASSERT_TRUE(ok.hasValue());
  EXPECT_EQ((*ok)["a"][1], 2);
}

// outliers --json on a dump whose /token_text holds 0xFF bytes ended in "internal error:
// [json.exception.type_error.316] invalid UTF-8 byte", exit 1.
TEST(JsonText, InvalidUtf8BecomesTheReplacementCharacterAndTheResultParses) {
  nlohmann::json j;
  j["text"] = std::string("a\xFF\xFE" "b");
  j["cut"] = std::string("\xE2\x82" "A");  // a 3-byte sequence broken off after 2: one U+FFFD
  j["ok"] = "é€";
  const std::string text = jsonText(j);
  ASSERT_EQ(text.back(), '\n');
  const auto back = nlohmann::json::parse(text);
  EXPECT_EQ(back["text"], "a\xEF\xBF\xBD\xEF\xBF\xBD" "b");
  EXPECT_EQ(back["cut"], "\xEF\xBF\xBD" "A");
  EXPECT_EQ(back["ok"], "é€");
  nlohmann::ordered_json o;
  o["t"] = std::string("\xC0\xAF");  // an overlong '/': two invalid bytes
  EXPECT_EQ(nlohmann::json::parse(jsonText(o))["t"], "\xEF\xBF\xBD\xEF\xBF\xBD");
}

}  // namespace
}  // namespace kvscope
