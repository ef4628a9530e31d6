// SPDX-License-Identifier: GPL-3.0-or-later
// One K/V setting as the CLI and the GUI's launch read it (core/engine/setting.h): one way only,
// both halves of a plan pair, names and flags checked before a dump is open, and messages in the
// flag names the user typed (the GUI's setting B uses the --compare-* ones).
#include <gtest/gtest.h>

#include <string>

#include "core/engine/engine.h"
#include "core/engine/presets.h"
#include "core/engine/setting.h"
#include "core/quant/plan.h"

namespace kvscope {
namespace {

constexpr SettingFlags kCompare{"--compare-key", "--compare-value", "--compare-preset", "--compare-engine"};

std::string planText(std::string_view text) { return toString(*parsePlan(text)); }

TEST(Setting, CheckTellsTheWayAndParsesThePlans) {
  auto none = checkSetting({});
  ASSERT_TRUE(none) << none.status().message();
  EXPECT_EQ(none->way, SettingWay::None);

  auto plans = checkSetting({"q4_0;first1:q8_0", "int4,axis=channel,group=32", "", ""});
  ASSERT_TRUE(plans) << plans.status().message();
  EXPECT_EQ(plans->way, SettingWay::Plans);
  EXPECT_EQ(toString(plans->plans.key), planText("q4_0;first1:q8_0"));
  EXPECT_EQ(toString(plans->plans.value), planText("int4,axis=channel,group=32"));

  auto preset = checkSetting({"", "", "kivi-2", ""});
  ASSERT_TRUE(preset) << preset.status().message();
  EXPECT_EQ(preset->way, SettingWay::Preset);

  auto engine = checkSetting({"", "", "", "llama.cpp -ctk q4_0 -ctv q8_0"});
  ASSERT_TRUE(engine) << engine.status().message();
  EXPECT_EQ(engine->way, SettingWay::Engine);
}

TEST(Setting, RefusalsNameTheFlagsTheUserTyped) {
  struct Case {
    SettingText text;
    std::string plain, compare;  // the message's start with the plain flags and with --compare-*
  };
  const Case cases[] = {
      {{"int4", "int4", "kivi-2", ""},
       "give one of --key and --value, --preset or --engine, not both",
       "give one of --compare-key and --compare-value, --compare-preset or --compare-engine, not both"},
      {{"", "", "kivi-2", "llama.cpp"},
       "give one of --key and --value, --preset or --engine, not both",
       "give one of --compare-key and --compare-value, --compare-preset or --compare-engine, not both"},
      {{"int4", "", "", ""},
       "--key and --value go together (or give --preset NAME or --engine \"ENGINE FLAGS\" instead)",
       "--compare-key and --compare-value go together (or give --compare-preset NAME or --compare-engine "
       "\"ENGINE FLAGS\" instead)"},
      {{"", "q8_0", "", ""}, "--key and --value go together", "--compare-key and --compare-value go together"},
      {{"int99", "int4", "", ""}, "--key: ", "--compare-key: "},
      {{"int4", "q4_0;bogus", "", ""}, "--value: ", "--compare-value: "},
      {{"", "", "kivi-9", "", }, "--preset: unknown preset 'kivi-9' (allowed presets: ",
       "--compare-preset: unknown preset 'kivi-9' (allowed presets: "},
      {{"", "", "", "llama.cpp -ctk q9_9"}, "--engine: ", "--compare-engine: "},
      {{"", "", "", "nosuchengine --x"}, "--engine: ", "--compare-engine: "},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text.key + " | " + c.text.value + " | " + c.text.preset + " | " + c.text.engine);
    auto plain = checkSetting(c.text);
    auto compare = checkSetting(c.text, kCompare);
    ASSERT_FALSE(plain);
    ASSERT_FALSE(compare);
    EXPECT_EQ(plain.status().code(), StatusCode::InvalidArgument);
    EXPECT_EQ(plain.status().message().rfind(c.plain, 0), 0u) << plain.status().message();
    EXPECT_EQ(compare.status().message().rfind(c.compare, 0), 0u) << compare.status().message();
    // A dump's shape changes none of these refusals.
    auto resolved = resolveSetting(c.text, KvShape{128, 32, 8});
    ASSERT_FALSE(resolved);
    EXPECT_EQ(resolved.status().message().rfind(c.plain, 0), 0u) << resolved.status().message();
  }
}

TEST(Setting, ResolvesEachWayForTheShapeAsItsOwnResolverDoes) {
  const KvShape shape{128, 32, 8};
  auto nothing = resolveSetting({}, shape);
  ASSERT_FALSE(nothing);
  EXPECT_EQ(nothing.status().message(),
            "give both --key SPEC and --value SPEC (a spec or a plan), --preset NAME (run 'kvscope-cli presets' for "
            "the list) or --engine \"ENGINE FLAGS\"");

  auto plans = resolveSetting({"q4_0;last2:q8_0", "q8_0", "", ""}, shape);
  ASSERT_TRUE(plans) << plans.status().message();
  EXPECT_EQ(plans->label, "");
  EXPECT_EQ(plans->strings.key, "q4_0;last2:q8_0");
  EXPECT_EQ(plans->strings.value, "q8_0");
  EXPECT_EQ(toString(plans->plans.key), planText("q4_0;last2:q8_0"));

  for (const char* name : {"kivi-2", "llamacpp-q4_0"}) {
    SCOPED_TRACE(name);
    auto want = resolvePreset(name, shape);
    ASSERT_TRUE(want) << want.status().message();
    auto got = resolveSetting({"", "", name, ""}, shape);
    ASSERT_TRUE(got) << got.status().message();
    EXPECT_EQ(got->label, name);
    EXPECT_EQ(got->strings.key, want->key);
    EXPECT_EQ(got->strings.value, want->value);
    EXPECT_EQ(toString(got->plans.key), planText(want->key));
    EXPECT_EQ(toString(got->plans.value), planText(want->value));
  }

  const std::string flags = "vllm --kv-cache-dtype turboquant_k3v4_nc";
  auto want = resolveEngine(flags, shape);
  ASSERT_TRUE(want) << want.status().message();
  auto got = resolveSetting({"", "", "", flags}, shape);
  ASSERT_TRUE(got) << got.status().message();
  EXPECT_EQ(got->label, flags);
  EXPECT_EQ(got->strings.key, want->key);
  EXPECT_EQ(got->strings.value, want->value);
  EXPECT_EQ(got->strings.notes, want->notes);
  EXPECT_EQ(toString(got->plans.key), planText(want->key));  // a plan: the boundary layers unquantized
  EXPECT_NE(got->strings.key.find(';'), std::string::npos) << got->strings.key;

  // A shape the engine refuses: the engine's refusal, under the flag's name.
  auto refused = resolveSetting({"", "", "", flags}, KvShape{96, 32, 8});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.status().message().rfind("--engine: ", 0), 0u) << refused.status().message();
  EXPECT_EQ(refused.status().message().substr(10), resolveEngine(flags, KvShape{96, 32, 8}).status().message());
}

}  // namespace
}  // namespace kvscope
