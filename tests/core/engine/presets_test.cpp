// SPDX-License-Identifier: GPL-3.0-or-later
// The preset table of quantization.md §9 and its per-dump resolution (§9, §10).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/quant/plan.h"
#include "core/engine/engine.h"
#include "core/engine/presets.h"

namespace kvscope {
namespace {

std::string canonical(const std::string& spec) {
  auto s = parseSpec(spec);
  return s ? toString(*s) : "unparsed: " + spec;
}

TEST(Presets, TurboquantRotatesByRhtOnPowersOfTwoAndRandomElsewhere) {
  auto p2 = presetSpecs("turboquant-3", {128, 4, 2});
  ASSERT_TRUE(p2.hasValue()) << p2.status().message();
  EXPECT_EQ(toString(p2->key), "tq3,rot=rht");
  auto odd = presetSpecs("turboquant-4", {96, 4, 2});
  ASSERT_TRUE(odd.hasValue()) << odd.status().message();
  EXPECT_EQ(toString(odd->value), "tq4,rot=random");
}

TEST(Presets, TableHoldsEverySpecPresetOnce) {
  const std::set<std::string> want = {
      "kivi-2", "kivi-4", "kvquant-4-1pct", "kvquant-3-1pct", "quarot-4", "llamacpp-q8_0",
      "llamacpp-q4_0", "llamacpp-q4_1", "llamacpp-q5_0", "llamacpp-q5_1", "llamacpp-iq4_nl",
      "llamacpp-q8_0-norot", "llamacpp-q4_0-norot", "llamacpp-q4_1-norot", "llamacpp-q5_0-norot",
      "llamacpp-q5_1-norot", "llamacpp-iq4_nl-norot", "vllm-fp8", "vllm-fp8-uncalibrated",
      "lmdeploy-int8", "lmdeploy-int4", "nvfp4", "mxfp4", "turboquant-3", "turboquant-4"};
  std::set<std::string> have;
  for (const Preset& p : presetTable()) {
    EXPECT_TRUE(have.insert(std::string(p.name)).second) << "duplicate " << p.name;
    EXPECT_FALSE(p.description.empty()) << p.name;
  }
  EXPECT_EQ(have, want);
}

// The llama.cpp rows, worked by hand from ggml-org/llama.cpp after PR #21038 (merge commit
// 744c0c73, 2026-04-01), src/llama-kv-cache.cpp:
// - llama_kv_cache::llama_kv_cache: attn_rot_k = !LLAMA_ATTN_ROT_DISABLE && ggml_is_quantized(type_k)
//   && n_embd_head_k % 64 == 0; attn_rot_v the same with type_v and n_embd_head_v.
// - build_input_k_rot: nrot = 64; do nrot *= 2 while D % nrot == 0; nrot /= 2 (D=128 -> 128,
//   D=64 -> 64, D=192 -> 64, D=256 -> 256).
// - build_input_v_rot: nrot = 64 (the doubling loop is commented out).
// D = 96 and D = 80 are not multiples of 64: no rotation for K or V.
struct LlamacppCase {
  int headDim;
  std::string key;    // suffix after the type
  std::string value;
};

TEST(Presets, LlamacppRotatesAsItsKvCacheDoesAtEachHeadDim) {
  const LlamacppCase cases[] = {
      {128, ",rot=hadamard:128", ",rot=hadamard:64"},
      {64, ",rot=hadamard:64", ",rot=hadamard:64"},
      {96, "", ""},
      {160, "", ""},
      {192, ",rot=hadamard:64", ",rot=hadamard:64"},
      {256, ",rot=hadamard:256", ",rot=hadamard:64"},
  };
  for (const char* type : {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"}) {
    for (const LlamacppCase& c : cases) {
      const KvShape shape{c.headDim, 4, 2};
      auto r = resolvePreset(std::string("llamacpp-") + type, shape);
      ASSERT_TRUE(r.hasValue()) << type << " D=" << c.headDim << ": " << r.status().message();
      EXPECT_EQ(r->key, std::string(type) + c.key) << type << " D=" << c.headDim;
      EXPECT_EQ(r->value, std::string(type) + c.value) << type << " D=" << c.headDim;
      ASSERT_EQ(r->notes.size(), 2u);
      if (c.key.empty()) {
        EXPECT_NE(r->notes[0].find("D = " + std::to_string(c.headDim) +
                                   " is not a multiple of 64: llama.cpp does not rotate"),
                  std::string::npos)
            << r->notes[0];
      }
      // The -norot row is the plain ggml type at every D.
      auto n = resolvePreset(std::string("llamacpp-") + type + "-norot", shape);
      ASSERT_TRUE(n.hasValue());
      EXPECT_EQ(n->key, type);
      EXPECT_EQ(n->value, type);
    }
  }
}

TEST(Presets, ShapeDependentPresetsNeedTheHeadDim) {
  for (const char* name : {"llamacpp-q4_0", "llamacpp-q4_0-norot", "quarot-4"}) {
    auto r = resolvePreset(name, {});
    ASSERT_FALSE(r.hasValue()) << name;
    EXPECT_NE(r.status().message().find("head dim"), std::string::npos) << r.status().message();
    EXPECT_NE(findPreset(name)->rule, nullptr);
  }
  EXPECT_EQ(findPreset("kivi-2")->rule, nullptr);
}

TEST(Presets, KiviFlushesKeysInChunksAndKeepsTheNewestValues) {
  // models/llama_kivi.py (jy-yuan/KIVI 04eeae06), LlamaAttention_KIVI.forward: keys enter the
  // quantized cache residual_length (128) at a time, values keep the newest 128.
  for (const char* name : {"kivi-2", "kivi-4"}) {
    auto r = resolvePreset(name, {128, 4, 2});
    ASSERT_TRUE(r.hasValue());
    const std::string bits = std::string(name).substr(5);
    EXPECT_EQ(r->key, "int" + bits + ",axis=channel,group=32,chunk=128");
    EXPECT_EQ(r->value, "int" + bits + ",axis=token,group=32,residual=128");
  }
}

TEST(Presets, QuarotRotatesEachHeadAndQuantizesWithAnIntegerZeroPoint) {
  // fake_quant/rotation_utils.py (spcl/QuaRot), QKRotationWrapper: H_D per head (D a power of
  // two, asserted), groups of k_groupsize = D; ActQuantizer's zero = round(-min/scale).
  auto r = resolvePreset("quarot-4", {128, 4, 2});
  ASSERT_TRUE(r.hasValue());
  EXPECT_EQ(r->key, "int4,zero=int,rot=hadamard,axis=token,group=128");
  EXPECT_EQ(r->value, r->key);
  auto r64 = resolvePreset("quarot-4", {64, 4, 2});
  ASSERT_TRUE(r64.hasValue());
  EXPECT_EQ(r64->key, "int4,zero=int,rot=hadamard,axis=token,group=64");
  auto r96 = resolvePreset("quarot-4", {96, 4, 2});
  ASSERT_FALSE(r96.hasValue());
  EXPECT_NE(r96.status().message().find("D = 96 is not a power of two"), std::string::npos);
}

// Needs the contract's chunk=, rot=hadamard:N and zero=int in the spec parser.
TEST(Presets, EveryResolvedSpecParsesAndValidatesAtTheShapesItApplies) {
  for (int d : {128, 64, 96, 80}) {
    for (const Preset& p : presetTable()) {
      const KvShape shape{d, 4, 2};
      auto specs = presetSpecs(p.name, shape);
      if (std::string(p.name) == "quarot-4" && (d & (d - 1)) != 0) {
        EXPECT_FALSE(specs.hasValue());
        continue;
      }
      // llama.cpp refuses a quantized cache whose block size 32 does not divide D (D = 80).
      if (std::string(p.name).starts_with("llamacpp-") && d % 32 != 0) {
        ASSERT_FALSE(specs.hasValue()) << p.name;
        EXPECT_NE(specs.status().message().find("does not divide n_embd_head_k=80"), std::string::npos);
        continue;
      }
      // nvfp4/mxfp4 need KVH·D to be a multiple of their block: true at KVH = 2 for these D.
      ASSERT_TRUE(specs.hasValue()) << p.name << " D=" << d << ": " << specs.status().message();
      EXPECT_TRUE(validateSpec(specs->key, {true, 2, d, true}).isOk()) << p.name << " D=" << d;
      EXPECT_TRUE(validateSpec(specs->value, {false, 2, d, true}).isOk()) << p.name << " D=" << d;
    }
  }
}

TEST(Presets, KiviAndKvquantReadAsTheSpecWrites) {
  auto kivi = presetSpecs("kivi-2", {128, 4, 2});
  ASSERT_TRUE(kivi.hasValue()) << kivi.status().message();
  EXPECT_EQ(kivi->key.bits, 2);
  EXPECT_EQ(kivi->key.axis, Axis::Channel);
  EXPECT_EQ(kivi->key.group, 32);
  EXPECT_EQ(kivi->key.residual, 0);  // a flushing window, not a sliding one
  EXPECT_EQ(toString(kivi->key), canonical("int2,chunk=128,axis=channel,group=32"));
  EXPECT_EQ(kivi->value.axis, Axis::Token);
  EXPECT_EQ(kivi->value.residual, 128);
  auto kvq = presetSpecs("kvquant-3-1pct", {128, 4, 2});
  ASSERT_TRUE(kvq.hasValue());
  EXPECT_TRUE(kvq->key.prerope);
  EXPECT_EQ(kvq->key.sinks, 1);
  EXPECT_EQ(kvq->key.outliers, 0.01);
  EXPECT_FALSE(kvq->value.prerope);
  EXPECT_EQ(toString(kvq->value), "nuq3,outliers=0.01");
  EXPECT_EQ(kvq->key.format, FormatId::Nuq);
  auto fp8 = presetSpecs("vllm-fp8-uncalibrated", {128, 4, 2});
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
  auto s = presetSpecs("kivi-3", {128, 4, 2});
  ASSERT_FALSE(s.hasValue());
  EXPECT_EQ(s.status().code(), StatusCode::InvalidArgument);
  EXPECT_NE(s.status().message().find("kivi-2"), std::string::npos);
  EXPECT_NE(s.status().message().find("allowed"), std::string::npos);
  EXPECT_EQ(findPreset("nope"), nullptr);
}

TEST(Presets, ResolvedStringsParseAsPlansWherePlansAreAccepted) {
  // A resolution may give a spec per layer (quantization.md §12): layer 0 q8_0, the rest q4_0.
  auto plans = parseResolvedPlans(ResolvedKv{"q4_0;first1:q8_0", "q8_0", {}}, "engine 'x'");
  ASSERT_TRUE(plans.hasValue()) << plans.status().message();
  EXPECT_EQ(toString(specForLayer(plans->key, 0, 4)), "q8_0");
  EXPECT_EQ(toString(specForLayer(plans->key, 1, 4)), "q4_0");
  EXPECT_EQ(toString(specForLayer(plans->key, 3, 4)), "q4_0");
  EXPECT_TRUE(isUniform(plans->value));
  EXPECT_EQ(toString(plans->value), "q8_0");
  // A plain preset reads as the one-part plans of its specs.
  auto resolved = resolvePreset("kivi-2", {128, 4, 2});
  ASSERT_TRUE(resolved.hasValue());
  auto kivi = parseResolvedPlans(*resolved, "preset kivi-2");
  auto specs = presetSpecs("kivi-2", {128, 4, 2});
  ASSERT_TRUE(kivi.hasValue() && specs.hasValue());
  EXPECT_EQ(kivi->key, Plan(specs->key));
  EXPECT_EQ(kivi->value, Plan(specs->value));
  // A bad part is an error naming the origin and the side.
  auto bad = parseResolvedPlans(ResolvedKv{"q4_0", "q4_0;1:int9", {}}, "preset p");
  ASSERT_FALSE(bad.hasValue());
  EXPECT_NE(bad.status().message().find("preset p, value: plan 'q4_0;1:int9': part 2"), std::string::npos)
      << bad.status().message();
}

// The lmdeploy-int8/-int4 presets are what --engine "lmdeploy --quant-policy 8|4 --backend turbomind
// --dtype float16" stores (src/turbomind/kernels/attention/quantization.h ConvertKvCache: codes in
// the model dtype, round half to even): one rule for both. They used to be int8,axis=token (fp32
// codes, rounded half away from zero) while the engine string resolved to another spec.
TEST(Presets, LmdeployPresetsAreTheEngineString) {
  for (const auto& [preset, policy] : {std::pair{"lmdeploy-int8", "8"}, std::pair{"lmdeploy-int4", "4"}}) {
    auto p = presetSpecs(preset, KvShape{128, 4, 2});
    ASSERT_TRUE(p.hasValue()) << p.status().message();
    auto e = resolveEngine(std::string("lmdeploy --quant-policy ") + policy + " --backend turbomind --dtype float16",
                           KvShape{128, 4, 2});
    ASSERT_TRUE(e.hasValue()) << e.status().message();
    auto es = parseResolved(*e, "lmdeploy");
    ASSERT_TRUE(es.hasValue());
    EXPECT_EQ(toString(p->key), toString(es->key)) << preset;
    EXPECT_EQ(toString(p->value), toString(es->value)) << preset;
    EXPECT_EQ(toString(p->key), std::string("int") + policy + ",round=even,codes=meta");
  }
}

}  // namespace
}  // namespace kvscope
