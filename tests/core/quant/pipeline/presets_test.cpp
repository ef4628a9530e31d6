// SPDX-License-Identifier: GPL-3.0-or-later
// The preset table of quantization.md §9.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/quant/presets.h"

namespace kvscope {
namespace {

TEST(Presets, TableHoldsEverySpecPresetOnce) {
  const std::set<std::string> want = {
      "kivi-2", "kivi-4", "kvquant-4-1pct", "kvquant-3-1pct", "quarot-4", "llamacpp-q8_0",
      "llamacpp-q4_0", "llamacpp-q4_1", "llamacpp-q5_0", "llamacpp-q5_1", "llamacpp-iq4_nl",
      "vllm-fp8", "vllm-fp8-uncalibrated", "lmdeploy-int8", "lmdeploy-int4", "nvfp4", "mxfp4",
      "turboquant-3", "turboquant-4"};
  std::set<std::string> have;
  for (const Preset& p : presetTable()) {
    EXPECT_TRUE(have.insert(std::string(p.name)).second) << "duplicate " << p.name;
    EXPECT_FALSE(p.description.empty()) << p.name;
  }
  EXPECT_EQ(have, want);
}

TEST(Presets, EverySpecParsesAndValidatesForAKeyAndAValue) {
  for (const Preset& p : presetTable()) {
    auto specs = presetSpecs(p.name);
    ASSERT_TRUE(specs.hasValue()) << p.name << ": " << specs.status().message();
    EXPECT_TRUE(validateSpec(specs->key, {true, 8, 128, true}).isOk()) << p.name;
    EXPECT_TRUE(validateSpec(specs->value, {false, 8, 128, true}).isOk()) << p.name;
  }
}

TEST(Presets, KiviAndKvquantReadAsTheSpecWrites) {
  auto kivi = presetSpecs("kivi-2");
  ASSERT_TRUE(kivi.hasValue());
  EXPECT_EQ(kivi->key.bits, 2);
  EXPECT_EQ(kivi->key.axis, Axis::Channel);
  EXPECT_EQ(kivi->key.group, 32);
  EXPECT_EQ(kivi->key.residual, 128);
  EXPECT_EQ(kivi->value.axis, Axis::Token);
  EXPECT_EQ(toString(kivi->key), "int2,residual=128,axis=channel,group=32");
  auto kvq = presetSpecs("kvquant-3-1pct");
  ASSERT_TRUE(kvq.hasValue());
  EXPECT_TRUE(kvq->key.prerope);
  EXPECT_EQ(kvq->key.sinks, 1);
  EXPECT_EQ(kvq->key.outliers, 0.01);
  EXPECT_FALSE(kvq->value.prerope);
  EXPECT_EQ(toString(kvq->value), "nuq3,outliers=0.01");
  EXPECT_EQ(kvq->key.format, FormatId::Nuq);
  auto fp8 = presetSpecs("vllm-fp8-uncalibrated");
  ASSERT_TRUE(fp8.hasValue());
  EXPECT_TRUE(fp8->key.unitscale);
}

TEST(Presets, KvquantDescriptionsNameTheirNonUniformDatatypes) {
  // KVQuant's presets are on nuq (§11) now: no longer "approximated by uniform" ones.
  for (const char* name : {"kvquant-4-1pct", "kvquant-3-1pct"}) {
    const Preset* p = findPreset(name);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->description.find("approximated by"), std::string_view::npos) << p->description;
    EXPECT_NE(p->description.find("non-uniform"), std::string_view::npos) << p->description;
    EXPECT_NE(p->description.find("k-means"), std::string_view::npos) << p->description;
  }
}

TEST(Presets, UnknownNameListsTheKnownOnes) {
  auto s = presetSpecs("kivi-3");
  ASSERT_FALSE(s.hasValue());
  EXPECT_EQ(s.status().code(), StatusCode::InvalidArgument);
  EXPECT_NE(s.status().message().find("kivi-2"), std::string::npos);
  EXPECT_NE(s.status().message().find("allowed"), std::string::npos);
  EXPECT_EQ(findPreset("nope"), nullptr);
}

}  // namespace
}  // namespace kvscope
