// SPDX-License-Identifier: GPL-3.0-or-later
// Plans (quantization.md §12): parsing, the canonical printer, resolution to per-layer specs
// and storage, against hand-written cases.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/quant/plan.h"

namespace kvscope {
namespace {

Plan plan(const std::string& text) {
  auto p = parsePlan(text);
  EXPECT_TRUE(p.hasValue()) << text << ": " << p.status().message();
  return p.hasValue() ? *p : Plan{};
}

QuantSpec spec(const std::string& text) {
  auto s = parseSpec(text);
  EXPECT_TRUE(s.hasValue()) << text << ": " << s.status().message();
  return s.hasValue() ? *s : QuantSpec{};
}

std::string planError(const std::string& text) {
  auto p = parsePlan(text);
  EXPECT_FALSE(p.hasValue()) << text << " parsed as " << (p ? toString(*p) : "");
  return p.hasValue() ? std::string() : p.status().message();
}

/// Each layer's canonical spec, joined by " | ".
std::string resolved(const std::string& text, int layers) {
  auto specs = resolve(plan(text), layers);
  EXPECT_TRUE(specs.hasValue()) << specs.status().message();
  std::string out;
  if (!specs) return out;
  for (const QuantSpec& s : *specs) out += (out.empty() ? "" : " | ") + toString(s);
  return out;
}

TEST(PlanParse, PlainSpecIsAOnePartPlan) {
  const Plan p = plan("int4,axis=channel,group=32");
  EXPECT_EQ(p.base, spec("int4,axis=channel,group=32"));
  EXPECT_TRUE(p.overrides.empty());
  EXPECT_TRUE(isUniform(p));
  EXPECT_EQ(toString(p), "int4,axis=channel,group=32");
  // A QuantSpec converts to the same plan.
  EXPECT_EQ(Plan(spec("int4,axis=channel,group=32")), p);
}

TEST(PlanParse, PartsRangesAndSpecs) {
  const Plan p = plan("q4_0;first2+last2:q8_0;3:int8,axis=token;1-2:none");
  EXPECT_EQ(p.base, spec("q4_0"));
  ASSERT_EQ(p.overrides.size(), 3u);
  ASSERT_EQ(p.overrides[0].layers.size(), 2u);
  EXPECT_EQ(p.overrides[0].layers[0].kind, LayerRange::Kind::First);
  EXPECT_EQ(p.overrides[0].layers[0].count, 2);
  EXPECT_EQ(p.overrides[0].layers[1].kind, LayerRange::Kind::Last);
  EXPECT_EQ(p.overrides[0].layers[1].count, 2);
  EXPECT_EQ(p.overrides[0].spec, spec("q8_0"));
  ASSERT_EQ(p.overrides[1].layers.size(), 1u);
  EXPECT_EQ(p.overrides[1].layers[0].kind, LayerRange::Kind::Span);
  EXPECT_EQ(p.overrides[1].layers[0].from, 3);
  EXPECT_EQ(p.overrides[1].layers[0].to, 3);
  EXPECT_EQ(p.overrides[1].spec, spec("int8"));
  EXPECT_EQ(p.overrides[2].layers[0].from, 1);
  EXPECT_EQ(p.overrides[2].layers[0].to, 2);
  EXPECT_EQ(p.overrides[2].spec, spec("none"));
  EXPECT_FALSE(isUniform(p));
}

TEST(PlanPrint, CanonicalPartsAndRanges) {
  // Specs print canonically (defaults dropped), N-N prints as N, spaces go.
  EXPECT_EQ(toString(plan(" q4_0 ; first2 + last2 : q8_0 ")), "q4_0;first2+last2:q8_0");
  EXPECT_EQ(toString(plan("int4,axis=token;2-2:int8,asym;0-3:int2,group=0")), "int4;2:int8;0-3:int2");
  EXPECT_EQ(toString(plan("nf4,group=64;last1:fp16")), "nf4;last1:fp16");
  // Round trip: the canonical string parses back to the same plan.
  for (const char* text : {"q4_0;first2+last2:q8_0", "int4,axis=channel,group=32,residual=128;0+4-7:int8,sym",
                           "fp8_e4m3;last3:fp8_e4m3,unitscale;1:none"}) {
    const Plan p = plan(text);
    EXPECT_EQ(plan(toString(p)), p) << text;
  }
}

TEST(PlanParse, ColonInsideASpecIsNotALayerSeparator) {
  // rot=hadamard:64 (the block rotation of quantization.md §1.3) puts a ':' inside a spec; the
  // text before the first ':' of the base part holds ',' and '=', so it is not LAYERS. Until the
  // parser knows that rotation the spec error itself must surface, not a layer error.
  auto base = parsePlan("q4_0,rot=hadamard:64");
  auto direct = parseSpec("q4_0,rot=hadamard:64");
  ASSERT_EQ(base.hasValue(), direct.hasValue());
  if (direct) {
    EXPECT_EQ(base->base, *direct);
    EXPECT_TRUE(base->overrides.empty());
  } else {
    EXPECT_EQ(base.status().message(), direct.status().message());
  }
  auto p = parsePlan("q4_0,rot=hadamard:64;first2:q8_0,rot=hadamard:64");
  if (direct) {
    ASSERT_TRUE(p.hasValue()) << p.status().message();
    EXPECT_EQ(p->base, *direct);
    ASSERT_EQ(p->overrides.size(), 1u);
    EXPECT_EQ(toString(p->overrides[0].layers), "first2");
    EXPECT_EQ(p->overrides[0].spec, *parseSpec("q8_0,rot=hadamard:64"));
    EXPECT_EQ(toString(*p), toString(*direct) + ";first2:" + toString(*parseSpec("q8_0,rot=hadamard:64")));
  } else {
    // Part 1 is read as a spec (its error is a spec error), never as layers.
    ASSERT_FALSE(p.hasValue());
    EXPECT_NE(p.status().message().find("part 1 'q4_0,rot=hadamard:64'"), std::string::npos) << p.status().message();
    EXPECT_NE(p.status().message().find("spec 'q4_0,rot=hadamard:64'"), std::string::npos) << p.status().message();
  }
  // A ':' inside the override's spec: only the first ':' separates LAYERS from SPEC.
  auto over = parsePlan("q4_0;1:q8_0,rot=hadamard:64");
  if (!over) {
    EXPECT_NE(over.status().message().find("spec 'q8_0,rot=hadamard:64'"), std::string::npos)
        << over.status().message();
  }
}

TEST(PlanParse, ErrorsNameThePartAndWhatIsAllowed) {
  std::string e = planError("q4_0;3-1:q8_0");
  EXPECT_NE(e.find("part 2 '3-1:q8_0'"), std::string::npos) << e;
  EXPECT_NE(e.find("ends before it starts"), std::string::npos) << e;
  EXPECT_NE(e.find("M ≥ N"), std::string::npos) << e;

  e = planError("q4_0;first0:q8_0");
  EXPECT_NE(e.find("part 2 'first0:q8_0'"), std::string::npos) << e;
  EXPECT_NE(e.find("'first0' names no layers"), std::string::npos) << e;

  e = planError("q4_0;last0:q8_0");
  EXPECT_NE(e.find("'last0' names no layers"), std::string::npos) << e;

  e = planError("q4_0;middle:q8_0");
  EXPECT_NE(e.find("'middle' is not a layer range"), std::string::npos) << e;
  EXPECT_NE(e.find("N, N-M, firstN, lastN"), std::string::npos) << e;

  e = planError("q4_0;1++2:q8_0");
  EXPECT_NE(e.find("empty range"), std::string::npos) << e;

  e = planError("q4_0;-1:q8_0");
  EXPECT_NE(e.find("'-1' is not a layer range"), std::string::npos) << e;

  e = planError("q4_0;:q8_0");
  EXPECT_NE(e.find("part 2 ':q8_0'"), std::string::npos) << e;
  EXPECT_NE(e.find("no layers given"), std::string::npos) << e;

  e = planError("q4_0;");
  EXPECT_NE(e.find("part 2 '' is empty"), std::string::npos) << e;
  e = planError("q4_0;;1:q8_0");
  EXPECT_NE(e.find("part 2 '' is empty"), std::string::npos) << e;
  e = planError(";1:q8_0");
  EXPECT_NE(e.find("part 1 '' is empty"), std::string::npos) << e;

  e = planError("q4_0;q8_0");
  EXPECT_NE(e.find("part 2 'q8_0' gives no layers"), std::string::npos) << e;

  e = planError("first2:q8_0;3:q4_0");
  EXPECT_NE(e.find("part 1 'first2:q8_0' names layers"), std::string::npos) << e;
  e = planError("first2:q8_0");
  EXPECT_NE(e.find("part 1 'first2:q8_0' names layers"), std::string::npos) << e;

  // A spec error inside a part keeps parseSpec's message and says which part.
  e = planError("q4_0;first2:int9");
  EXPECT_NE(e.find("plan 'q4_0;first2:int9': part 2 'first2:int9': spec 'int9': bit width '9' is out of range"),
            std::string::npos)
      << e;
  e = planError("int4,bogus;1:q8_0");
  EXPECT_NE(e.find("part 1 'int4,bogus': spec 'int4,bogus': unknown option 'bogus'"), std::string::npos) << e;

  // A one-part plan's error is the spec's own, word for word.
  EXPECT_EQ(planError("int9"), parseSpec("int9").status().message());
}

TEST(PlanResolve, LaterPartsWinFirstAndLastOnFiveLayers) {
  EXPECT_EQ(resolved("q4_0;first2+last2:q8_0", 5), "q8_0 | q8_0 | q4_0 | q8_0 | q8_0");
  EXPECT_EQ(resolved("int4;first3:int8;1:int2", 5), "int8 | int2 | int8 | int4 | int4");
  // The same parts in the other order: the first3 part now wins over layer 1.
  EXPECT_EQ(resolved("int4;1:int2;first3:int8", 5), "int8 | int8 | int8 | int4 | int4");
  EXPECT_EQ(resolved("int4;last1:int8;2-4:int2", 5), "int4 | int4 | int2 | int2 | int2");
  EXPECT_EQ(resolved("int4;2-4:int2;last1:int8", 5), "int4 | int4 | int2 | int2 | int8");
  EXPECT_EQ(resolved("int4;first5:int8", 5), "int8 | int8 | int8 | int8 | int8");
  EXPECT_EQ(resolved("int4", 5), "int4 | int4 | int4 | int4 | int4");
  // specForLayer agrees with resolve.
  const Plan p = plan("int4;first3:int8;1:int2");
  EXPECT_EQ(toString(specForLayer(p, 1, 5)), "int2");
  EXPECT_EQ(toString(specForLayer(p, 4, 5)), "int4");
}

TEST(PlanResolve, RangesBeyondTheModelAreErrors) {
  auto r = resolve(plan("int4;5:int8"), 5);
  ASSERT_FALSE(r.hasValue());
  EXPECT_NE(r.status().message().find("part 2 '5:int8': layer 5 does not exist (the model has 5 layers, 0 … 4)"),
            std::string::npos)
      << r.status().message();
  r = resolve(plan("int4;0-2+3-9:int8"), 5);
  ASSERT_FALSE(r.hasValue());
  EXPECT_NE(r.status().message().find("layer 9 does not exist"), std::string::npos) << r.status().message();
  r = resolve(plan("int4;1:int2;last6:int8"), 5);
  ASSERT_FALSE(r.hasValue());
  EXPECT_NE(r.status().message().find("part 3 'last6:int8': last6 names 6 layers"), std::string::npos)
      << r.status().message();
  EXPECT_TRUE(resolve(plan("int4;4:int8"), 5).hasValue());
}

TEST(PlanValidate, ChecksEachLayersSpecAndNamesTheLayer) {
  // D = 24 is not a power of two: rot=hadamard is refused on the layer that uses it.
  SpecContext ctx{true, 2, 24, true};
  EXPECT_TRUE(validatePlan(plan("int4;1:int8"), ctx, 3).isOk());
  Status s = validatePlan(plan("int4;2:int4,rot=hadamard"), ctx, 3);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message().rfind("layer 2: spec 'int4,rot=hadamard': ", 0), 0u) << s.message();
  // Every layer overridden: the unused base is not checked.
  EXPECT_TRUE(validatePlan(plan("int4,rot=hadamard;0-2:int4"), ctx, 3).isOk());
  // prerope on values is refused per layer.
  SpecContext values{false, 2, 24, true};
  s = validatePlan(plan("int4;0:int4,prerope"), values, 3);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message().rfind("layer 0: ", 0), 0u) << s.message();
  // A plain spec's error is validateSpec's own.
  EXPECT_EQ(validatePlan(plan("int4,rot=hadamard"), ctx, 3).message(),
            validateSpec(spec("int4,rot=hadamard"), ctx).message());
  // Ranges beyond the model.
  EXPECT_FALSE(validatePlan(plan("int4;3:int8"), ctx, 3).isOk());
}

TEST(PlanStorage, TwoLayerPlanByHand) {
  // 2 kv heads, 64 tokens, head dim 32 (N = 4096 elements per layer tensor).
  // Layer 0: int4 (axis=token, one group of 32 per token row of a head): 4·4096 payload bits
  //   + 2 heads·64 tokens·(16 scale + 16 min) = 16384 + 4096 = 20480 bits.
  // Layer 1: q8_0, blocks of 32 along the row of KVH·D = 64 values: 8·4096 payload bits
  //   + (4096/32 = 128 blocks)·16 = 32768 + 2048 = 34816 bits.
  const Plan p = plan("int4;1:q8_0");
  auto layers = planLayerStorage(p, 2, 2, 64, 32);
  ASSERT_TRUE(layers.hasValue()) << layers.status().message();
  ASSERT_EQ(layers->size(), 2u);
  EXPECT_DOUBLE_EQ((*layers)[0].totalBits(), 20480.0);
  EXPECT_DOUBLE_EQ((*layers)[1].totalBits(), 34816.0);
  const StorageCount sum = sumStorage(*layers);
  EXPECT_EQ(sum.elements, 8192);
  EXPECT_DOUBLE_EQ(sum.totalBits(), 55296.0);
  // bits per element of the plan: all storage over all elements = 55296 / 8192 = 6.75.
  EXPECT_DOUBLE_EQ(sum.bitsPerElement(), 6.75);
  EXPECT_DOUBLE_EQ(planStorage(p, 2, 2, 64, 32).bitsPerElement(), 6.75);
  // bytes per token with a uniform fp16 V (16·4096 bits a layer): (55296 + 2·65536) / 8 / 64.
  auto values = planLayerStorage(plan("fp16"), 2, 2, 64, 32);
  ASSERT_TRUE(values.hasValue());
  EXPECT_DOUBLE_EQ(bytesPerToken(*layers, *values, 64), (55296.0 + 131072.0) / 8.0 / 64.0);
  // A uniform plan reports one layer tensor, as a plain spec always did.
  const StorageCount one = planStorage(plan("int4;1:int4"), 2, 2, 64, 32);
  EXPECT_EQ(one.elements, 4096);
  EXPECT_DOUBLE_EQ(one.totalBits(), 20480.0);
}

}  // namespace
}  // namespace kvscope
