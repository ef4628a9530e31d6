// SPDX-License-Identifier: GPL-3.0-or-later
// The GUI's view data of one kv head: per-head quantization must equal the head's slice of the
// whole layer's (or fall back to the whole layer), and the heat map, histogram and median must
// agree with brute-force references.
#include "core/inspect/view_data.h"

#include <gtest/gtest.h>

#include <limits>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/quant/codebook.h"
#include "core/quant/fp_types.h"
#include "core/quant/format_table.h"

namespace kvscope {
namespace {

// Heads of very different scale, so that one scale for the layer differs from one per head.
Tensor3 layerTensor(int64_t heads, int64_t tokens, int64_t dim, uint32_t seed) {
  Tensor3 x(heads, tokens, dim);
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (int64_t h = 0; h < heads; ++h) {
    const float scale = std::pow(3.0f, static_cast<float>(h));
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t d = 0; d < dim; ++d) x.at(h, t, d) = scale * n(rng);
    }
  }
  // An outlier for outliers=, clipping and max-abs scales (in head 1, when there is one).
  if (heads > 1 && tokens > 7 && dim > 5) x.at(1, 7, 5) = 40.0f;
  return x;
}

Tensor3 headOf(const Tensor3& x, int64_t h) {
  Tensor3 y;
  copyHeads(x, h, 1, y);
  return y;
}

QuantSpec spec(const std::string& text) {
  auto s = parseSpec(text);
  EXPECT_TRUE(s.hasValue()) << text << ": " << (s ? "" : s.status().message());
  return s ? *s : QuantSpec{};
}

// Every format of the table with every grouping it accepts, plus the pipeline's other steps.
std::vector<QuantSpec> specsToCheck() {
  std::vector<QuantSpec> out;
  for (const FormatInfo& f : formatTable()) {
    QuantSpec base = defaultSpec(f.id, f.hasBits ? std::clamp(4, f.minBits, f.maxBits) : 0);
    if (!f.grouped) {
      out.push_back(base);
      continue;
    }
    for (Axis axis : {Axis::Tensor, Axis::Head, Axis::Token, Axis::Channel}) {
      QuantSpec s = base;
      s.axis = axis;
      out.push_back(s);
      if (axis == Axis::Token || axis == Axis::Channel) {
        s.group = 16;
        out.push_back(s);
      }
    }
  }
  for (const char* text : {"int3,sym,axis=channel,group=8", "int4,clip=0.9", "int2,axis=tensor,clip=mse",
                           "int4,outliers=0.01,sinks=2,residual=3", "int4,rot=hadamard,axis=head",
                           "fp8_e4m3,unitscale", "fp8_e5m2,axis=tensor,scale=bf16", "nf4,axis=channel,group=8"}) {
    out.push_back(spec(text));
  }
  return out;
}

TEST(QuantizesPerHead, OneHeadEqualsItsSliceOfTheLayerWheneverItSaysSo) {
  const Tensor3 x = layerTensor(4, 40, 64, 1);
  int perHead = 0, whole = 0;
  for (const QuantSpec& s : specsToCheck()) {
    SCOPED_TRACE(toString(s));
    auto layer = quantizeTensor(QuantInput{&x, nullptr, {}}, s);
    ASSERT_TRUE(layer.hasValue()) << layer.status().message();
    bool allEqual = true;
    for (int64_t h = 0; h < x.heads; ++h) {
      const Tensor3 one = headOf(x, h);
      auto head = quantizeTensor(QuantInput{&one, nullptr, {}}, s);
      ASSERT_TRUE(head.hasValue()) << head.status().message();
      const Tensor3 expected = headOf(layer->reconstruction, h);
      if (head->reconstruction.data != expected.data) allEqual = false;
    }
    if (quantizesPerHead(s, x.dim)) {
      ++perHead;
      EXPECT_TRUE(allEqual) << "per-head quantization differs from the layer's slice";
    } else {
      ++whole;
      // The predicate is not merely cautious: these specs really need the whole layer here.
      EXPECT_FALSE(allEqual) << "needlessly quantizes the whole layer";
    }
  }
  EXPECT_GT(perHead, 20);
  EXPECT_GE(whole, 5);  // axis=tensor of int, fp8 (×2), nf4, nvfp4, …
}

TEST(QuantizesPerHead, BlocksThatCrossHeadsNeedTheWholeLayer) {
  // D = 48: the token row 4·48 = 192 splits into blocks of 32, but a block spans two heads.
  EXPECT_FALSE(quantizesPerHead(spec("q4_0"), 48));
  EXPECT_FALSE(quantizesPerHead(spec("mxfp4"), 48));
  EXPECT_TRUE(quantizesPerHead(spec("q4_0"), 64));
  EXPECT_FALSE(quantizesPerHead(spec("nvfp4"), 64));
  EXPECT_TRUE(quantizesPerHead(spec("fp16"), 48));
  const Tensor3 x = layerTensor(4, 12, 48, 2);
  const Tensor3 key = x, value = layerTensor(4, 12, 48, 3);
  LayerViewInput input{&key, &value, nullptr, nullptr, {}, 0};
  ViewRequest request;
  request.kvHead = 1;
  ViewWorkspace ws;
  ViewData out;
  ASSERT_TRUE(computeViewData(input, nullptr, spec("q4_0"), spec("q4_0"), request, ws, out).isOk());
  EXPECT_TRUE(out.wholeLayer);
  auto layer = quantizeTensor(QuantInput{&key, nullptr, {}}, spec("q4_0"));
  ASSERT_TRUE(layer.hasValue());
  EXPECT_EQ(out.keyHat.data, layer->reconstruction.data);
  EXPECT_EQ(out.hatHead(1), 1);
}

TEST(FormatInput, OneHeadEqualsItsSliceOfTheLayer) {
  const Tensor3 x = layerTensor(3, 30, 16, 4);
  const QuantSpec s = spec("int4,rot=hadamard,outliers=0.05,sinks=2,residual=4");
  Tensor3 all, one;
  int64_t first = -1;
  ASSERT_TRUE(formatInputInto(x, 0, 3, s, all, &first).isOk());
  EXPECT_EQ(first, 2);
  ASSERT_EQ(all.tokens, 24);
  ASSERT_TRUE(formatInputInto(x, 2, 1, s, one, &first).isOk());
  EXPECT_EQ(one.data, headOf(all, 2).data);
  // ceil(0.05·24·16) = 20 zeros per head from outliers (the rotation makes exact zeros unlikely).
  EXPECT_EQ(std::count(one.data.begin(), one.data.end(), 0.0f), 20);
}

// A non-finite value among the quantized tokens of the heads asked for is an error naming it, as
// the pipeline's own refusal does; one outside them (another head, a kept sink token) is not.
TEST(FormatInput, ANonFiniteValueInTheHeadsIsAnErrorNamingIt) {
  Tensor3 x = layerTensor(3, 30, 16, 4);
  const QuantSpec s = spec("int4,rot=hadamard,sinks=2");
  x.row(1, 7)[5] = std::numeric_limits<float>::quiet_NaN();
  x.row(2, 0)[3] = std::numeric_limits<float>::infinity();  // a sink token: kept, never quantized
  Tensor3 out;
  int64_t first = -1;
  const Status bad = formatInputInto(x, 1, 1, s, out, &first);
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.code(), StatusCode::InvalidData);
  EXPECT_EQ(bad.message().rfind("input: non-finite value at head 1, token 7", 0), 0u) << bad.message();
  EXPECT_TRUE(formatInputInto(x, 0, 1, s, out, &first).isOk());
  EXPECT_TRUE(formatInputInto(x, 2, 1, s, out, &first).isOk());
}

double bruteMedianAbs(std::vector<float> v) {
  for (float& x : v) x = std::fabs(x);
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (static_cast<double>(v[n / 2 - 1]) + v[n / 2]);
}

TEST(MedianAbs, EqualsTheSortedCopysMiddle) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<int64_t> counts;
  for (int64_t n : {1, 2, 3, 4, 7, 10, 1000, 1001, 200000, 200001}) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = normal(rng);
    EXPECT_EQ(medianAbs(v.data(), n, counts), bruteMedianAbs(v)) << n;
  }
  // Ties, signed zeros, values sharing their upper 16 bits, and the middle pair straddling them.
  const std::vector<std::vector<float>> cases = {
      {0.0f, -0.0f, 0.0f, 1.0f}, {3.0f, -3.0f, 3.0f, 3.0f}, {1.0f, 1.0000001f, 1.0000002f, 1.0000004f},
      {-5.0f, 1.0f, 2.0f, 1e-30f, 7.0f, 2.0f}, {1.0f, 2.0f}, {1e-38f, 2e-38f, 4.0f, -8.0f}};
  for (const auto& v : cases) {
    EXPECT_EQ(medianAbs(v.data(), static_cast<int64_t>(v.size()), counts), bruteMedianAbs(v));
  }
  EXPECT_EQ(medianAbs(nullptr, 0, counts), 0.0);
}

TEST(Histogram, CountsAndStatisticsMatchABruteForceReference) {
  const Tensor3 x = layerTensor(2, 300, 40, 6);  // 12 000 values per head: the serial path …
  Tensor3 hat = x;
  for (float& v : hat.data) v = std::round(v * 2.0f) / 2.0f;
  const Tensor3 big = layerTensor(1, 3000, 64, 7);  // … and 192 000: the threaded one
  Tensor3 bigHat = big;
  for (float& v : bigHat.data) v = std::round(v);
  HistogramWorkspace ws;
  struct Case {
    const Tensor3* x;
    const Tensor3* hat;
    int64_t head;
    HistogramScope scope;
    int64_t index;
    int bins;
  };
  for (const Case& c : {Case{&x, &hat, 1, HistogramScope::Head, 0, 37}, Case{&x, &hat, 0, HistogramScope::Channel, 5, 8},
                        Case{&x, nullptr, 1, HistogramScope::Token, 7, 16}, Case{&big, &bigHat, 0, HistogramScope::Head, 0, 128}}) {
    std::vector<float> values, hats;
    for (int64_t t = 0; t < c.x->tokens; ++t) {
      for (int64_t d = 0; d < c.x->dim; ++d) {
        const bool in = c.scope == HistogramScope::Head || (c.scope == HistogramScope::Channel && d == c.index) ||
                        (c.scope == HistogramScope::Token && t == c.index);
        if (!in) continue;
        values.push_back(c.x->at(c.head, t, d));
        if (c.hat) hats.push_back(c.hat->at(c.head, t, d));
      }
    }
    HistogramData h;
    computeHistogramInto(*c.x, c.head, c.hat, c.head, c.scope, c.index, c.bins, ws, h);
    ASSERT_EQ(h.count, static_cast<int64_t>(values.size()));
    const auto [mn, mx] = std::minmax_element(values.begin(), values.end());
    EXPECT_EQ(h.min, *mn);
    EXPECT_EQ(h.max, *mx);
    double lo = *mn, hi = *mx;
    for (float v : hats) {
      lo = std::min(lo, static_cast<double>(v));
      hi = std::max(hi, static_cast<double>(v));
    }
    std::vector<double> original(static_cast<size_t>(c.bins)), reconstructed(static_cast<size_t>(c.bins));
    const auto bin = [&](double v) { return std::clamp(static_cast<int>((v - lo) / (hi - lo) * c.bins), 0, c.bins - 1); };
    for (float v : values) original[static_cast<size_t>(bin(v))] += 1;
    for (float v : hats) reconstructed[static_cast<size_t>(bin(v))] += 1;
    EXPECT_EQ(h.original, original);
    if (c.hat) EXPECT_EQ(h.reconstructed, reconstructed);
    else EXPECT_TRUE(h.reconstructed.empty());
    ASSERT_EQ(h.edges.size(), static_cast<size_t>(c.bins) + 1);
    EXPECT_DOUBLE_EQ(h.edges.front(), lo);
    EXPECT_DOUBLE_EQ(h.edges.back(), hi);
    long double mean = 0;
    for (float v : values) mean += v;
    mean /= values.size();
    long double m2 = 0, m4 = 0, maxAbs = 0;
    for (float v : values) {
      const long double d = v - mean;
      m2 += d * d;
      m4 += d * d * d * d;
      maxAbs = std::max(maxAbs, static_cast<long double>(std::fabs(v)));
    }
    m2 /= values.size();
    m4 /= values.size();
    EXPECT_NEAR(h.kurtosis, static_cast<double>(m4 / (m2 * m2)), 1e-9 * h.kurtosis);
    EXPECT_DOUBLE_EQ(h.maxOverMedian, static_cast<double>(maxAbs) / bruteMedianAbs(values));
  }
}

TEST(Histogram, ValuesOnAndBesideEdgesFallInTheBinTheFormulaGives) {
  // Every edge k·span/bins as a float and its two float neighbours, for several ranges and bin
  // counts: the counts must be those of floor((v − lo) / (hi − lo) · bins), clamped.
  HistogramWorkspace ws;
  HistogramData h;
  for (float hi : {3.0f, 0.3f, 7.0f, 10.0f, 1e-3f}) {
    for (int bins : {4, 7, 10, 128, 1000}) {
      std::vector<float> v{0.0f, hi};
      for (int k = 1; k < bins; ++k) {
        const auto edge = static_cast<float>(static_cast<double>(hi) * k / bins);
        v.insert(v.end(), {edge, std::nextafter(edge, 0.0f), std::nextafter(edge, hi)});
      }
      Tensor3 x(1, 1, static_cast<int64_t>(v.size()));
      x.data = v;
      computeHistogramInto(x, 0, nullptr, 0, HistogramScope::Head, 0, bins, ws, h);
      std::vector<double> expected(static_cast<size_t>(bins));
      for (float value : v) {
        const double t = (static_cast<double>(value) - 0.0) / (static_cast<double>(hi) - 0.0) * bins;
        expected[static_cast<size_t>(std::clamp(static_cast<int>(t), 0, bins - 1))] += 1;
      }
      ASSERT_EQ(h.original, expected) << hi << " " << bins;
    }
  }
}

TEST(Heatmap, CellsAreTheMaximumOfTheirTokenBin) {
  const Tensor3 x = layerTensor(2, 1000, 24, 8);
  Tensor3 hat = x;
  for (float& v : hat.data) v = std::round(v * 4.0f) / 4.0f;
  const Tensor3 hatHead = headOf(hat, 1);
  for (HeatmapValue value : {HeatmapValue::Magnitude, HeatmapValue::Normalized, HeatmapValue::Error}) {
    HeatmapData d;
    // The reconstruction of one head alone (hatHead 0) against head 1 of the layer.
    computeHeatmapInto(x, 1, &hatHead, 0, value, 300, d);
    ASSERT_EQ(d.columns, 300);
    ASSERT_EQ(d.channels, 24);
    float maxValue = 0;
    for (int c = 0; c < d.channels; ++c) {
      double sum = 0, sum2 = 0;
      for (int t = 0; t < 1000; ++t) {
        sum += x.at(1, t, c);
        sum2 += static_cast<double>(x.at(1, t, c)) * x.at(1, t, c);
      }
      const double sigma = std::sqrt(sum2 / 1000 - (sum / 1000) * (sum / 1000));
      float channelMax = 0;
      for (int b = 0; b < d.columns; ++b) {
        float best = -1;
        int token = -1;
        for (int t = b * 1000 / 300; t < (b + 1) * 1000 / 300; ++t) {
          const float v = x.at(1, t, c);
          const float m = value == HeatmapValue::Magnitude ? std::fabs(v)
                          : value == HeatmapValue::Error  ? std::fabs(hat.at(1, t, c) - v)
                                                          : static_cast<float>(std::fabs(v) / sigma);
          if (m > best) {
            best = m;
            token = t;
          }
        }
        ASSERT_FLOAT_EQ(d.cell(c, b), best) << c << " " << b;
        ASSERT_EQ(d.cellToken[static_cast<size_t>(c) * 300 + static_cast<size_t>(b)], token);
        channelMax = std::max(channelMax, best);
      }
      EXPECT_EQ(d.channelMax[static_cast<size_t>(c)], channelMax);
      maxValue = std::max(maxValue, channelMax);
    }
    EXPECT_EQ(d.maxValue, maxValue);
  }
}

// One head's view data must be what the whole layer's view data shows for that head.
TEST(ViewData, OneHeadEqualsTheWholeLayersViewOfThatHead) {
  const Tensor3 key = layerTensor(4, 96, 32, 9), value = layerTensor(4, 96, 32, 10);
  const Tensor3 pre = layerTensor(4, 96, 32, 11), query = layerTensor(8, 6, 32, 12);
  LayerViewInput input{&key, &value, &query, &pre, RopeParams{}, 0};
  for (const char* keyText : {"int3,axis=channel,group=16", "q4_0", "int4,prerope,sinks=2,outliers=0.01", "nf4"}) {
    SCOPED_TRACE(keyText);
    ViewRequest request;
    request.kvHead = 2;
    request.keyPreRopeHat = true;
    request.heatmapTensor = TensorKind::Key;
    request.heatmapValue = HeatmapValue::Error;
    request.heatmapColumns = 40;
    request.histogramTensor = TensorKind::KeyPreRope;
    request.histogramBins = 32;
    request.group = true;
    request.groupToken = 50;
    request.groupChannel = 3;
    request.queryHead = 5;
    request.queryIndex = 4;
    ViewWorkspace ws;
    ViewData one, whole;
    const auto owner = std::make_shared<int>(0);
    ASSERT_TRUE(computeViewData(input, owner, spec(keyText), spec("int2"), request, ws, one).isOk());
    EXPECT_FALSE(one.wholeLayer);
    EXPECT_EQ(one.keyHat.heads, 1);
    request.wholeLayer = true;
    ViewWorkspace ws2;
    ASSERT_TRUE(computeViewData(input, owner, spec(keyText), spec("int2"), request, ws2, whole).isOk());
    EXPECT_TRUE(whole.wholeLayer);
    EXPECT_EQ(one.keyHat.data, headOf(whole.keyHat, 2).data);
    EXPECT_EQ(one.valueHat.data, headOf(whole.valueHat, 2).data);
    ASSERT_TRUE(one.keyPreRopeHat && whole.keyPreRopeHat);
    EXPECT_EQ(one.keyPreRopeHat->data, headOf(*whole.keyPreRopeHat, 2).data);
    EXPECT_EQ(one.heatmap.cells, whole.heatmap.cells);
    EXPECT_EQ(one.heatmap.cellToken, whole.heatmap.cellToken);
    EXPECT_GT(one.heatmap.maxValue, 0.0f);
    EXPECT_EQ(one.histogram.original, whole.histogram.original);
    EXPECT_EQ(one.histogram.reconstructed, whole.histogram.reconstructed);
    EXPECT_EQ(one.histogram.maxOverMedian, whole.histogram.maxOverMedian);
    ASSERT_TRUE(one.group && whole.group) << one.groupError << whole.groupError;
    EXPECT_EQ(one.group->levels, whole.group->levels);
    EXPECT_EQ(one.group->size, whole.group->size);
    ASSERT_TRUE(one.row && whole.row);
    EXPECT_EQ(one.row->queryHead, 5);
    EXPECT_EQ(one.row->kvHead, 2);
    EXPECT_EQ(whole.row->kvHead, 2);
    EXPECT_EQ(one.row->keyOnly.scores, whole.row->keyOnly.scores);
    EXPECT_EQ(one.row->joint.probabilities, whole.row->joint.probabilities);
    EXPECT_EQ(one.row->joint.kl, whole.row->joint.kl);
    EXPECT_EQ(one.hatHead(2), 0);
    EXPECT_EQ(one.hatHead(1), -1);
    EXPECT_EQ(whole.hatHead(1), 1);
    // Storage is the layer's, whichever part was quantized.
    EXPECT_EQ(one.keyStorage.elements, 4 * 96 * 32);
  }
}

TEST(ViewData, ReusesTheHeadSlicesUntilTheHeadChanges) {
  const Tensor3 key = layerTensor(2, 20, 16, 13), value = layerTensor(2, 20, 16, 14);
  LayerViewInput input{&key, &value, nullptr, nullptr, {}, 0};
  ViewWorkspace ws;
  ViewData out;
  ViewRequest request;
  request.kvHead = 0;
  const auto owner = std::make_shared<int>(0);
  ASSERT_TRUE(computeViewData(input, owner, spec("int4"), spec("int4"), request, ws, out).isOk());
  const float* slice = ws.key.data.data();
  const float* hat = out.keyHat.data.data();
  ASSERT_TRUE(computeViewData(input, owner, spec("int2"), spec("int2"), request, ws, out).isOk());
  EXPECT_EQ(ws.key.data.data(), slice);  // not copied again
  EXPECT_EQ(out.keyHat.data.data(), hat);  // quantized into the same buffer
  request.kvHead = 1;
  ASSERT_TRUE(computeViewData(input, owner, spec("int2"), spec("int2"), request, ws, out).isOk());
  EXPECT_EQ(ws.key.data, headOf(key, 1).data);
  auto expected = quantizeTensor(QuantInput{&key, nullptr, {}}, spec("int2"));
  ASSERT_TRUE(expected.hasValue());
  EXPECT_EQ(out.keyHat.data, headOf(expected->reconstruction, 1).data);
}

TEST(ViewData, RejectsAQueryHeadOfAnotherKvHead) {
  const Tensor3 key = layerTensor(2, 20, 16, 15), value = key, query = layerTensor(4, 3, 16, 16);
  LayerViewInput input{&key, &value, &query, nullptr, {}, 0};
  ViewWorkspace ws;
  ViewData out;
  ViewRequest request;
  request.kvHead = 0;
  request.queryHead = 3;  // kv head 1's
  const Status s = computeViewData(input, nullptr, spec("int4"), spec("int4"), request, ws, out);
  EXPECT_EQ(s.code(), StatusCode::InvalidArgument);
  EXPECT_NE(s.message().find("query head 3"), std::string::npos) << s.message();
}

// Index of the centroid nearest v (ties: the lower one, as tq rounds).
size_t nearestCentroid(const std::vector<double>& c, double v) {
  size_t best = 0;
  for (size_t i = 1; i < c.size(); ++i) {
    if (std::fabs(v - c[i]) < std::fabs(v - c[best])) best = i;
  }
  return best;
}

// tq3 in its own space: every token's rotated coordinates divided by its norm form a unit
// vector, the levels drawn are the Lloyd–Max centroids of codebook.h, each reconstructed value
// is the centroid nearest its input (the rule of §11), and the reconstruction in the dump's
// space has the norm meta(‖v‖)·‖û‖ (the rotation is orthogonal).
TEST(FormatSpace, Tq3ShowsUnitVectorsOnTheCodebooksCentroids) {
  const Tensor3 key = layerTensor(2, 12, 16, 21), value = layerTensor(2, 12, 16, 22);
  LayerViewInput input{&key, &value, nullptr, nullptr, {}, 0};
  ViewRequest request;
  request.kvHead = 1;
  request.histogramTensor = TensorKind::Key;
  request.histogramScope = HistogramScope::Head;
  request.histogramBins = 24;
  request.formatSpace = true;
  request.group = true;
  request.groupToken = 5;
  request.groupChannel = 3;
  ViewWorkspace ws;
  ViewData out;
  const QuantSpec tq3 = spec("tq3");
  ASSERT_TRUE(computeViewData(input, nullptr, tq3, spec("int4"), request, ws, out).isOk());
  ASSERT_TRUE(out.formatSpace.has_value());
  const FormatSpaceData& f = *out.formatSpace;
  EXPECT_TRUE(f.normalized);
  ASSERT_EQ(f.input.tokens, 12);
  ASSERT_EQ(f.input.dim, 16);
  const std::vector<double>& centroids = codebook::sphereCodebook(16, 3).centroids;
  ASSERT_TRUE(f.group.has_value()) << f.note;
  EXPECT_EQ(f.group->levels, centroids);
  EXPECT_EQ(f.group->codesTotal, 8);
  const int64_t hat = out.hatHead(1);
  ASSERT_GE(hat, 0);
  for (int64_t t = 0; t < 12; ++t) {
    double norm2 = 0, hatNorm2 = 0, uHatNorm2 = 0, original2 = 0;
    for (int64_t d = 0; d < 16; ++d) {
      const double u = f.input.at(0, t, d), uHat = f.output.at(0, t, d);
      norm2 += u * u;
      uHatNorm2 += uHat * uHat;
      const size_t k = nearestCentroid(centroids, u);
      EXPECT_NEAR(uHat, centroids[k], 1e-6) << "token " << t << " channel " << d;
      hatNorm2 += std::pow(out.keyHat.at(hat, t, d), 2);
      original2 += std::pow(key.at(1, t, d), 2);
    }
    EXPECT_NEAR(norm2, 1.0, 1e-5) << "token " << t;
    const double stored = fp::metaRound(std::sqrt(original2), tq3.scale);
    EXPECT_NEAR(std::sqrt(hatNorm2), stored * std::sqrt(uHatNorm2), 1e-4 * stored) << "token " << t;
  }
  // The histogram counts the head's normalized values; the density's expected counts add up to
  // at most that many (the bins span the values' range, not all of [−1, 1]) and peak near 0.
  EXPECT_EQ(f.histogram.count, 12 * 16);
  ASSERT_EQ(f.density.size(), 24u);
  double expected = 0;
  for (double c : f.density) expected += c;
  EXPECT_LE(expected, 12.0 * 16 + 1e-9);
  EXPECT_GT(expected, 0.5 * 12 * 16);
  // The original-space histogram is unchanged by the request.
  EXPECT_EQ(out.histogram.count, 12 * 16);
}

// A rotated scalar format is shown in the rotated space but not normalized, with its group's
// own levels and no density; an unrotated spec has no format space.
TEST(FormatSpace, RotatedIntegersKeepTheirGroupsLevelsAndUnrotatedSpecsHaveNone) {
  const Tensor3 key = layerTensor(2, 12, 16, 23), value = layerTensor(2, 12, 16, 24);
  LayerViewInput input{&key, &value, nullptr, nullptr, {}, 0};
  ViewRequest request;
  request.kvHead = 0;
  request.histogramTensor = TensorKind::Key;
  request.histogramScope = HistogramScope::Token;
  request.histogramIndex = 4;
  request.histogramBins = 16;
  request.formatSpace = true;
  request.group = true;
  request.groupToken = 4;
  request.groupChannel = 2;
  ViewWorkspace ws;
  ViewData out;
  ASSERT_TRUE(computeViewData(input, nullptr, spec("int4,rot=hadamard"), spec("int4"), request, ws, out).isOk());
  ASSERT_TRUE(out.formatSpace && out.formatSpace->group && out.group);
  EXPECT_FALSE(out.formatSpace->normalized);
  EXPECT_TRUE(out.formatSpace->density.empty());
  EXPECT_EQ(out.formatSpace->group->levels, out.group->levels);
  EXPECT_EQ(out.formatSpace->histogram.count, 16);
  // Every reconstructed value of the token is one of its group's levels.
  for (int64_t d = 0; d < 16; ++d) {
    const double v = out.formatSpace->output.at(0, 4, d);
    const auto& levels = out.group->levels;
    const auto onLevel = [v](double l) { return std::fabs(l - v) <= 1e-6 * (1 + std::fabs(l)); };
    EXPECT_TRUE(std::any_of(levels.begin(), levels.end(), onLevel)) << "channel " << d << " value " << v;
  }
  ASSERT_TRUE(computeViewData(input, nullptr, spec("int4"), spec("int4"), request, ws, out).isOk());
  EXPECT_FALSE(out.formatSpace.has_value());
}

// The drift view's series of one kv head, computed on that head's slices, is the whole layer's
// series for that head (to float32 GEMM noise), filed as its line; the other kv heads' lines stay
// empty.
TEST(KvHeadPositionSeries, OneHeadsSlicesGiveThatHeadsLineOfTheLayer) {
  const int64_t kvHeads = 2, group = 2, tokens = 24, dim = 8;
  const Tensor3 key = layerTensor(kvHeads, tokens, dim, 11), value = layerTensor(kvHeads, tokens, dim, 12);
  const Tensor3 query = layerTensor(kvHeads * group, 6, dim, 13);
  Tensor3 keyHat = key, valueHat = value;
  for (float& x : keyHat.data) x = std::round(x * 4.0f) / 4.0f;
  for (float& x : valueHat.data) x = std::round(x * 2.0f) / 2.0f;
  AttentionInput layer{&query, &key, &value, &keyHat, &valueHat};
  layer.softmaxScale = 1.0 / std::sqrt(static_cast<double>(dim));
  auto whole = attentionPositionSeries(layer, SeriesGrouping::KvHead);
  ASSERT_TRUE(whole.hasValue()) << whole.status().message();

  const int64_t h = 1;
  Tensor3 k = headOf(key, h), v = headOf(value, h), kh = headOf(keyHat, h), vh = headOf(valueHat, h), q;
  copyHeads(query, h * group, group, q);
  AttentionInput one{&q, &k, &v, &kh, &vh};
  one.softmaxScale = layer.softmaxScale;
  auto series = kvHeadPositionSeries(one, h, kvHeads);
  ASSERT_TRUE(series.hasValue()) << series.status().message();
  EXPECT_EQ(series->grouping, SeriesGrouping::KvHead);
  EXPECT_EQ(series->positions, whole->positions);
  ASSERT_EQ(series->kl.size(), 2u);
  EXPECT_TRUE(series->kl[0].empty());
  EXPECT_TRUE(series->relJoint[0].empty());
  ASSERT_EQ(series->kl[1].size(), whole->kl[1].size());
  for (size_t i = 0; i < series->kl[1].size(); ++i) {
    EXPECT_NEAR(series->kl[1][i], whole->kl[1][i], 1e-6 * (1e-3 + std::abs(whole->kl[1][i])));
    EXPECT_NEAR(series->relJoint[1][i], whole->relJoint[1][i], 1e-6 * (1e-3 + whole->relJoint[1][i]));
    EXPECT_NEAR(series->relKeyOnly[1][i], whole->relKeyOnly[1][i], 1e-6 * (1e-3 + whole->relKeyOnly[1][i]));
    EXPECT_NEAR(series->relValueOnly[1][i], whole->relValueOnly[1][i], 1e-6 * (1e-3 + whole->relValueOnly[1][i]));
  }
}

// Issue 32 (histogram re-binning on zoom): the values in [lo, hi] counted by hand on 4 bins;
// v = hi falls in the last bin, values outside the range are not counted.
TEST(CountInRange, CountsOnlyTheValuesInTheRangeOnItsBins) {
  Tensor3 x(1, 2, 4);
  const float v[] = {0.0f, 0.25f, 0.5f, 1.0f, -1.0f, 2.0f, 0.75f, 0.5f};
  std::copy(std::begin(v), std::end(v), x.data.begin());
  std::vector<double> out;
  countInRange(x, 0, HistogramScope::Head, 0, 0.0, 1.0, 4, out);
  EXPECT_EQ(out, (std::vector<double>{1, 1, 2, 2}));  // 0 | .25 | .5 .5 | .75 1
  countInRange(x, 0, HistogramScope::Channel, 1, 0.0, 1.0, 4, out);
  EXPECT_EQ(out, (std::vector<double>{0, 1, 0, 0}));  // .25 (2.0 is outside)
  countInRange(x, 0, HistogramScope::Token, 1, 0.0, 1.0, 4, out);
  EXPECT_EQ(out, (std::vector<double>{0, 0, 1, 1}));  // .5 | .75 (−1 and 2 outside)
  countInRange(x, 0, HistogramScope::Head, 0, -1.0, 0.0, 2, out);
  EXPECT_EQ(out, (std::vector<double>{1, 1}));  // −1 | 0 (= hi)
  countInRange(x, 0, HistogramScope::Head, 0, 1.0, 1.0, 4, out);
  EXPECT_TRUE(out.empty());  // an empty range
  countInRange(x, 1, HistogramScope::Head, 0, 0.0, 1.0, 4, out);
  EXPECT_TRUE(out.empty());  // no such head
}

TEST(RebinHistogram, ZoomedBinsHoldTheOriginalsAndTheReconstructionsInRange) {
  Tensor3 x(1, 2, 4), hat(1, 2, 4);
  const float v[] = {0.0f, 0.25f, 0.5f, 1.0f, -1.0f, 2.0f, 0.75f, 0.5f};
  const float w[] = {0.1f, 0.1f, 0.6f, 0.9f, -0.9f, 1.9f, 0.6f, 0.6f};
  std::copy(std::begin(v), std::end(v), x.data.begin());
  std::copy(std::begin(w), std::end(w), hat.data.begin());
  HistogramData h;
  rebinHistogramInto(x, 0, &hat, 0, HistogramScope::Head, 0, 0.0, 1.0, 2, h);
  EXPECT_EQ(h.edges, (std::vector<double>{0.0, 0.5, 1.0}));
  EXPECT_EQ(h.original, (std::vector<double>{2, 4}));       // 0 .25 | .5 1 .75 .5
  EXPECT_EQ(h.reconstructed, (std::vector<double>{2, 4}));  // .1 .1 | .6 .9 .6 .6
  EXPECT_EQ(h.count, 6);
}

// The heavy-tail rule (docs/gui.md): log counts when the tallest bin holds more than 50 times
// the median non-empty bin.
TEST(PrefersLogCounts, HeavyTailsGetLogCountsAndFlatOrNormalDataLinear) {
  const auto histogramOf = [](const std::vector<float>& values) {
    Tensor3 x(1, 1, static_cast<int64_t>(values.size()));
    std::copy(values.begin(), values.end(), x.data.begin());
    return computeHistogram(x, nullptr, 0, HistogramScope::Head, 0, 128);
  };
  // Uniform: every bin holds the same count.
  std::vector<float> uniform;
  for (int i = 0; i < 12800; ++i) uniform.push_back(static_cast<float>(i) / 12800.0f);
  EXPECT_FALSE(prefersLogCounts(histogramOf(uniform)));
  // Normal (Box–Muller on a grid): the centre bin is about 7 times the median non-empty one.
  std::vector<float> normal;
  const int m = 300;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < m; ++j) {
      const double u1 = (i + 0.5) / m, u2 = (j + 0.5) / m;
      normal.push_back(static_cast<float>(std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2)));
    }
  }
  EXPECT_FALSE(prefersLogCounts(histogramOf(normal)));
  // KV-like: 10000 values in [−1, 1] and 20 outliers out to ±100 — one spike on a linear axis.
  std::vector<float> outliers;
  for (int i = 0; i < 10000; ++i) outliers.push_back(-1.0f + 2.0f * static_cast<float>(i) / 10000.0f);
  for (int i = 0; i < 20; ++i) outliers.push_back((i % 2 ? 1.0f : -1.0f) * (5.0f + 5.0f * static_cast<float>(i)));
  EXPECT_TRUE(prefersLogCounts(histogramOf(outliers)));
  // Laplace quantiles (kurtosis 6): ~95 times the median non-empty bin.
  std::vector<float> laplace;
  for (int i = 0; i < 100000; ++i) {
    const double u = (i + 0.5) / 100000 - 0.5;
    laplace.push_back(static_cast<float>((u < 0 ? 1 : -1) * std::log(1 - 2 * std::abs(u))));
  }
  EXPECT_TRUE(prefersLogCounts(histogramOf(laplace)));
  EXPECT_FALSE(prefersLogCounts(HistogramData{}));
}

TEST(PrefersLogCounts, TheRatioIsTakenAgainstTheMedianOfTheNonEmptyBins) {
  HistogramData h;
  h.original = {0, 0, 1, 2, 100, 0};  // median of {1, 2, 100} is 2: 100 ≤ 50 · 2
  EXPECT_FALSE(prefersLogCounts(h));
  h.original = {0, 0, 1, 2, 101, 0};  // 101 > 100
  EXPECT_TRUE(prefersLogCounts(h));
  h.original = {1, 1, 3, 200};  // even: median (1 + 3) / 2 = 2, and 200 > 100
  EXPECT_TRUE(prefersLogCounts(h));
}

}  // namespace
}  // namespace kvscope
