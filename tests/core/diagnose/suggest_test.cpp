// SPDX-License-Identifier: GPL-3.0-or-later
// The settings a finding suggests and how they change a spec or plan (core/diagnose/suggest.h),
// against hand-written expectations: which options each kind offers at which shape, and the
// spec each option gives (compared with the parser's reading of the expected string).
#include "core/diagnose/suggest.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kvscope {
namespace {

DumpInfo shape(int headDim, bool preRope) {
  DumpInfo info;
  info.layers = 4;
  info.kvHeads = 2;
  info.heads = 8;
  info.headDim = headDim;
  info.tokens = 64;
  info.hasKeyPreRope = preRope;
  return info;
}

SpecContext context(const DumpInfo& info, bool isKey) {
  SpecContext c;
  c.isKey = isKey;
  c.kvHeads = info.kvHeads;
  c.headDim = info.headDim;
  c.hasKeyPreRope = info.hasKeyPreRope;
  return c;
}

std::vector<std::string> options(const std::vector<SettingSuggestion>& s) {
  std::vector<std::string> out;
  for (const SettingSuggestion& x : s) out.push_back(x.option);
  return out;
}

Finding finding(FindingKind kind, int sinks = 0) {
  Finding f;
  f.kind = kind;
  f.sinks = sinks;
  return f;
}

QuantSpec spec(const std::string& text) {
  auto s = parseSpec(text);
  EXPECT_TRUE(s) << text << ": " << s.status().message();
  return s ? *s : QuantSpec{};
}

TEST(Suggest, SeverityPerKind) {
  EXPECT_STREQ(findingSeverity(FindingKind::KeyBias), "high");
  EXPECT_STREQ(findingSeverity(FindingKind::MassiveTokens), "high");
  EXPECT_STREQ(findingSeverity(FindingKind::OutlierChannels), "medium");
  EXPECT_STREQ(findingSeverity(FindingKind::LowEntropyHeads), "medium");
  EXPECT_STREQ(findingSeverity(FindingKind::SideSensitivity), "medium");
  EXPECT_STREQ(findingSeverity(FindingKind::HeadDim), "low");
}

TEST(Suggest, WhatEachFindingOffersDependsOnTheShape) {
  const DumpInfo d128 = shape(128, true), d96 = shape(96, false);
  EXPECT_EQ(options(suggestedSettings(finding(FindingKind::KeyBias), d128)),
            (std::vector<std::string>{"axis=channel", "prerope", "rot=hadamard"}));
  // No key_pre_rope: no prerope; D = 96 is no power of two: rot=random.
  EXPECT_EQ(options(suggestedSettings(finding(FindingKind::KeyBias), d96)),
            (std::vector<std::string>{"axis=channel", "rot=random"}));
  EXPECT_EQ(options(suggestedSettings(finding(FindingKind::OutlierChannels), d128)),
            (std::vector<std::string>{"axis=channel", "rot=hadamard"}));
  const auto sinks = suggestedSettings(finding(FindingKind::MassiveTokens, 4), d128);
  ASSERT_EQ(sinks.size(), 1u);
  EXPECT_EQ(sinks[0].option, "sinks=4");
  EXPECT_TRUE(sinks[0].key && sinks[0].value);
  EXPECT_NE(sinks[0].label.find("0–3"), std::string::npos) << sinks[0].label;
  // Massive tokens beyond the sink window (sinks = 0): nothing to apply.
  EXPECT_TRUE(suggestedSettings(finding(FindingKind::MassiveTokens, 0), d128).empty());
  EXPECT_EQ(options(suggestedSettings(finding(FindingKind::HeadDim), d96)), (std::vector<std::string>{"rot=random"}));
  EXPECT_TRUE(suggestedSettings(finding(FindingKind::HeadDim), shape(32, true)).empty());
  EXPECT_TRUE(suggestedSettings(finding(FindingKind::LowEntropyHeads), d128).empty());
  EXPECT_TRUE(suggestedSettings(finding(FindingKind::SideSensitivity), d128).empty());
  for (const SettingSuggestion& s : suggestedSettings(finding(FindingKind::KeyBias), d128)) {
    EXPECT_TRUE(s.key);
    EXPECT_FALSE(s.value);
  }
}

TEST(Suggest, ApplyingSetsTheOptionAndKeepsTheRest) {
  const DumpInfo info = shape(128, true);
  const SpecContext k = context(info, true), v = context(info, false);
  const SettingSuggestion sinks{"sinks=4", true, true, ""};
  EXPECT_EQ(*applySuggestion(spec("int4,axis=token,group=32"), sinks, k), spec("int4,axis=token,group=32,sinks=4"));
  EXPECT_EQ(*applySuggestion(spec("int4,sinks=8"), sinks, k), spec("int4,sinks=8"));  // already keeps more
  const SettingSuggestion channel{"axis=channel", true, false, ""};
  EXPECT_EQ(*applySuggestion(spec("int2,axis=token,group=32,sinks=2"), channel, k), spec("int2,axis=channel,group=32,sinks=2"));
  // Formats without axes become KIVI's per-channel integers at their bits, keeping rotation and kept tokens.
  EXPECT_EQ(*applySuggestion(spec("q4_0,rot=hadamard:128,sinks=1"), channel, k),
            spec("int4,axis=channel,group=32,rot=hadamard:128,sinks=1"));
  EXPECT_EQ(*applySuggestion(spec("q8_0"), channel, k), spec("int8,axis=channel,group=32"));
  EXPECT_EQ(*applySuggestion(spec("int4"), SettingSuggestion{"prerope", true, false, ""}, k), spec("int4,prerope"));
  EXPECT_EQ(*applySuggestion(spec("q4_0,rot=hadamard:64"), SettingSuggestion{"rot=hadamard", true, false, ""}, k),
            spec("q4_0,rot=hadamard"));
  // What does not fit is refused with the parser's reason, naming the spec.
  auto onValue = applySuggestion(spec("int4"), SettingSuggestion{"prerope", false, true, ""}, v);
  ASSERT_FALSE(onValue);
  EXPECT_NE(onValue.status().message().find("prerope"), std::string::npos) << onValue.status().message();
  const DumpInfo odd = shape(96, false);
  auto hadamard = applySuggestion(spec("int4"), SettingSuggestion{"rot=hadamard", true, false, ""}, context(odd, true));
  ASSERT_FALSE(hadamard);
  EXPECT_NE(hadamard.status().message().find("int4,rot=hadamard"), std::string::npos) << hadamard.status().message();
  EXPECT_FALSE(applySuggestion(spec("int4"), SettingSuggestion{"bits=3", true, false, ""}, k));
}

TEST(Suggest, APlanGetsTheOptionOnEveryPart) {
  const DumpInfo info = shape(128, true);
  auto plan = parsePlan("int4;first1+last1:int8");
  ASSERT_TRUE(plan);
  auto out = applySuggestion(*plan, SettingSuggestion{"sinks=2", true, true, ""}, context(info, true));
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ(toString(*out), "int4,sinks=2;first1+last1:int8,sinks=2");
}

}  // namespace
}  // namespace kvscope
