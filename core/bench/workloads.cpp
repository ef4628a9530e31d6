// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/bench/workloads.h"

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

Expected<QuantizeFigures> benchQuantize(const Tensor3& x, std::string_view spec,
                                        const Budget& budget) {
  auto parsed = parseSpec(spec);
  if (!parsed) return parsed.status();
  const QuantSpec qs = *parsed;
  QuantizeFigures figures;
  figures.spec = std::string(spec);
  figures.elements = static_cast<int64_t>(x.size());

  QuantInput input;
  input.tensor = &x;
  auto pipeline = timeRepeated(
      [&]() -> Status {
        auto out = quantizeTensor(input, qs);
        return out ? Status::ok() : out.status();
      },
      budget);
  if (!pipeline) return pipeline.status().withContext("quantizeTensor '" + figures.spec + "'");
  figures.pipeline = *pipeline;

  // Step 5 alone: the format on a copy refreshed (untimed) before each run, so every run sees
  // the original data rather than an already quantized tensor.
  Tensor3 work = x;
  auto format = timeRepeated(
      [&] { return quantizeFormatInPlace(work, qs); }, budget,
      [&] { std::copy(x.data.begin(), x.data.end(), work.data.begin()); });
  if (!format) return format.status().withContext("quantizeFormatInPlace '" + figures.spec + "'");
  figures.format = *format;
  return figures;
}

double attentionFlops(const AttentionShape& s) {
  const double perProduct = 2.0 * s.heads * s.queries * static_cast<double>(s.tokens) * s.dim;
  return 3.0 /* cases */ * 2.0 /* q·k and P·v */ * perProduct;
}

Expected<AttentionFigures> benchAttention(const AttentionShape& shape, const Budget& budget) {
  if (shape.kvHeads <= 0 || shape.heads % shape.kvHeads != 0 || shape.queries > shape.tokens) {
    return Status::invalidArgument("attention benchmark: inconsistent shape");
  }
  const Tensor3 query = syntheticTensor(shape.heads, shape.queries, shape.dim, 11);
  const Tensor3 key = syntheticTensor(shape.kvHeads, shape.tokens, shape.dim, 12);
  const Tensor3 value = syntheticTensor(shape.kvHeads, shape.tokens, shape.dim, 13);
  // The engine's cost does not depend on how good the reconstruction is: noise of roughly
  // int4's size stands in for it, so this benchmark runs without the quantizers.
  const Tensor3 keyHat = perturbed(key, 0.05, 14);
  const Tensor3 valueHat = perturbed(value, 0.05, 15);
  AttentionInput input;
  input.query = &query;
  input.key = &key;
  input.value = &value;
  input.keyHat = &keyHat;
  input.valueHat = &valueHat;

  AttentionFigures figures;
  figures.shape = shape;
  figures.countedFlops = attentionFlops(shape);
  figures.engineFlops = attention_engine::gemmFlops(input, AttentionCaseSelection{});
  auto time = timeRepeated(
      [&]() -> Status {
        auto metrics = attentionMetrics(input);
        return metrics ? Status::ok() : metrics.status();
      },
      budget);
  if (!time) return time.status().withContext("attentionMetrics");
  figures.time = *time;
  return figures;
}


namespace {

// Head `head` of `x` as a one-head tensor.
Tensor3 headSlice(const Tensor3& x, int64_t head) {
  Tensor3 y;
  y.heads = 1;
  y.tokens = x.tokens;
  y.dim = x.dim;
  const float* begin = x.row(head, 0);
  y.data.assign(begin, begin + x.tokens * x.dim);
  return y;
}

// The GUI's computeHeatmap in HeatmapValue::Error mode, same loop order (ui/compute/heatmap_data).
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

HistogramCounts histogram(const float* x, const float* xHat, int64_t n, int bins) {
  HistogramCounts h;
  h.original.assign(static_cast<size_t>(bins), 0);
  h.reconstructed.assign(static_cast<size_t>(bins), 0);
  if (n == 0) return h;
  float lo = x[0], hi = x[0];
  for (int64_t i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  h.lo = lo;
  h.hi = hi;
  const double width = hi > lo ? (static_cast<double>(hi) - lo) / bins : 1.0;
  auto bin = [&](float v) {
    const auto b = static_cast<int64_t>(std::floor((static_cast<double>(v) - lo) / width));
    return static_cast<size_t>(std::clamp<int64_t>(b, 0, bins - 1));
  };
  for (int64_t i = 0; i < n; ++i) {
    ++h.original[bin(x[i])];
    ++h.reconstructed[bin(xHat[i])];
  }
  return h;
}

// Softmax of scale·q·k_j over keys 0 … last of one head, in double.
std::vector<double> probabilities(const float* q, const Tensor3& k, int64_t head, int64_t last,
                                  double scale) {
  std::vector<double> p(static_cast<size_t>(last + 1));
  double maxScore = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j <= last; ++j) {
    const float* kj = k.row(head, j);
    double dot = 0;
    for (int64_t c = 0; c < k.dim; ++c) dot += static_cast<double>(q[c]) * kj[c];
    p[static_cast<size_t>(j)] = scale * dot;
    maxScore = std::max(maxScore, p[static_cast<size_t>(j)]);
  }
  double sum = 0;
  for (double& v : p) {
    v = std::exp(v - maxScore);
    sum += v;
  }
  for (double& v : p) v /= sum;
  return p;
}

std::vector<double> weightedSum(const std::vector<double>& p, const Tensor3& v, int64_t head) {
  std::vector<double> o(static_cast<size_t>(v.dim), 0.0);
  for (size_t j = 0; j < p.size(); ++j) {
    const float* vj = v.row(head, static_cast<int64_t>(j));
    for (int64_t c = 0; c < v.dim; ++c) o[static_cast<size_t>(c)] += p[j] * vj[c];
  }
  return o;
}

}  // namespace

Expected<ViewData> computeViewData(const Tensor3& key, const Tensor3& value, const Tensor3& query,
                                   int64_t head, std::string_view keySpec,
                                   std::string_view valueSpec, bool wholeLayer,
                                   const InteractiveShape& shape) {
  if (head < 0 || head >= key.heads || !key.sameShape(value) || query.dim != key.dim ||
      query.heads % key.heads != 0 || query.tokens < 1 || query.tokens > key.tokens) {
    return Status::invalidArgument("interactive benchmark: inconsistent shapes");
  }
  auto ks = parseSpec(keySpec);
  if (!ks) return ks.status().withContext("K");
  auto vs = parseSpec(valueSpec);
  if (!vs) return vs.status().withContext("V");

  // Quantize: the visible head alone, or the layer as ui/model quantizeLayer does.
  Tensor3 keyHead, valueHead;
  QuantInput keyInput, valueInput;
  if (wholeLayer) {
    keyInput.tensor = &key;
    valueInput.tensor = &value;
  } else {
    keyHead = headSlice(key, head);
    valueHead = headSlice(value, head);
    keyInput.tensor = &keyHead;
    valueInput.tensor = &valueHead;
  }
  auto kq = quantizeTensor(keyInput, *ks);
  if (!kq) return kq.status().withContext("K");
  auto vq = quantizeTensor(valueInput, *vs);
  if (!vq) return vq.status().withContext("V");

  ViewData out;
  out.keyHat = std::move(kq->reconstruction);
  out.valueHat = std::move(vq->reconstruction);
  const int64_t hatHead = wholeLayer ? head : 0;
  out.keyHeatmap = errorHeatmap(key, head, out.keyHat, hatHead, shape.columns);
  out.valueHeatmap = errorHeatmap(value, head, out.valueHat, hatHead, shape.columns);
  const int64_t perHead = key.tokens * key.dim;
  out.keyHistogram = histogram(key.row(head, 0), out.keyHat.row(hatHead, 0), perHead, shape.bins);
  out.valueHistogram =
      histogram(value.row(head, 0), out.valueHat.row(hatHead, 0), perHead, shape.bins);

  // Attention detail: the last query of the head's first query head, at position T − 1.
  const int64_t queryHead = head * (query.heads / key.heads);
  const float* q = query.row(queryHead, query.tokens - 1);
  const int64_t last = key.tokens - 1;
  const double scale = 1.0 / std::sqrt(static_cast<double>(key.dim));
  out.detail.p = probabilities(q, key, head, last, scale);
  out.detail.pHat = probabilities(q, out.keyHat, hatHead, last, scale);
  out.detail.output = weightedSum(out.detail.p, value, head);
  out.detail.outputKeyOnly = weightedSum(out.detail.pHat, value, head);
  out.detail.outputValueOnly = weightedSum(out.detail.p, out.valueHat, hatHead);
  out.detail.outputJoint = weightedSum(out.detail.pHat, out.valueHat, hatHead);
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
          auto views = computeViewData(key, value, query, head, keySpec, valueSpec, whole, shape);
          return views ? Status::ok() : views.status();
        },
        budget);
    if (!time) return time.status();
    (whole ? figures.wholeLayer : figures.oneHead) = *time;
  }
  return figures;
}

}  // namespace kvscope::bench
