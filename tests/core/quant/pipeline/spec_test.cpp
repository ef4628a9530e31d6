// SPDX-License-Identifier: GPL-3.0-or-later
// Spec strings: parsing with defaults, errors that say what is allowed, canonical printing, and
// parse(toString(s)) == s over many random specs.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "core/quant/format_table.h"
#include "core/quant/spec.h"

namespace kvscope {
namespace {

QuantSpec mustParse(const std::string& text) {
  auto s = parseSpec(text);
  EXPECT_TRUE(s.hasValue()) << text << ": " << s.status().message();
  return s.hasValue() ? *s : QuantSpec{};
}

TEST(SpecParse, IntDefaultsAreAsymPerTokenWholeAxisFp16) {
  QuantSpec s = mustParse("int4");
  EXPECT_EQ(s.format, FormatId::Int);
  EXPECT_EQ(s.bits, 4);
  EXPECT_FALSE(s.symmetric);
  EXPECT_EQ(s.axis, Axis::Token);
  EXPECT_EQ(s.group, 0);
  EXPECT_EQ(s.scale, MetaType::Fp16);
  EXPECT_EQ(s.clip.kind, Clip::Kind::None);
  EXPECT_EQ(s.sinks, 0);
  EXPECT_EQ(s.residual, 0);
  EXPECT_EQ(s.outliers, 0.0);
  EXPECT_EQ(s.rotation, Rotation::None);
  EXPECT_EQ(s.chunk, 0);
  EXPECT_FALSE(s.zeroInt);
  EXPECT_FALSE(s.prerope);
  EXPECT_FALSE(s.unitscale);
}

TEST(SpecParse, Fp8DefaultsArePerTensorWithFp32Scale) {
  QuantSpec s = mustParse("fp8_e4m3");
  EXPECT_EQ(s.format, FormatId::Fp8E4M3);
  EXPECT_EQ(s.axis, Axis::Tensor);
  EXPECT_EQ(s.scale, MetaType::Fp32);
  EXPECT_EQ(s.bits, 8);
  QuantSpec u = mustParse("fp8_e4m3,unitscale");
  EXPECT_TRUE(u.unitscale);
  EXPECT_EQ(toString(u), "fp8_e4m3,unitscale");
}

TEST(SpecParse, Nf4DefaultsArePerTokenGroupsOf64) {
  QuantSpec s = mustParse("nf4");
  EXPECT_EQ(s.format, FormatId::Nf4);
  EXPECT_EQ(s.axis, Axis::Token);
  EXPECT_EQ(s.group, 64);
  EXPECT_EQ(mustParse("nf4,group=64"), s);
  EXPECT_EQ(toString(mustParse("nf4,group=64")), "nf4");
  // One group per tensor has no run length.
  EXPECT_EQ(mustParse("nf4,axis=tensor").group, 0);
}

TEST(SpecParse, FullIntSpecReadsEveryOption) {
  QuantSpec s = mustParse(
      "int4,asym,axis=channel,group=32,clip=0.99,outliers=0.01,sinks=4,residual=128,rot=hadamard,prerope,scale=fp16");
  EXPECT_EQ(s.bits, 4);
  EXPECT_FALSE(s.symmetric);
  EXPECT_EQ(s.axis, Axis::Channel);
  EXPECT_EQ(s.group, 32);
  EXPECT_EQ(s.clip.kind, Clip::Kind::Percentile);
  EXPECT_EQ(s.clip.p, 0.99);
  EXPECT_EQ(s.outliers, 0.01);
  EXPECT_EQ(s.sinks, 4);
  EXPECT_EQ(s.residual, 128);
  EXPECT_EQ(s.rotation, Rotation::Hadamard);
  EXPECT_EQ(s.rotationBlock, 0);
  EXPECT_TRUE(s.prerope);
  EXPECT_EQ(s.scale, MetaType::Fp16);
  EXPECT_EQ(toString(s), "int4,prerope,sinks=4,residual=128,rot=hadamard,outliers=0.01,axis=channel,group=32,clip=0.99");
}

TEST(SpecParse, ClipMseAndBlockFormats) {
  EXPECT_EQ(mustParse("int4,clip=mse").clip.kind, Clip::Kind::Mse);
  EXPECT_EQ(mustParse("q4_0").format, FormatId::Q4_0);
  EXPECT_EQ(mustParse("iq4_nl").format, FormatId::Iq4Nl);
  EXPECT_EQ(mustParse("mxfp4").format, FormatId::Mxfp4);
  EXPECT_EQ(mustParse("nvfp4,sinks=4").sinks, 4);
}

TEST(SpecPrint, CanonicalStringsOfEquivalentSpellings) {
  struct Case {
    const char* in;
    const char* want;
  };
  const Case cases[] = {
      {"int4", "int4"},
      {"int4,asym", "int4"},
      {"int4,axis=token,group=0", "int4"},
      {" int4 , axis=channel ", "int4,axis=channel"},
      {"int8,scale=fp32,sym", "int8,sym,scale=fp32"},
      {"int4,clip=1", "int4"},
      {"int4,rot=none", "int4"},
      {"int3,group=32,axis=channel,sinks=1,outliers=0.01,prerope", "int3,prerope,sinks=1,outliers=0.01,axis=channel,group=32"},
      {"int2,axis=channel,group=32,residual=128", "int2,residual=128,axis=channel,group=32"},
      {"fp8_e5m2,axis=token", "fp8_e5m2,axis=token"},
      {"fp8_e4m3,scale=fp32", "fp8_e4m3"},
      {"fp8_e4m3,scale=fp16", "fp8_e4m3,scale=fp16"},
      {"nf4,group=0", "nf4,group=0"},
      {"nf4,clip=mse,scale=bf16", "nf4,clip=mse,scale=bf16"},
      {"int4,outliers=0.001", "int4,outliers=0.001"},
      {"int4,outliers=0.00001", "int4,outliers=1e-05"},
      {"int4,clip=0.999", "int4,clip=0.999"},
      {"none,sinks=0", "none"},
      {"fp16", "fp16"},
      {"bf16,rot=hadamard", "bf16,rot=hadamard"},
      {"q8_0,residual=64", "q8_0,residual=64"},
  };
  for (const auto& [in, want] : cases) EXPECT_EQ(toString(mustParse(in)), want) << in;
}

TEST(SpecParse, ErrorsSayWhatIsWrongAndWhatIsAllowed) {
  // Each bad spec, and a fragment its message must contain besides "allowed".
  struct Case {
    std::string in;
    const char* fragment;
  };
  const Case cases[] = {
      {"", "no format"},
      {"int1,sym", "int1"},
      {"int9", "int1 … int8"},
      {"int0", "int1 … int8"},
      {"int", "bit width"},
      {"int4x", "unknown format"},
      {"bogus", "q4_0"},
      {"q4_0,axis=token", "axis"},
      {"q4_0,group=32", "group"},
      {"mxfp4,clip=0.9", "clip"},
      {"fp16,scale=fp32", "scale"},
      {"int4,unitscale", "unitscale"},
      {"nf4,unitscale", "unitscale"},
      {"fp8_e4m3,unitscale,axis=token", "unitscale"},
      {"fp8_e4m3,unitscale,scale=fp16", "unitscale"},
      {"q4_0,sym", "sym"},
      {"int4,clip=1.5", "0 < p ≤ 1"},
      {"int4,clip=0", "0 < p ≤ 1"},
      {"int4,clip=abc", "clip=mse"},
      {"int4,outliers=1.2", "0 ≤ f < 1"},
      {"int4,outliers=-0.1", "0 ≤ f < 1"},
      {"int4,outliers=nan", "0 ≤ f < 1"},
      {"int4,sinks=-1", "≥ 0"},
      {"int4,residual=x", "≥ 0"},
      {"int4,residual=1.5", "≥ 0"},
      {"int4,group=-3", "group=G"},
      {"int4,axis=row", "channel"},
      {"int4,scale=fp8", "bf16"},
      {"int4,rot=spin", "hadamard"},
      {"int4,axis=channel,axis=token", "more than once"},
      {"int4,sym,asym", "more than once"},
      {"int4,sinks=1,sinks=2", "more than once"},
      {"int4,foo", "unknown option"},
      {"int4,,axis=token", "empty option"},
      {"int4,", "empty option"},
      {"int4,prerope=1", "no value"},
      {"int4,sinks", "needs a value"},
      {"int4,axis=tensor,group=32", "axis=token or axis=channel"},
  };
  for (const auto& [in, fragment] : cases) {
    auto s = parseSpec(in);
    ASSERT_FALSE(s.hasValue()) << "'" << in << "' should be rejected";
    EXPECT_EQ(s.status().code(), StatusCode::InvalidArgument) << in;
    const std::string m = s.status().message();
    EXPECT_NE(m.find(fragment), std::string::npos) << in << " -> " << m;
    EXPECT_NE(m.find("allowed"), std::string::npos) << in << " -> " << m;
    EXPECT_NE(m.find("'" + in + "'"), std::string::npos) << "message should quote the spec: " << m;
  }
}

TEST(SpecValidate, HadamardNeedsPowerOfTwoHeadDim) {
  QuantSpec s = mustParse("int4,rot=hadamard");
  EXPECT_TRUE(validateSpec(s, {true, 8, 128, true}).isOk());
  Status bad = validateSpec(s, {true, 8, 96, true});
  EXPECT_EQ(bad.code(), StatusCode::InvalidArgument);
  EXPECT_NE(bad.message().find("power of two"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("96"), std::string::npos) << bad.message();
  EXPECT_TRUE(validateSpec(s, {true, 0, 0, true}).isOk()) << "unknown shape skips the check";
}

TEST(SpecValidate, BlockFormatRowMustDivideIntoBlocks) {
  QuantSpec q = mustParse("q4_0");
  EXPECT_FALSE(validateSpec(q, {true, 1, 48, true}).isOk());
  EXPECT_TRUE(validateSpec(q, {true, 2, 48, true}).isOk()) << "row of 96 = 3 blocks of 32";
  Status s = validateSpec(mustParse("nvfp4"), {true, 1, 8, true});
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("16"), std::string::npos) << s.message();
  EXPECT_TRUE(validateSpec(mustParse("int4"), {true, 1, 7, true}).isOk()) << "grouped formats have no blocks";
}

TEST(SpecValidate, PreRopeOnlyOnKeysOfDumpsWithPreRopeKeys) {
  QuantSpec s = mustParse("int4,prerope");
  EXPECT_TRUE(validateSpec(s, {true, 8, 128, true}).isOk());
  Status onValues = validateSpec(s, {false, 8, 128, true});
  EXPECT_FALSE(onValues.isOk());
  EXPECT_NE(onValues.message().find("keys only"), std::string::npos) << onValues.message();
  Status missing = validateSpec(s, {true, 8, 128, false});
  EXPECT_FALSE(missing.isOk());
  EXPECT_NE(missing.message().find("key_pre_rope"), std::string::npos) << missing.message();
  EXPECT_TRUE(validateSpec(mustParse("int4"), {false, 8, 128, false}).isOk());
}

TEST(SpecValidate, SpecsBuiltInCodeAreCheckedToo) {
  const SpecContext any{true, 0, 0, true};
  QuantSpec s = defaultSpec(FormatId::Int, 4);
  EXPECT_TRUE(validateSpec(s, any).isOk());
  s.bits = 9;
  EXPECT_FALSE(validateSpec(s, any).isOk());
  s = defaultSpec(FormatId::Int, 1);
  s.symmetric = true;
  EXPECT_FALSE(validateSpec(s, any).isOk());
  s = defaultSpec(FormatId::Nf4);
  s.unitscale = true;
  EXPECT_FALSE(validateSpec(s, any).isOk());
  s = defaultSpec(FormatId::Int, 4);
  s.clip = {Clip::Kind::Percentile, 1.5};
  EXPECT_FALSE(validateSpec(s, any).isOk());
  s = defaultSpec(FormatId::Int, 4);
  s.outliers = 1.0;
  EXPECT_FALSE(validateSpec(s, any).isOk());
  s = defaultSpec(FormatId::Int, 4);
  s.sinks = -1;
  Status st = validateSpec(s, any);
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("allowed"), std::string::npos) << st.message();
}

TEST(SpecNames, AxisAndMetaTypeNames) {
  EXPECT_STREQ(axisName(Axis::Tensor), "tensor");
  EXPECT_STREQ(axisName(Axis::Head), "head");
  EXPECT_STREQ(axisName(Axis::Token), "token");
  EXPECT_STREQ(axisName(Axis::Channel), "channel");
  EXPECT_STREQ(metaTypeName(MetaType::Fp16), "fp16");
  EXPECT_STREQ(metaTypeName(MetaType::Bf16), "bf16");
  EXPECT_STREQ(metaTypeName(MetaType::Fp32), "fp32");
}

TEST(SpecDefaults, DefaultSpecEqualsParsedFormatName) {
  for (const FormatInfo& f : formatTable()) {
    if (f.hasBits) {
      for (int b = 1; b <= 8; ++b) {
        EXPECT_EQ(defaultSpec(f.id, b), mustParse(std::string(f.name) + std::to_string(b))) << b;
      }
    } else {
      EXPECT_EQ(defaultSpec(f.id), mustParse(std::string(f.name))) << f.name;
      EXPECT_EQ(toString(defaultSpec(f.id)), f.name);
    }
  }
}

// Random option lists (valid and invalid, in random order) through the parser: whatever parses
// must print canonically and parse back to the same spec.
TEST(SpecRoundTrip, ParseOfToStringIsIdentityOnRandomSpecs) {
  std::mt19937 rng(20261129);
  auto pick = [&](const std::vector<std::string>& v) { return v[rng() % v.size()]; };
  const std::vector<std::string> numbers = {"0", "0.5", "0.01", "0.001", "0.25", "0.9", "0.99", "1e-3", "0.123456789"};
  std::vector<std::string> formats;
  for (const FormatInfo& f : formatTable()) {
    if (f.hasBits) {
      for (int b = 1; b <= 8; ++b) formats.push_back(std::string(f.name) + std::to_string(b));
    } else {
      formats.emplace_back(f.name);
    }
  }
  ASSERT_FALSE(formats.empty()) << "format table is empty";
  int parsed = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::vector<std::string> options;
    auto maybe = [&](const std::string& o) {
      if (rng() % 3 == 0) options.push_back(o);
    };
    maybe(pick({"sym", "asym"}));
    maybe("prerope");
    maybe("sinks=" + std::to_string(rng() % 5));
    maybe("residual=" + pick({"0", "1", "32", "128"}));
    maybe("rot=" + pick({"hadamard", "none"}));
    maybe("outliers=" + pick(numbers));
    maybe("axis=" + pick({"tensor", "head", "token", "channel"}));
    maybe("group=" + pick({"0", "1", "16", "32", "64", "128"}));
    maybe("clip=" + pick({"mse", "0.9", "0.99", "1", "0.5", "0.999"}));
    maybe("scale=" + pick({"fp16", "bf16", "fp32"}));
    maybe("unitscale");
    std::shuffle(options.begin(), options.end(), rng);
    std::string text = pick(formats);
    for (const auto& o : options) text += "," + o;
    auto s = parseSpec(text);
    if (!s) {
      EXPECT_NE(s.status().message().find("allowed"), std::string::npos) << text << ": " << s.status().message();
      continue;
    }
    ++parsed;
    const std::string canonical = toString(*s);
    auto back = parseSpec(canonical);
    ASSERT_TRUE(back.hasValue()) << text << " -> " << canonical << ": " << back.status().message();
    EXPECT_EQ(*back, *s) << text << " -> " << canonical;
    EXPECT_EQ(toString(*back), canonical) << text;
  }
  EXPECT_GT(parsed, 1000) << "too few random specs were valid to test the round trip";
}

}  // namespace
}  // namespace kvscope
