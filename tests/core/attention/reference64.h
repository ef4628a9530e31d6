// SPDX-License-Identifier: GPL-3.0-or-later
// A plain float64 reference of quantization.md §6: loops, double everywhere, written straight
// from the definitions, independent of the GEMM engine it checks.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/attention/attention.h"

namespace kvscope::test {

struct ReferenceRow {
  std::vector<double> s, sHat, p, pHat;  // over keys 0 … position
  std::vector<double> o, oKey, oValue, oJoint;
};

inline std::vector<double> logSoftmax64(const std::vector<double>& s) {
  double m = *std::max_element(s.begin(), s.end());
  double z = 0;
  for (double x : s) z += std::exp(x - m);
  std::vector<double> out(s.size());
  for (size_t j = 0; j < s.size(); ++j) out[j] = s[j] - m - std::log(z);
  return out;
}

inline size_t firstArgmax64(const std::vector<double>& x) {
  size_t best = 0;
  for (size_t j = 1; j < x.size(); ++j)
    if (x[j] > x[best]) best = j;
  return best;
}

inline double relError64(const std::vector<double>& a, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t c = 0; c < a.size(); ++c) {
    num += (a[c] - ref[c]) * (a[c] - ref[c]);
    den += ref[c] * ref[c];
  }
  if (den == 0) return num == 0 ? 0.0 : INFINITY;
  return std::sqrt(num / den);
}

/// §6 by definition for every kv head, all three cases.
inline std::vector<AttentionCases> attentionReference64(const AttentionInput& in) {
  const Tensor3 &q = *in.query, &k = *in.key, &v = *in.value, &kh = *in.keyHat, &vh = *in.valueHat;
  const int64_t kvh = k.heads, t = k.tokens, d = k.dim, h = q.heads, tq = q.tokens;
  const int64_t g = h / kvh;
  const int64_t first = in.lastQueries > 0 ? std::max<int64_t>(0, tq - in.lastQueries) : 0;
  const double scale = in.softmaxScale > 0 ? in.softmaxScale : 1.0 / std::sqrt(double(d));
  std::vector<AttentionCases> out(static_cast<size_t>(kvh));
  for (int64_t kv = 0; kv < kvh; ++kv) {
    double scoreSum = 0, scoreMax = 0, klSum = 0, klMax = 0, top1 = 0;
    double rk = 0, rv = 0, rj = 0, rows = 0, scoreCount = 0;
    for (int64_t qh = kv * g; qh < (kv + 1) * g; ++qh) {
      for (int64_t i = first; i < tq; ++i) {
        const int64_t pos = t - tq + i;
        std::vector<double> s(pos + 1), sh(pos + 1);
        for (int64_t j = 0; j <= pos; ++j) {
          double a = 0, b = 0;
          for (int64_t c = 0; c < d; ++c) {
            a += double(q.at(qh, i, c)) * double(k.at(kv, j, c));
            b += double(q.at(qh, i, c)) * double(kh.at(kv, j, c));
          }
          s[j] = scale * a;
          sh[j] = scale * b;
          scoreSum += std::abs(sh[j] - s[j]);
          scoreMax = std::max(scoreMax, std::abs(sh[j] - s[j]));
          scoreCount += 1;
        }
        auto ls = logSoftmax64(s), lsh = logSoftmax64(sh);
        double kl = 0;
        for (int64_t j = 0; j <= pos; ++j) kl += std::exp(ls[j]) * (ls[j] - lsh[j]);
        klSum += kl;
        klMax = std::max(klMax, kl);
        if (firstArgmax64(s) == firstArgmax64(sh)) top1 += 1;
        std::vector<double> o(d, 0), ok(d, 0), ov(d, 0), oj(d, 0);
        for (int64_t j = 0; j <= pos; ++j) {
          double p = std::exp(ls[j]), ph = std::exp(lsh[j]);
          for (int64_t c = 0; c < d; ++c) {
            o[c] += p * v.at(kv, j, c);
            ok[c] += ph * v.at(kv, j, c);
            ov[c] += p * vh.at(kv, j, c);
            oj[c] += ph * vh.at(kv, j, c);
          }
        }
        rk += relError64(ok, o);
        rv += relError64(ov, o);
        rj += relError64(oj, o);
        rows += 1;
      }
    }
    AttentionCases& c = out[static_cast<size_t>(kv)];
    c.keyOnly = {scoreSum / scoreCount, scoreMax, klSum / rows, klMax, top1 / rows, rk / rows};
    c.joint = c.keyOnly;
    c.joint.outputRelError = rj / rows;
    c.valueOnly = AttentionMetrics{};
    c.valueOnly.outputRelError = rv / rows;
  }
  return out;
}

}  // namespace kvscope::test
