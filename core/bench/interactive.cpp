// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/bench/interactive.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/attention/attention.h"
#include "core/attention/engine.h"
#include "core/quant/formats.h"
#include "core/quant/quantize.h"
#include "core/quant/spec.h"

namespace kvscope::bench {

namespace {

// Heads [first, first + count) of `x` as a tensor of their own.
Tensor3 headSlice(const Tensor3& x, int64_t first, int64_t count = 1) {
  Tensor3 y;
  y.heads = count;
  y.tokens = x.tokens;
  y.dim = x.dim;
  const float* begin = x.row(first, 0);
  y.data.assign(begin, begin + count * x.tokens * x.dim);
  return y;
}

// ui/compute/heatmap_data computeHeatmap in HeatmapValue::Error mode, same loop order.
HeatmapCells errorHeatmap(const Tensor3& x, int64_t head, const Tensor3& xHat, int64_t headHat,
                          int maxColumns) {
  HeatmapCells out;
  out.channels = static_cast<int>(x.dim);
  const int tokens = static_cast<int>(x.tokens);
  out.columns = std::clamp(maxColumns, 1, std::max(1, tokens));
  const auto n = static_cast<size_t>(out.channels) * static_cast<size_t>(out.columns);
  out.cells.assign(n, 0.0f);
  out.cellToken.assign(n, 0);
  for (int b = 0; b < out.columns; ++b) {
    const auto t0 = static_cast<int>(int64_t{b} * tokens / out.columns);
    const auto t1 = static_cast<int>(int64_t{b + 1} * tokens / out.columns);
    for (int c = 0; c < out.channels; ++c) {
      float best = -1.0f;
      int bestToken = t0;
      for (int t = t0; t < t1; ++t) {
        const float m = std::fabs(xHat.at(headHat, t, c) - x.at(head, t, c));
        if (!(m <= best)) {
          best = m;
          bestToken = t;
        }
      }
      const size_t i = static_cast<size_t>(c) * static_cast<size_t>(out.columns) + static_cast<size_t>(b);
      out.cells[i] = best;
      out.cellToken[i] = bestToken;
    }
  }
  return out;
}

// ui/compute/histogram_data computeHistogram, scope "whole head": copies, shared bins, moments,
// and max/median of |x| by nth_element.
HistogramCounts histogram(const float* xBegin, const float* hatBegin, int64_t n, int bins) {
  HistogramCounts h;
  if (n == 0 || bins < 1) return h;
  const std::vector<float> values(xBegin, xBegin + n);
  const std::vector<float> hat(hatBegin, hatBegin + n);
  const auto [mn, mx] = std::minmax_element(values.begin(), values.end());
  const auto [hmn, hmx] = std::minmax_element(hat.begin(), hat.end());
  double lo = std::min(*mn, *hmn), hi = std::max(*mx, *hmx);
  if (!(hi > lo)) {
    lo -= 0.5;
    hi += 0.5;
  }
  h.lo = lo;
  h.hi = hi;
  const auto binOf = [&](double v) {
    const auto b = static_cast<int>((v - lo) / (hi - lo) * bins);
    return static_cast<size_t>(std::clamp(b, 0, bins - 1));
  };
  h.original.assign(static_cast<size_t>(bins), 0.0);
  h.reconstructed.assign(static_cast<size_t>(bins), 0.0);
  for (float v : values) h.original[binOf(v)] += 1;
  for (float v : hat) h.reconstructed[binOf(v)] += 1;
  double mean = 0;
  for (float v : values) mean += v;
  mean /= static_cast<double>(n);
  double m2 = 0, m4 = 0;
  for (float v : values) {
    const double d = v - mean;
    m2 += d * d;
    m4 += d * d * d * d;
  }
  m2 /= static_cast<double>(n);
  m4 /= static_cast<double>(n);
  h.kurtosis = m2 > 0 ? m4 / (m2 * m2) : 0.0;
  std::vector<float> magnitudes(values.size());
  std::transform(values.begin(), values.end(), magnitudes.begin(), [](float v) { return std::fabs(v); });
  const float maxAbs = *std::max_element(magnitudes.begin(), magnitudes.end());
  const auto mid = static_cast<std::ptrdiff_t>(magnitudes.size() / 2);
  std::nth_element(magnitudes.begin(), magnitudes.begin() + mid, magnitudes.end());
  const double median = magnitudes[static_cast<size_t>(mid)];
  h.maxOverMedian = median > 0 ? maxAbs / median : 0.0;
  return h;
}

// ui/model formatInput for a spec without rotation or outliers: the quantized tokens [S, T-R)
// of every head of `source`, copied row by row.
Tensor3 formatInput(const Tensor3& source, const QuantSpec& spec, int64_t* firstToken) {
  const int64_t s = std::clamp<int64_t>(spec.sinks, 0, source.tokens);
  const int64_t r = std::clamp<int64_t>(spec.residual, 0, source.tokens - s);
  const int64_t n = source.tokens - s - r;
  *firstToken = s;
  Tensor3 x(source.heads, n, source.dim);
  for (int64_t h = 0; h < source.heads; ++h) {
    for (int64_t j = 0; j < n; ++j) std::copy_n(source.row(h, s + j), source.dim, x.row(h, j));
  }
  if (spec.hadamard) hadamardInPlace(x);
  return x;
}

}  // namespace

Expected<ViewData> computeViewData(const Tensor3& key, const Tensor3& value, const Tensor3& query,
                                   int64_t head, std::string_view keySpec,
                                   std::string_view valueSpec, bool wholeLayer, bool withPreRope,
                                   const InteractiveShape& shape) {
  if (head < 0 || head >= key.heads || !key.sameShape(value) || query.dim != key.dim ||
      query.heads % key.heads != 0 || query.tokens < 1 || query.tokens > key.tokens) {
    return Status::invalidArgument("interactive benchmark: inconsistent shapes");
  }
  auto ks = parseSpec(keySpec);
  if (!ks) return ks.status().withContext("K");
  auto vs = parseSpec(valueSpec);
  if (!vs) return vs.status().withContext("V");
  const int64_t group = query.heads / key.heads;

  // The layer worker: quantize K and V (one head, or all as quantizeLayer does).
  Tensor3 keyHead, valueHead, queryGroup;
  const Tensor3* keyIn = &key;
  const Tensor3* valueIn = &value;
  const Tensor3* queryIn = &query;
  if (!wholeLayer) {
    keyHead = headSlice(key, head);
    valueHead = headSlice(value, head);
    queryGroup = headSlice(query, head * group, group);
    keyIn = &keyHead;
    valueIn = &valueHead;
    queryIn = &queryGroup;
  }
  const int64_t viewHead = wholeLayer ? head : 0;
  ViewData out;
  double mark = nowSeconds(), cpuMark = processCpuSeconds();
  auto step = [&](const char* name) {
    const double now = nowSeconds(), cpuNow = processCpuSeconds();
    out.steps.push_back({name, now - mark, cpuNow - cpuMark});
    mark = now;
    cpuMark = cpuNow;
  };
  QuantInput keyInput, valueInput;
  keyInput.tensor = keyIn;
  valueInput.tensor = valueIn;
  auto kq = quantizeTensor(keyInput, *ks);
  if (!kq) return kq.status().withContext("K");
  step("quantize K");
  auto vq = quantizeTensor(valueInput, *vs);
  if (!vq) return vq.status().withContext("V");
  step("quantize V");
  out.keyHat = std::move(kq->reconstruction);
  out.valueHat = std::move(vq->reconstruction);
  if (wholeLayer && withPreRope) {
    Tensor3 pre = out.keyHat;  // quantizeLayer keeps K̂ with RoPE undone for the pre-RoPE view
    applyInverseRope(pre, RopeParams{});
    step("inverse RoPE");
  }

  // The views of K: heat map, histogram, and the scale group under the cursor.
  out.heatmap = errorHeatmap(*keyIn, viewHead, out.keyHat, viewHead, shape.columns);
  step("heat map");
  out.histogram = histogram(keyIn->row(viewHead, 0), out.keyHat.row(viewHead, 0),
                            keyIn->tokens * keyIn->dim, shape.bins);
  step("histogram");
  int64_t first = 0;
  const Tensor3 input = formatInput(*keyIn, *ks, &first);
  const int64_t token = keyIn->tokens / 2, channel = 3;
  if (token >= first && token - first < input.tokens) {
    auto detail = describeGroup(input, *ks, viewHead, token - first, channel);
    if (!detail) return detail.status().withContext("describeGroup");
    out.group = std::move(detail).value();
  }
  step("group");

  // The drift view's row: the last query of the head's first query head.
  AttentionInput attention;
  attention.query = queryIn;
  attention.key = keyIn;
  attention.value = valueIn;
  attention.keyHat = &out.keyHat;
  attention.valueHat = &out.valueHat;
  const auto queryHead = static_cast<int>(wholeLayer ? head * group : 0);
  auto row = attentionRowDetail(attention, queryHead, static_cast<int>(query.tokens - 1));
  if (!row) return row.status().withContext("attention detail");
  out.detail = std::move(row).value();
  step("attention row");
  return out;
}

Expected<InteractiveFigures> benchInteractive(const InteractiveShape& shape,
                                              std::string_view keySpec, std::string_view valueSpec,
                                              const Budget& budget) {
  const Tensor3 key = syntheticTensor(shape.kvHeads, shape.tokens, shape.dim, 21);
  const Tensor3 value = syntheticTensor(shape.kvHeads, shape.tokens, shape.dim, 22);
  const Tensor3 query = syntheticTensor(shape.heads, shape.queries, shape.dim, 23);
  InteractiveFigures figures;
  figures.shape = shape;
  figures.keySpec = std::string(keySpec);
  figures.valueSpec = std::string(valueSpec);
  const int64_t head = shape.kvHeads / 2;
  for (const bool whole : {false, true}) {
    auto time = timeRepeated(
        [&]() -> Status {
          auto views = computeViewData(key, value, query, head, keySpec, valueSpec, whole,
                                       /*withPreRope=*/whole, shape);
          return views ? Status::ok() : views.status();
        },
        budget);
    if (!time) return time.status();
    (whole ? figures.wholeLayer : figures.oneHead) = *time;
    auto views = computeViewData(key, value, query, head, keySpec, valueSpec, whole, whole, shape);
    if (!views) return views.status();
    (whole ? figures.wholeLayerSteps : figures.oneHeadSteps) = views->steps;
  }

  // The drift view's lines over the whole layer (a separate worker in the GUI).
  auto views = computeViewData(key, value, query, head, keySpec, valueSpec, true, false, shape);
  if (!views) return views.status();
  AttentionInput attention;
  attention.query = &query;
  attention.key = &key;
  attention.value = &value;
  attention.keyHat = &views->keyHat;
  attention.valueHat = &views->valueHat;
  Budget once = budget;
  once.minRuns = 1;
  once.minSeconds = 0;
  once.maxRuns = 1;
  auto drift = timeRepeated(
      [&]() -> Status {
        auto series = attentionPositionSeries(attention, SeriesGrouping::KvHead);
        return series ? Status::ok() : series.status();
      },
      once);
  if (!drift) return drift.status().withContext("attentionPositionSeries");
  figures.driftSeries = *drift;
  return figures;
}

}  // namespace kvscope::bench
