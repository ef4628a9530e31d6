// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/attention/detail.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/attention/engine.h"
#include "core/util/simd.h"

namespace kvscope {
namespace {

// Fills scores, probabilities (via log-sum-exp) and top1 of a row case.
void finishRow(AttentionRowCase& c) {
  const double m = *std::max_element(c.scores.begin(), c.scores.end());
  double z = 0;
  for (double s : c.scores) z += std::exp(s - m);
  const double lse = m + std::log(z);
  c.probabilities.resize(c.scores.size());
  c.top1 = 0;
  for (size_t j = 0; j < c.scores.size(); ++j) {
    c.probabilities[j] = std::exp(c.scores[j] - lse);
    if (c.scores[j] > c.scores[static_cast<size_t>(c.top1)]) c.top1 = static_cast<int64_t>(j);
  }
}

double klDivergence(const AttentionRowCase& p, const AttentionRowCase& q) {
  // Log-probabilities from the scores: ln P_j = s_j − lse(s), never ln 0.
  auto lse = [](const std::vector<double>& s) {
    const double m = *std::max_element(s.begin(), s.end());
    double z = 0;
    for (double x : s) z += std::exp(x - m);
    return m + std::log(z);
  };
  const double lp = lse(p.scores), lq = lse(q.scores);
  double kl = 0;
  for (size_t j = 0; j < p.scores.size(); ++j) {
    kl += p.probabilities[j] * ((p.scores[j] - lp) - (q.scores[j] - lq));
  }
  return std::max(0.0, kl);
}

// Σ_j prob[j]·v[j] over n rows of d values, in double (the loop over channels vectorizes).
KVSCOPE_SIMD_CLONES_256 void weightedSum(const double* prob, int64_t n, const float* v, int64_t d, double* o) {
  for (int64_t c = 0; c < d; ++c) o[c] = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    const float* row = v + j * d;
    const double p = prob[j];
    for (int64_t c = 0; c < d; ++c) o[c] += p * static_cast<double>(row[c]);
  }
}

std::vector<double> output(const std::vector<double>& prob, const Tensor3& v, int64_t g) {
  std::vector<double> o(static_cast<size_t>(v.dim), 0.0);
  weightedSum(prob.data(), static_cast<int64_t>(prob.size()), v.row(g, 0), v.dim, o.data());
  return o;
}

using simd::D4;

// The scaled dot products of q with rows [0, n) of k and of kHat, in double: four partial sums
// per product (lanes c mod 4), added at the end.
KVSCOPE_SIMD_CLONES_256 void rowScores(const float* q, const float* k, const float* kHat, int64_t n, int64_t d,
                                   double scale, double* a, double* b) {
  const int64_t d4 = d / 4 * 4;
  for (int64_t j = 0; j < n; ++j) {
    const float* kr = k + j * d;
    const float* hr = kHat + j * d;
    D4 sa = {0, 0, 0, 0}, sb = {0, 0, 0, 0};
    for (int64_t c = 0; c < d4; c += 4) {
      const D4 qv = {q[c], q[c + 1], q[c + 2], q[c + 3]};
      const D4 kv = {kr[c], kr[c + 1], kr[c + 2], kr[c + 3]};
      const D4 hv = {hr[c], hr[c + 1], hr[c + 2], hr[c + 3]};
      sa += qv * kv;
      sb += qv * hv;
    }
    double x = (sa[0] + sa[1]) + (sa[2] + sa[3]);
    double y = (sb[0] + sb[1]) + (sb[2] + sb[3]);
    for (int64_t c = d4; c < d; ++c) {
      x += static_cast<double>(q[c]) * kr[c];
      y += static_cast<double>(q[c]) * hr[c];
    }
    a[j] = scale * x;
    b[j] = scale * y;
  }
}

double relError(const std::vector<double>& a, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t c = 0; c < a.size(); ++c) {
    num += (a[c] - ref[c]) * (a[c] - ref[c]);
    den += ref[c] * ref[c];
  }
  if (den == 0) return num == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(num / den);
}

}  // namespace

Expected<AttentionRowDetail> attentionRowDetail(const AttentionInput& input, int queryHead,
                                                int queryIndex) {
  KVS_RETURN_IF_ERROR(attention_engine::checkInput(input, AttentionCaseSelection{}));
  const Tensor3& q = *input.query;
  const Tensor3& k = *input.key;
  if (queryHead < 0 || queryHead >= q.heads) {
    return Status::invalidArgument("attention detail: query head " + std::to_string(queryHead) +
                                   " does not exist (0…" + std::to_string(q.heads - 1) + ")");
  }
  if (queryIndex < 0 || queryIndex >= q.tokens) {
    return Status::invalidArgument("attention detail: query " + std::to_string(queryIndex) +
                                   " does not exist (0…" + std::to_string(q.tokens - 1) + ")");
  }
  AttentionRowDetail d;
  d.queryHead = queryHead;
  d.kvHead = static_cast<int>(queryHead / (q.heads / k.heads));
  d.queryIndex = queryIndex;
  d.position = k.tokens - q.tokens + queryIndex;
  const double scale =
      input.softmaxScale > 0 ? input.softmaxScale : 1.0 / std::sqrt(static_cast<double>(k.dim));
  const int64_t n = d.position + 1;
  const float* qr = q.row(queryHead, queryIndex);
  d.original.scores.resize(static_cast<size_t>(n));
  d.keyOnly.scores.resize(static_cast<size_t>(n));
  rowScores(qr, k.row(d.kvHead, 0), input.keyHat->row(d.kvHead, 0), n, k.dim, scale,
            d.original.scores.data(), d.keyOnly.scores.data());
  finishRow(d.original);
  finishRow(d.keyOnly);
  d.valueOnly.scores = d.original.scores;
  d.valueOnly.probabilities = d.original.probabilities;
  d.valueOnly.top1 = d.original.top1;
  d.joint.scores = d.keyOnly.scores;
  d.joint.probabilities = d.keyOnly.probabilities;
  d.joint.top1 = d.keyOnly.top1;
  d.keyOnly.kl = d.joint.kl = klDivergence(d.original, d.keyOnly);

  const auto o = output(d.original.probabilities, *input.value, d.kvHead);
  d.keyOnly.outputRelError = relError(output(d.keyOnly.probabilities, *input.value, d.kvHead), o);
  d.valueOnly.outputRelError =
      relError(output(d.original.probabilities, *input.valueHat, d.kvHead), o);
  d.joint.outputRelError = relError(output(d.keyOnly.probabilities, *input.valueHat, d.kvHead), o);
  return d;
}

Expected<AttentionPositionSeries> attentionPositionSeries(const AttentionInput& input,
                                                          SeriesGrouping grouping,
                                                          const Progress& progress) {
  attention_engine::RowValues rows;
  auto run = attention_engine::run(input, AttentionCaseSelection{}, &rows, progress);
  if (!run) return run.status();
  const int64_t heads = input.query->heads;
  const int64_t group = heads / input.key->heads;
  const int64_t nq = rows.selectedQueries;
  AttentionPositionSeries s;
  s.grouping = grouping;
  for (int64_t i = 0; i < nq; ++i) {
    s.positions.push_back(input.key->tokens - input.query->tokens + rows.firstQuery + i);
  }
  const int64_t lines = grouping == SeriesGrouping::KvHead ? input.key->heads : heads;
  const int64_t per = grouping == SeriesGrouping::KvHead ? group : 1;
  auto fold = [&](const std::vector<double>& src) {
    std::vector<std::vector<double>> out(static_cast<size_t>(lines),
                                         std::vector<double>(static_cast<size_t>(nq), 0.0));
    for (int64_t h = 0; h < heads; ++h) {
      auto& line = out[static_cast<size_t>(h / per)];
      for (int64_t i = 0; i < nq; ++i) {
        line[static_cast<size_t>(i)] += src[static_cast<size_t>(h * nq + i)] / static_cast<double>(per);
      }
    }
    return out;
  };
  s.kl = fold(rows.kl);
  s.relKeyOnly = fold(rows.relKeyOnly);
  s.relValueOnly = fold(rows.relValueOnly);
  s.relJoint = fold(rows.relJoint);
  return s;
}

}  // namespace kvscope
