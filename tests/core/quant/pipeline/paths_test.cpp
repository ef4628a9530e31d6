// SPDX-License-Identifier: GPL-3.0-or-later
// The pipeline's two implementations of quantization.md §1 (core/quant/pipeline_reference.h, the
// plain composition; core/quant/pipeline_fast.h, the piece scheduler) give the same bits: every
// row of the format table under axes, groups, rotations, pre-RoPE keys, outliers, kept tokens and
// clipping, forced down each path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/inspect/view_data.h"
#include "core/quant/format_table.h"
#include "core/quant/pipeline_reference.h"
#include "core/quant/quantize.h"

namespace kvscope {
namespace {

Tensor3 randomTensor(int64_t h, int64_t t, int64_t d, uint32_t seed, float scale = 1.0f) {
  Tensor3 x(h, t, d);
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, scale);
  for (float& v : x.data) v = n(rng);
  // A few wide channels, as keys have, so that outliers and clipping matter.
  for (int64_t hh = 0; hh < h; ++hh)
    for (int64_t tt = 0; tt < t; ++tt)
      for (int64_t c = 0; c < d; c += 16) x.at(hh, tt, c) *= 8.0f;
  return x;
}

/// Bitwise equality (the sign of a zero included).
int64_t bitsDiffer(const Tensor3& a, const Tensor3& b) {
  if (a.data.size() != b.data.size()) return -1;
  int64_t n = 0;
  for (size_t i = 0; i < a.data.size(); ++i) n += std::memcmp(&a.data[i], &b.data[i], sizeof(float)) != 0 ? 1 : 0;
  return n;
}

/// Each format's spec names: a bit width within its range for the families that take one, and
/// for the grouped formats every axis with and without a group.
std::vector<std::string> formatSpecs() {
  std::vector<std::string> out;
  for (const FormatInfo& info : formatTable()) {
    std::string name(info.name);
    if (info.hasBits) name += std::to_string(std::clamp(3, info.minBits, info.maxBits));
    if (!info.grouped) {
      out.push_back(name);
      continue;
    }
    for (const char* axis : {"axis=token", "axis=token,group=16", "axis=channel", "axis=channel,group=8",
                             "axis=head", "axis=tensor"}) {
      out.push_back(name + "," + axis);
    }
  }
  return out;
}

struct Counts {
  int compared = 0, fast = 0, refusedByBoth = 0;
};

/// Runs `text` down both paths on `key` (with `preRope` as its pre-RoPE keys) and compares; with
/// onlyFast, skips specs the fast strategy does not cover (both paths would be the reference).
void compareBothPaths(const Tensor3& key, const Tensor3& preRope, const std::string& text, bool onlyFast,
                      Counts& counts) {
  auto parsed = parseSpec(text);
  if (!parsed.hasValue()) return;  // an option this format does not take (clip on a block format, …)
  const QuantSpec qs = *parsed;
  if (onlyFast && autoQuantPath(qs, key.heads, key.tokens, key.dim) != QuantPath::Fast) return;
  QuantInput in{&key, &preRope, {}};
  in.rope.theta = 500000.0;
  in.path = QuantPath::Reference;
  QuantOutput reference;
  const Status refStatus = quantizeTensorInto(in, qs, reference);
  in.path = QuantPath::Fast;
  QuantOutput fast;
  const Status fastStatus = quantizeTensorInto(in, qs, fast);
  ASSERT_EQ(refStatus.isOk(), fastStatus.isOk()) << text << ": " << refStatus.message() << " / " << fastStatus.message();
  if (!refStatus.isOk()) {
    EXPECT_EQ(refStatus.message(), fastStatus.message()) << text;
    ++counts.refusedByBoth;
    return;
  }
  EXPECT_EQ(reference.path, QuantPath::Reference) << text;
  // A forced fast path runs the fast strategy exactly where Auto would (and hands a misjudged
  // outlier floor to the reference, which these inputs never cause).
  EXPECT_EQ(fast.path, autoQuantPath(qs, key.heads, key.tokens, key.dim)) << text;
  EXPECT_EQ(bitsDiffer(reference.reconstruction, fast.reconstruction), 0)
      << text << " on [" << key.heads << "," << key.tokens << "," << key.dim << "]";
  EXPECT_EQ(reference.storage.totalBits(), fast.storage.totalBits()) << text;
  EXPECT_EQ(reference.storage.outlierBits, fast.storage.outlierBits) << text;
  ++counts.compared;
  counts.fast += fast.path == QuantPath::Fast ? 1 : 0;
}

TEST(PipelinePaths, EveryFormatAndOptionGivesTheSameBitsOnBothPaths) {
  // D = 32 with 300 tokens: several pieces per head, an outlier floor from all the rows; and, for
  // the specs the fast strategy covers, D = 64 with 600 tokens, where the floor samples 1 row in 2.
  struct Shape {
    int64_t kvh, t, d;
    bool onlyFast;
  };
  const char* options[] = {"",
                           ",rot=hadamard",
                           ",outliers=0.02",
                           ",rot=hadamard,outliers=0.01",
                           ",rot=hadamard:8,outliers=0.01,sinks=2,residual=5",
                           ",rot=rht,seed=3,chunk=64",
                           ",prerope,sinks=1,outliers=0.01",
                           ",sinks=3,chunk=16",
                           ",clip=0.9",
                           ",clip=mse,residual=7"};
  Counts counts;
  for (const Shape& sh : {Shape{2, 300, 32, false}, Shape{3, 600, 64, true}}) {
    const Tensor3 key = randomTensor(sh.kvh, sh.t, sh.d, 5, 1.5f);
    const Tensor3 preRope = randomTensor(sh.kvh, sh.t, sh.d, 6, 1.5f);
    for (const std::string& base : formatSpecs()) {
      for (const char* opt : options) {
        compareBothPaths(key, preRope, base + opt, sh.onlyFast, counts);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
  // Not a vacuous comparison: most specs ran, and a good share of them down the fast strategy.
  EXPECT_GT(counts.compared, 550) << counts.fast;
  EXPECT_GT(counts.fast, 350) << counts.compared;
  EXPECT_LT(counts.fast, counts.compared) << "the codebook formats and tensor-wide scales take the reference";
}

TEST(PipelinePaths, AMisjudgedOutlierFloorHandsOverToTheReference) {
  // Every third row large and the sampled rows (1 in 12) all large: the fast strategy's floor lies
  // above most true outliers, it finds too few candidates, and the reference runs instead.
  Tensor3 x = randomTensor(2, 3100, 32, 43, 0.1f);
  for (int64_t h = 0; h < x.heads; ++h)
    for (int64_t t = 0; t < x.tokens; t += 3)
      for (int64_t c = 0; c < x.dim; ++c) x.at(h, t, c) *= 50.0f;
  const QuantSpec qs = *parseSpec("int4,outliers=0.2");
  ASSERT_EQ(autoQuantPath(qs, x.heads, x.tokens, x.dim), QuantPath::Fast);
  QuantInput in{&x, nullptr, {}};
  in.path = QuantPath::Fast;
  auto fast = quantizeTensor(in, qs);
  in.path = QuantPath::Reference;
  auto reference = quantizeTensor(in, qs);
  ASSERT_TRUE(fast.hasValue() && reference.hasValue());
  EXPECT_EQ(fast->path, QuantPath::Reference);
  EXPECT_EQ(bitsDiffer(fast->reconstruction, reference->reconstruction), 0);
}

TEST(PipelinePaths, BothPathsRefuseNonFiniteValuesAndCancelAlike) {
  for (QuantPath path : {QuantPath::Reference, QuantPath::Fast}) {
    for (const char* text : {"int4,sinks=2", "int4,rot=hadamard,outliers=0.05", "q4_0,residual=3"}) {
      for (int64_t token : {0, 5, 9}) {
        Tensor3 x = randomTensor(2, 10, 32, 3);
        x.at(1, token, 7) = std::nanf("");
        QuantInput in{&x, nullptr, {}};
        in.path = path;
        auto out = quantizeTensor(in, *parseSpec(text));
        ASSERT_FALSE(out.hasValue()) << text << " token " << token;
        EXPECT_NE(out.status().message().find("head 1, token " + std::to_string(token) + ", channel 7"),
                  std::string::npos)
            << out.status().message();
      }
    }
    Tensor3 x = randomTensor(4, 64, 32, 1);
    QuantInput in{&x, nullptr, {}};
    in.path = path;
    int calls = 0;
    auto cancelled = quantizeTensor(in, *parseSpec("int4,rot=hadamard,outliers=0.01"),
                                    [&](double, std::string_view) { return ++calls < 2; });
    ASSERT_FALSE(cancelled.hasValue());
    EXPECT_EQ(cancelled.status().code(), StatusCode::Cancelled);
  }
}

TEST(PipelinePaths, TheHistogramsFormatInputIsThePipelinesStepsTwoToFour) {
  // view_data's format input for one head is the reference's step-5 input for that head: the
  // quantized tokens, rotated, outliers zeroed (checked here against the pieces the pipeline
  // exposes: the outliers it sets aside are exactly the values zeroed).
  const Tensor3 x = randomTensor(3, 40, 32, 9);
  const QuantSpec qs = *parseSpec("int4,rot=hadamard,outliers=0.02,sinks=2,residual=4");
  Tensor3 all;
  std::vector<Outlier> setAside;
  ASSERT_EQ(formatInputInto(x, qs, 0, 3, all, &setAside), FormatInputEnd::Done);
  ASSERT_EQ(all.tokens, 34);
  EXPECT_EQ(static_cast<int64_t>(setAside.size()), 3 * outlierCount(0.02, 34 * 32));
  for (const Outlier& o : setAside) {
    EXPECT_EQ(all.data[o.index], 0.0f);
    EXPECT_NE(o.value, 0.0f);
  }
  Tensor3 one;
  int64_t first = -1;
  ASSERT_TRUE(formatInputInto(x, 1, 1, qs, one, &first).isOk());  // the histogram's call (core/inspect/view_data.h)
  EXPECT_EQ(first, 2);
  Tensor3 middle;
  copyHeads(all, 1, 1, middle);
  EXPECT_EQ(bitsDiffer(one, middle), 0);
}

}  // namespace
}  // namespace kvscope
