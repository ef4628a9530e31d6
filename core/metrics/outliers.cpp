// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/metrics/outliers.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "core/quant/format_table.h"
#include "core/quant/formats.h"
#include "core/quant/quantize.h"
#include "core/quant/rotation.h"

namespace kvscope {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t n = v.size(), mid = n / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double hi = v[mid];
  if (n % 2 == 1) return hi;
  const double lo = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return 0.5 * (lo + hi);
}

double safeRatio(double x, double med) {
  if (med > 0) return x / med;
  return x > 0 ? std::numeric_limits<double>::infinity() : 1.0;
}

int64_t runLength(int group, int64_t axisLength) {
  return group <= 0 || group >= axisLength ? axisLength : group;
}

// Calls `visit(indices, head)` for every scale group / block of a [kvh, tq, d] tensor under
// `spec` (§3, and blocks along the token row). head = -1: the group spans every head.
void forEachGroup(int64_t kvh, int64_t tq, int64_t d, const QuantSpec& spec,
                  const std::function<void(const std::vector<size_t>&, int64_t)>& visit) {
  const FormatInfo& info = formatInfo(spec.format);
  std::vector<size_t> idx;
  auto at = [&](int64_t h, int64_t t, int64_t c) { return static_cast<size_t>((h * tq + t) * d + c); };
  if (info.blockSize > 0) {
    const int64_t row = kvh * d, block = info.blockSize;
    for (int64_t t = 0; t < tq; ++t) {
      for (int64_t b = 0; b * block < row; ++b) {
        idx.clear();
        for (int64_t p = b * block; p < std::min(row, (b + 1) * block); ++p) idx.push_back(at(p / d, t, p % d));
        visit(idx, (b * block) / d);
      }
    }
    return;
  }
  switch (spec.axis) {
    case Axis::Tensor:
      idx.resize(static_cast<size_t>(kvh * tq * d));
      std::iota(idx.begin(), idx.end(), size_t{0});
      visit(idx, -1);
      return;
    case Axis::Head:
      for (int64_t h = 0; h < kvh; ++h) {
        idx.clear();
        for (int64_t t = 0; t < tq; ++t)
          for (int64_t c = 0; c < d; ++c) idx.push_back(at(h, t, c));
        visit(idx, h);
      }
      return;
    case Axis::Token: {
      const int64_t run = runLength(spec.group, d);
      for (int64_t h = 0; h < kvh; ++h)
        for (int64_t t = 0; t < tq; ++t)
          for (int64_t c0 = 0; c0 < d; c0 += run) {
            idx.clear();
            for (int64_t c = c0; c < std::min(d, c0 + run); ++c) idx.push_back(at(h, t, c));
            visit(idx, h);
          }
      return;
    }
    case Axis::Channel: {
      const int64_t run = runLength(spec.group, tq);
      for (int64_t h = 0; h < kvh; ++h)
        for (int64_t c = 0; c < d; ++c)
          for (int64_t t0 = 0; t0 < tq; t0 += run) {
            idx.clear();
            for (int64_t t = t0; t < std::min(tq, t0 + run); ++t) idx.push_back(at(h, t, c));
            visit(idx, h);
          }
      return;
    }
  }
}

}  // namespace

int64_t topChannelCount(int64_t headDim) {
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(0.01 * static_cast<double>(headDim))));
}

TensorOutliers profileHead(const Tensor3& x, int64_t head, const OutlierOptions& options,
                           const std::vector<std::string>& tokenText) {
  TensorOutliers out;
  const int64_t t = x.tokens, d = x.dim;
  std::vector<double> maxAbs(static_cast<size_t>(d), 0.0), norms(static_cast<size_t>(t), 0.0);
  std::vector<int64_t> topCount(static_cast<size_t>(d), 0);
  const int64_t k = std::min(topChannelCount(d), d);
  std::vector<int64_t> order(static_cast<size_t>(d));
  double sum = 0;
  for (int64_t i = 0; i < t; ++i) {
    const float* row = x.row(head, i);
    double n2 = 0;
    for (int64_t c = 0; c < d; ++c) {
      const double a = std::abs(static_cast<double>(row[c]));
      maxAbs[static_cast<size_t>(c)] = std::max(maxAbs[static_cast<size_t>(c)], a);
      n2 += a * a;
      sum += row[c];
    }
    norms[static_cast<size_t>(i)] = std::sqrt(n2);
    // The token's top-k channels by |x| (ties: lower channel first).
    std::iota(order.begin(), order.end(), int64_t{0});
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
      const float fa = std::abs(row[a]), fb = std::abs(row[b]);
      return fa != fb ? fa > fb : a < b;
    });
    for (int64_t j = 0; j < k; ++j) ++topCount[static_cast<size_t>(order[static_cast<size_t>(j)])];
  }
  // Pearson kurtosis m4 / m2² about the mean (not excess: a normal distribution gives 3).
  const double n = static_cast<double>(t * d);
  const double mean = n > 0 ? sum / n : 0;
  double m2 = 0, m4 = 0;
  for (int64_t i = 0; i < t; ++i) {
    const float* row = x.row(head, i);
    for (int64_t c = 0; c < d; ++c) {
      const double z = (row[c] - mean) * (row[c] - mean);
      m2 += z;
      m4 += z * z;
    }
  }
  out.kurtosis = m2 > 0 ? (m4 / n) / ((m2 / n) * (m2 / n)) : 0.0;

  const double medChannel = median(maxAbs);
  for (int64_t c = 0; c < d; ++c) {
    ChannelStat s;
    s.channel = static_cast<int>(c);
    s.maxAbs = maxAbs[static_cast<size_t>(c)];
    s.ratio = safeRatio(s.maxAbs, medChannel);
    s.persistence = t > 0 ? static_cast<double>(topCount[static_cast<size_t>(c)]) / static_cast<double>(t) : 0;
    out.channels.push_back(s);
    if (s.ratio > options.threshold) out.outlierChannels.push_back(s);
  }
  std::stable_sort(out.outlierChannels.begin(), out.outlierChannels.end(),
                   [](const ChannelStat& a, const ChannelStat& b) { return a.ratio > b.ratio; });

  const double medToken = median(norms);
  out.tokenNormRatio.resize(static_cast<size_t>(t));
  std::vector<int64_t> tokens(static_cast<size_t>(t));
  for (int64_t i = 0; i < t; ++i) {
    out.tokenNormRatio[static_cast<size_t>(i)] = safeRatio(norms[static_cast<size_t>(i)], medToken);
    tokens[static_cast<size_t>(i)] = i;
  }
  std::stable_sort(tokens.begin(), tokens.end(), [&](int64_t a, int64_t b) {
    return out.tokenNormRatio[static_cast<size_t>(a)] > out.tokenNormRatio[static_cast<size_t>(b)];
  });
  for (size_t r = 0; r < tokens.size(); ++r) {
    const int64_t i = tokens[r];
    const double ratio = out.tokenNormRatio[static_cast<size_t>(i)];
    if (static_cast<int>(r) >= options.topTokens && !(ratio > options.threshold)) break;
    TokenStat s{i, norms[static_cast<size_t>(i)], ratio, {}};
    if (static_cast<size_t>(i) < tokenText.size()) s.text = tokenText[static_cast<size_t>(i)];
    out.topTokens.push_back(s);
  }
  return out;
}

Expected<std::vector<double>> codeUtilisation(const Tensor3& x, const QuantSpec& spec,
                                              const Tensor3* preRope) {
  const FormatInfo& info = formatInfo(spec.format);
  if (info.groupCount == nullptr) {  // fp16, bf16, fp32, none: no groups, no codes
    return Status::invalidArgument("code utilisation: '" + toString(spec) +
                                   "' has no codes to count (it stores every value)");
  }
  const Tensor3* source = &x;
  if (spec.prerope) {
    if (!preRope) return Status::invalidArgument("code utilisation: prerope needs key_pre_rope");
    source = preRope;
  }
  const int64_t kvh = source->heads, t = source->tokens, d = source->dim;
  const QuantizedTokens range = quantizedTokens(spec, t);
  const int64_t first = range.first;
  const int64_t count = range.count;
  std::vector<double> perHead(static_cast<size_t>(kvh) + 1, 0.0);
  if (count == 0) return perHead;
  Tensor3 q(kvh, count, d);
  for (int64_t h = 0; h < kvh; ++h) {
    std::copy_n(source->row(h, first), static_cast<size_t>(count * d), q.row(h, 0));
  }
  if (rotates(spec)) {
    KVS_RETURN_IF_ERROR(checkRotation(spec, d).withContext("code utilisation"));
    rotateRows(spec, q.data.data(), kvh * count, d);
  }
  // Outliers are stored apart: they are zeroed for the format and left out of the count.
  std::vector<char> isOutlier(q.data.size(), 0);
  if (spec.outliers > 0) {
    const int64_t n = count * d;
    const int64_t k = std::min<int64_t>(n, static_cast<int64_t>(std::ceil(spec.outliers * static_cast<double>(n))));
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t h = 0; h < kvh; ++h) {
      const float* base = q.row(h, 0);
      std::iota(order.begin(), order.end(), int64_t{0});
      std::nth_element(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
        const float fa = std::abs(base[a]), fb = std::abs(base[b]);
        return fa != fb ? fa > fb : a < b;
      });
      for (int64_t j = 0; j < k; ++j) {
        const size_t at = static_cast<size_t>(h * n + order[static_cast<size_t>(j)]);
        isOutlier[at] = 1;
        q.data[at] = 0.0f;
      }
    }
  }
  Tensor3 recon = q;
  KVS_RETURN_IF_ERROR(quantizeFormatInPlace(recon, spec).withContext("code utilisation"));
  const double bits = info.hasBits ? spec.bits : info.payloadBits;
  const double codes = std::exp2(std::round(bits));

  std::vector<double> sum(static_cast<size_t>(kvh), 0.0), groups(static_cast<size_t>(kvh), 0.0);
  double allSum = 0, allGroups = 0;
  std::vector<std::pair<float, float>> members;  // (value, reconstruction)
  std::vector<float> used;
  forEachGroup(kvh, count, d, spec, [&](const std::vector<size_t>& idx, int64_t head) {
    members.clear();
    for (size_t i : idx) {
      if (!isOutlier[i]) members.emplace_back(q.data[i], recon.data[i]);
    }
    if (members.empty()) return;
    std::sort(members.begin(), members.end());
    const size_t drop = static_cast<size_t>(std::floor(0.005 * static_cast<double>(members.size())));
    used.clear();
    for (size_t i = drop; i < members.size() - drop; ++i) used.push_back(members[i].second);
    std::sort(used.begin(), used.end());
    const double distinct = static_cast<double>(std::unique(used.begin(), used.end()) - used.begin());
    const double u = std::min(1.0, distinct / codes);
    allSum += u;
    allGroups += 1;
    for (int64_t h = head < 0 ? 0 : head; h < (head < 0 ? kvh : head + 1); ++h) {
      sum[static_cast<size_t>(h)] += u;
      groups[static_cast<size_t>(h)] += 1;
    }
  });
  for (int64_t h = 0; h < kvh; ++h) {
    perHead[static_cast<size_t>(h)] = groups[static_cast<size_t>(h)] > 0 ? sum[static_cast<size_t>(h)] / groups[static_cast<size_t>(h)] : 0;
  }
  perHead[static_cast<size_t>(kvh)] = allGroups > 0 ? allSum / allGroups : 0;
  return perHead;
}

Expected<OutlierProfile> outlierProfile(const Dump& dump, const OutlierOptions& options,
                                        const Progress& progress) {
  const DumpInfo& info = dump.info();
  if (!(options.threshold > 0)) return Status::invalidArgument("outliers: --threshold must be > 0");
  if (options.sequence < 0 || options.sequence >= info.sequences) {
    return Status::invalidArgument(info.path + ": sequence " + std::to_string(options.sequence) +
                                   " does not exist");
  }
  OutlierProfile profile;
  profile.dump = info;
  profile.threshold = options.threshold;
  std::vector<int> layers = options.layers;
  if (layers.empty()) {
    for (int l = 0; l < info.layers; ++l) layers.push_back(l);
  }
  // Each layer's spec for K and V (a plan gives each layer its own); prerope ones measure K only,
  // and only where the dump has key_pre_rope.
  std::vector<std::optional<QuantSpec>> keySpecs(static_cast<size_t>(info.layers));
  std::vector<std::optional<QuantSpec>> valueSpecs(static_cast<size_t>(info.layers));
  if (options.spec) {
    profile.spec = toString(*options.spec);
    auto specs = resolve(*options.spec, info.layers);
    if (!specs) return specs.status().withContext("--spec");
    bool noValue = false, noKey = false;
    for (int l = 0; l < info.layers; ++l) {
      const QuantSpec& s = (*specs)[static_cast<size_t>(l)];
      keySpecs[static_cast<size_t>(l)] = s;
      valueSpecs[static_cast<size_t>(l)] = s;
      if (!s.prerope) continue;
      valueSpecs[static_cast<size_t>(l)].reset();
      noValue = true;
      if (!info.hasKeyPreRope) {
        keySpecs[static_cast<size_t>(l)].reset();
        noKey = true;
      }
    }
    const bool plan = !isUniform(*options.spec);
    if (noValue) {
      profile.notes.push_back(std::string("prerope applies to keys only: no value code utilisation") +
                              (plan ? " in the layers whose spec has it" : ""));
    }
    if (noKey) {
      profile.notes.push_back(std::string("the dump has no key_pre_rope: no key code utilisation") +
                              (plan ? " in the layers whose spec has prerope" : ""));
    }
    for (int l = 0; l < info.layers; ++l) {
      for (auto [spec, isKey] : {std::pair{&keySpecs[static_cast<size_t>(l)], true},
                                 std::pair{&valueSpecs[static_cast<size_t>(l)], false}}) {
        if (!*spec) continue;
        SpecContext ctx{isKey, info.kvHeads, info.headDim, info.hasKeyPreRope};
        Status s = validateSpec(**spec, ctx);
        if (plan) s = s.withContext("layer " + std::to_string(l));
        KVS_RETURN_IF_ERROR(s.withContext("--spec"));
      }
    }
  }
  std::vector<std::string> text;
  if (info.hasTokenText) {
    auto t = dump.tokenText(options.sequence);
    if (!t) return t.status();
    text = std::move(*t);
  }
  for (size_t li = 0; li < layers.size(); ++li) {
    const int layer = layers[li];
    if (layer < 0 || layer >= info.layers) {
      return Status::invalidArgument(info.path + ": layer " + std::to_string(layer) + " does not exist");
    }
    if (!report(progress, static_cast<double>(li) / static_cast<double>(layers.size()), "outlier profile")) {
      return Status::cancelled();
    }
    auto key = dump.read(layer, TensorKind::Key, options.sequence);
    if (!key) return key.status();
    auto value = dump.read(layer, TensorKind::Value, options.sequence);
    if (!value) return value.status();
    std::optional<Tensor3> pre;
    if (info.hasKeyPreRope) {
      auto p = dump.read(layer, TensorKind::KeyPreRope, options.sequence);
      if (!p) return p.status();
      pre = std::move(*p);
    }
    LayerOutliers lo;
    lo.layer = layer;
    std::vector<double> ku, vu;
    const std::string where = info.path + ": layer " + std::to_string(layer);
    const std::optional<QuantSpec>& keySpec = keySpecs[static_cast<size_t>(layer)];
    const std::optional<QuantSpec>& valueSpec = valueSpecs[static_cast<size_t>(layer)];
    if (keySpec) {
      auto u = codeUtilisation(*key, *keySpec, pre ? &*pre : nullptr);
      if (!u) return u.status().withContext(where + ": key");
      ku = *u;
      lo.keyUtilisation = ku.back();
    }
    if (valueSpec) {
      auto u = codeUtilisation(*value, *valueSpec);
      if (!u) return u.status().withContext(where + ": value");
      vu = *u;
      lo.valueUtilisation = vu.back();
    }
    for (int64_t h = 0; h < key->heads; ++h) {
      HeadOutliers ho;
      ho.kvHead = static_cast<int>(h);
      ho.key = profileHead(*key, h, options, text);
      if (pre) ho.keyPreRope = profileHead(*pre, h, options, text);
      ho.value = profileHead(*value, h, options, text);
      if (!ku.empty()) {
        // A prerope spec quantizes pre-RoPE keys: its utilisation describes that tensor.
        (keySpec->prerope && ho.keyPreRope ? ho.keyPreRope->codeUtilisation : ho.key.codeUtilisation) =
            ku[static_cast<size_t>(h)];
      }
      if (!vu.empty()) ho.value.codeUtilisation = vu[static_cast<size_t>(h)];
      lo.heads.push_back(std::move(ho));
    }
    profile.layers.push_back(std::move(lo));
  }
  report(progress, 1.0, "outlier profile");
  return profile;
}

}  // namespace kvscope
