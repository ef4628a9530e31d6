// SPDX-License-Identifier: GPL-3.0-or-later
// How the synthetic model works (see also docs/dump-format.md, "Synthetic dumps"):
// - "Model" parameters (channel scales and means, outlier channels, the locality vector c, the
//   sink direction s, per-head strengths) depend on (seed, layer, head) only; noise also depends
//   on the sequence. Every row draws from its own splitmix64 stream, so rows can be generated in
//   parallel and the result does not depend on thread count or order.
// - Keys are generated before RoPE: mean + scale·N(0,1) + c (high-frequency pairs), outlier
//   channels (low-frequency pairs, so RoPE barely rotates them) hold a large stable value, token
//   0 adds S·s (the sink). key = RoPE(key_pre_rope) at position t.
// - A query at position p is RoPE_p(γ·c + noise) + β·s: RoPE turns γ·c into a score that peaks
//   at j = p and decays with distance (recent tokens), and β·s scores only against the sink.
#include "core/synth/synth.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "core/quant/fp_types.h"

namespace kvscope {

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kSinkMagnitude = 16.0;  // |S·s| added to the sink token's key
constexpr double kLocalityNorm = 4.0;    // |c|
constexpr double kBias = 400.0;          // the bias-outlier channel's constant
// qwen2-bias: ‖b_k‖ of the k_proj bias over a layer's KVH·D entries. Qwen2.5-7B carries ≈ 605 at
// layer 0 and ≈ 921 at its last layer against a median of ≈ 22 in the others (llama.cpp issue
// #21385; docs/dump-format.md).
constexpr double kQwenBiasFirst = 605.0;
constexpr double kQwenBiasLast = 921.0;
constexpr double kQwenBiasOther = 22.0;
constexpr int kQwenBiasChannelsPerHead = 2;  // the large bias sits in a few channels per head
// massive-sinks: the first tokens' key and value norms are 1000× (token 0) down to 100× (the
// last of them) the median token norm (Sun et al. 2024 report 100–10,000× in hidden states).
constexpr int kMassiveSinkTokens = 4;
constexpr double kMassiveSinkRatioFirst = 1000.0;
constexpr double kMassiveSinkRatioLast = 100.0;
// low-entropy: a one-hot head's query scores its previous token this far above zero (scaled).
constexpr double kOneHotScore = 40.0;

uint64_t splitmix(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// Hash of a list of integers, for seeding one stream.
uint64_t mix(std::initializer_list<uint64_t> parts) {
  uint64_t h = 0x6a09e667f3bcc909ULL;
  for (uint64_t p : parts) {
    uint64_t s = h ^ p;
    h = splitmix(s);
  }
  return h;
}

/// A small deterministic stream: uniform in [0, 1) and standard normals by Box–Muller.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  double uniform() { return double(splitmix(state_) >> 11) * (1.0 / 9007199254740992.0); }
  uint64_t next() { return splitmix(state_); }
  double normal() {
    if (hasSpare_) {
      hasSpare_ = false;
      return spare_;
    }
    const double u1 =
        (double((splitmix(state_) >> 11) + 1)) * (1.0 / 9007199254740993.0);  // (0, 1]
    const double u2 = uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2.0 * kPi * u2);
    hasSpare_ = true;
    return r * std::cos(2.0 * kPi * u2);
  }

 private:
  uint64_t state_;
  double spare_ = 0;
  bool hasSpare_ = false;
};

enum Stream : uint64_t {
  kScale = 1,
  kMean,
  kOutlier,
  kLocal,
  kSink,
  kHead,
  kKeyRow,
  kValueRow,
  kQueryRow,
  kValueScale,
  kToken,
  kMassive,
  kProfileBias,  // streams of the extra profiles, after the ones the default output uses
  kMassiveSink
};

/// Channels of RoPE pair i (frequency theta^(-2i/D)).
std::pair<int, int> pairChannels(int pair, int dim, RopeStyle style) {
  if (style == RopeStyle::Interleaved) return {2 * pair, 2 * pair + 1};
  return {pair, pair + dim / 2};
}

/// RoPE frequencies theta^(-2i/D) of the D/2 pairs.
std::vector<double> ropeFrequencies(int dim, double theta) {
  std::vector<double> f(size_t(dim / 2));
  for (int i = 0; i < dim / 2; ++i) f[size_t(i)] = std::pow(theta, -2.0 * i / dim);
  return f;
}

/// cos and sin of every pair's angle at position `pos`.
void ropeAngles(int64_t pos, const std::vector<double>& freq, std::vector<double>& cosv,
                std::vector<double>& sinv) {
  cosv.resize(freq.size());
  sinv.resize(freq.size());
  for (size_t i = 0; i < freq.size(); ++i) {
    const double angle = double(pos) * freq[i];
    cosv[i] = std::cos(angle);
    sinv[i] = std::sin(angle);
  }
}

/// Rotates `row` (D values) by the given pair angles, in double precision.
void rope(float* row, int dim, const std::vector<double>& cosv, const std::vector<double>& sinv,
          RopeStyle style) {
  for (int i = 0; i < dim / 2; ++i) {
    auto [a, b] = pairChannels(i, dim, style);
    const double x0 = row[a], x1 = row[b];
    row[a] = float(x0 * cosv[size_t(i)] - x1 * sinv[size_t(i)]);
    row[b] = float(x0 * sinv[size_t(i)] + x1 * cosv[size_t(i)]);
  }
}

float storageRound(float x, DiskType dtype) {
  return dtype == DiskType::Float16 ? fp::roundFp16(x) : x;
}

/// Per (layer, kv head) parameters of the synthetic model.
struct HeadModel {
  std::vector<double> scale, mean, local, sink, valueScale;
  std::vector<int> outliers;         // regular outlier channels
  std::vector<double> outlierValue;  // their signed magnitude
  std::vector<char> quiet;  // channels of pairs holding an outlier (queries stay small there)
  int bias = -1;
  std::vector<int> biasChannels;     // qwen2-bias: the large k_proj bias channels
  std::vector<double> biasValues;    // their bias
  int massiveKeyChannel = -1;        // massive-sinks: where the first tokens' key norm sits
  int massiveValueChannel = -1;      // and their value norm
  double keyNorm = 0, valueNorm = 0; // expected token norms without the massive entries
};

bool hasRegularOutliers(const SynthOptions& o) {
  return o.profile != "qwen2-bias" && o.profile != "massive-sinks";
}

std::vector<int> regularOutliers(const SynthOptions& o, int layer, int kvHead) {
  if (!hasRegularOutliers(o)) return {};
  const int d = o.headDim, pairs = d / 2;
  // Low-frequency pairs, excluding the lowest (reserved for the bias-outlier channel).
  const int span = std::max(2, d / 8);
  const int lo = std::max(0, pairs - 1 - span);
  std::vector<int> candidates;
  for (int p = lo; p < pairs - 1; ++p) {
    auto [a, b] = pairChannels(p, d, o.ropeStyle);
    candidates.push_back(a);
    candidates.push_back(b);
  }
  Rng rng(mix({o.seed, kOutlier, uint64_t(layer), uint64_t(kvHead)}));
  for (size_t i = candidates.size(); i > 1; --i)
    std::swap(candidates[i - 1], candidates[rng.next() % i]);
  const int count = std::clamp(d / 32, 1, 4) + (layer % 2);
  candidates.resize(std::min<size_t>(candidates.size(), size_t(count)));
  std::sort(candidates.begin(), candidates.end());
  return candidates;
}

HeadModel headModel(const SynthOptions& o, int layer, int kvHead) {
  const int d = o.headDim;
  const uint64_t L = uint64_t(layer), G = uint64_t(kvHead);
  HeadModel m;
  m.scale.resize(size_t(d));
  m.mean.resize(size_t(d));
  m.valueScale.resize(size_t(d));
  Rng rs(mix({o.seed, kScale, L, G})), rm(mix({o.seed, kMean, L, G})),
      rv(mix({o.seed, kValueScale, L, G}));
  for (int c = 0; c < d; ++c) {
    m.scale[size_t(c)] = 0.6 + 0.8 * rs.uniform();
    m.mean[size_t(c)] = 0.3 * rm.normal();
    m.valueScale[size_t(c)] = 0.5 + rv.uniform();
  }
  m.outliers = regularOutliers(o, layer, kvHead);
  Rng ro(mix({o.seed, kOutlier + 100, L, G}));
  for (size_t i = 0; i < m.outliers.size(); ++i) {
    const double factor = 12.0 + 28.0 * ro.uniform();  // 12–40 × a normal channel's typical max
    m.outlierValue.push_back((ro.uniform() < 0.5 ? -1.0 : 1.0) * factor * 5.0);
  }
  m.bias = synthBiasChannel(o, layer);
  if (o.profile == "qwen2-bias") {
    m.biasChannels = synthBiasChannels(o, layer);
    Rng rb(mix({o.seed, kProfileBias, L, G}));
    const double per = synthKeyBiasNorm(o, layer) /
                       std::sqrt(double(o.kvHeads) * double(m.biasChannels.empty() ? d : m.biasChannels.size()));
    if (m.biasChannels.empty()) {
      for (int c = 0; c < d; ++c) m.mean[size_t(c)] += (rb.uniform() < 0.5 ? -per : per);
    } else {
      for (size_t i = 0; i < m.biasChannels.size(); ++i) m.biasValues.push_back(rb.uniform() < 0.5 ? -per : per);
    }
  }
  if (o.profile == "massive-sinks") {
    m.massiveKeyChannel = pairChannels(d / 2 - 1, d, o.ropeStyle).first;
    Rng rc(mix({o.seed, kMassiveSink, L, G}));
    m.massiveValueChannel = int(rc.next() % uint64_t(d));
  }
  // Both channels of an outlier's RoPE pair are kept out of c and s: after rotation the partner
  // carries part of the outlier, which would otherwise leak into the sink and locality scores.
  m.quiet.assign(size_t(d), false);
  for (int p = 0; p < d / 2; ++p) {
    auto [a, b] = pairChannels(p, d, o.ropeStyle);
    auto isBias = [&](int c) {
      return std::find(m.biasChannels.begin(), m.biasChannels.end(), c) != m.biasChannels.end();
    };
    const bool hit = a == m.bias || b == m.bias || isBias(a) || isBias(b) ||
                     a == m.massiveKeyChannel || b == m.massiveKeyChannel ||
                     std::find(m.outliers.begin(), m.outliers.end(), a) != m.outliers.end() ||
                     std::find(m.outliers.begin(), m.outliers.end(), b) != m.outliers.end();
    m.quiet[size_t(a)] = m.quiet[size_t(b)] = hit;
  }
  auto special = [&](int c) { return bool(m.quiet[size_t(c)]); };
  // Locality vector c on high-frequency pairs (i < D/4), sink direction s on the rest.
  m.local.assign(size_t(d), 0.0);
  m.sink.assign(size_t(d), 0.0);
  Rng rl(mix({o.seed, kLocal, L, G})), rk(mix({o.seed, kSink, L, G}));
  double nl = 0, nk = 0;
  for (int p = 0; p < d / 2; ++p) {
    auto [a, b] = pairChannels(p, d, o.ropeStyle);
    for (int c : {a, b}) {
      if (special(c)) continue;
      if (p < d / 4) {
        m.local[size_t(c)] = rl.normal();
        nl += m.local[size_t(c)] * m.local[size_t(c)];
      } else {
        m.sink[size_t(c)] = rk.normal();
        nk += m.sink[size_t(c)] * m.sink[size_t(c)];
      }
    }
  }
  for (auto& x : m.local) x *= kLocalityNorm / std::sqrt(std::max(nl, 1e-12));
  for (auto& x : m.sink) x *= 1.0 / std::sqrt(std::max(nk, 1e-12));
  if (o.profile == "massive-sinks") {
    double k2 = kLocalityNorm * kLocalityNorm, v2 = 0;
    for (int c = 0; c < d; ++c) {
      k2 += m.mean[size_t(c)] * m.mean[size_t(c)] + m.scale[size_t(c)] * m.scale[size_t(c)];
      v2 += m.valueScale[size_t(c)] * m.valueScale[size_t(c)];
    }
    m.keyNorm = std::sqrt(k2);
    m.valueNorm = std::sqrt(v2);
  }
  return m;
}

/// massive-sinks: the norm ratio of first token `j` (log-spaced from 1000× down to 100×).
double massiveSinkRatio(int j, int count) {
  if (count <= 1) return kMassiveSinkRatioFirst;
  const double f = double(j) / double(count - 1);
  return kMassiveSinkRatioFirst * std::pow(kMassiveSinkRatioLast / kMassiveSinkRatioFirst, f);
}

}  // namespace

std::vector<std::string> synthProfiles() {
  return {"llama", "bias-outlier", "qwen2-bias", "massive-sinks", "low-entropy"};
}

double synthKeyBiasNorm(const SynthOptions& o, int layer) {
  if (o.profile != "qwen2-bias") return 0;
  if (layer == 0) return kQwenBiasFirst;
  if (layer == o.layers - 1) return kQwenBiasLast;
  return kQwenBiasOther;
}

std::vector<int> synthBiasChannels(const SynthOptions& o, int layer) {
  if (o.profile == "bias-outlier") {
    const int c = synthBiasChannel(o, layer);
    return c >= 0 ? std::vector<int>{c} : std::vector<int>{};
  }
  if (o.profile != "qwen2-bias" || (layer != 0 && layer != o.layers - 1)) return {};
  // The first channel of the lowest-frequency pairs (k_proj's bias is added before RoPE).
  std::vector<int> out;
  for (int i = 0; i < kQwenBiasChannelsPerHead && i < o.headDim / 2; ++i)
    out.push_back(pairChannels(o.headDim / 2 - 1 - i, o.headDim, o.ropeStyle).first);
  std::sort(out.begin(), out.end());
  return out;
}

int synthMassiveSinkCount(const SynthOptions& o) {
  if (o.profile != "massive-sinks") return 0;
  return std::max(1, std::min(kMassiveSinkTokens, o.tokens / 4));
}

std::vector<int> synthOneHotHeads(const SynthOptions& o, int layer) {
  (void)layer;  // the same heads in every layer
  if (o.profile != "low-entropy") return {};
  std::vector<int> out{0};
  if (o.heads >= 2) out.push_back(o.heads / 2);
  return out;
}

Status validateSynthOptions(const SynthOptions& o) {
  auto bad = [](const std::string& m) { return Status::invalidArgument("synth: " + m); };
  if (o.layers <= 0 || o.kvHeads <= 0 || o.heads <= 0 || o.tokens <= 0 || o.headDim <= 0 ||
      o.sequences <= 0)
    return bad("layers, kv heads, heads, tokens, head dim and sequences must be positive");
  if (o.queries < 0) return bad("queries must not be negative");
  if (o.heads % o.kvHeads != 0)
    return bad("heads " + std::to_string(o.heads) + " is not a multiple of kv heads " +
               std::to_string(o.kvHeads));
  if (o.queries > o.tokens)
    return bad("queries " + std::to_string(o.queries) + " exceed tokens " +
               std::to_string(o.tokens));
  if (o.headDim % 2 != 0 || o.headDim < 8)
    return bad("head dim must be even and at least 8 (RoPE pairs)");
  if (!(o.ropeTheta > 1.0)) return bad("rope theta must be greater than 1");
  auto profiles = synthProfiles();
  if (std::find(profiles.begin(), profiles.end(), o.profile) == profiles.end())
  {
    std::string known;
    for (const std::string& p : profiles) known += (known.empty() ? "" : ", ") + p;
    return bad("unknown profile '" + o.profile + "' (known: " + known + ")");
  }
  return Status::ok();
}

int synthBiasChannel(const SynthOptions& o, int layer) {
  if (o.profile != "bias-outlier" || (layer != 0 && layer != o.layers - 1)) return -1;
  return pairChannels(o.headDim / 2 - 1, o.headDim, o.ropeStyle).first;
}

std::vector<int> synthOutlierChannels(const SynthOptions& o, int layer, int kvHead) {
  std::vector<int> out = regularOutliers(o, layer, kvHead);
  for (int b : synthBiasChannels(o, layer)) out.push_back(b);
  std::sort(out.begin(), out.end());
  return out;
}

int synthMassiveToken(const SynthOptions& o) {
  if (o.tokens < 3) return -1;
  Rng r(mix({o.seed, kMassive}));
  const int span = std::max(1, std::min(o.tokens - 2, o.tokens / 8));
  return 1 + int(r.next() % uint64_t(span));
}

namespace {

// Asked by the first OpenMP thread every 64 tokens while a layer is generated (a long context
// takes a few hundred ms per layer); the others see the answer through `stop` and skip the rest.
struct LayerCancel {
  const Progress* progress = nullptr;
  double fraction = 0;
  std::atomic<bool> stop{false};
  void poll(int j) {
    if (progress == nullptr || j % 64 != 0 || omp_get_thread_num() != 0 || stopped()) return;
    if (!report(*progress, fraction, "generating layers")) stop = true;
  }
  [[nodiscard]] bool stopped() const { return stop.load(std::memory_order_relaxed); }
};

SynthLayer generateLayer(const SynthOptions& o, int layer, int sequence, LayerCancel& cancel);

}  // namespace

SynthLayer synthLayer(const SynthOptions& o, int layer, int sequence) {
  LayerCancel never;
  return generateLayer(o, layer, sequence, never);
}

namespace {

// low-entropy: a previous-token head. Its query is the noise part n of the previous token's key
// (replayed from that key row's stream), kept to the low-frequency pairs that hold no locality
// vector and no outlier, made orthogonal to the sink direction, rotated to that token's position
// and scaled so it scores kOneHotScore there. Against any other key it meets only that key's
// independent noise (and the slowly rotating channel means), so the head puts nearly all its
// mass on one token.
void oneHotQuery(const SynthOptions& o, const HeadModel& m, int layer, int sequence, int g,
                 int64_t pos, double softmaxScale, const std::vector<double>& freq, float* q) {
  const int d = o.headDim;
  const int64_t target = pos > 0 ? pos - 1 : 0;
  Rng rk(mix({o.seed, kKeyRow, uint64_t(layer), uint64_t(sequence), uint64_t(g), uint64_t(target)}));
  std::vector<double> n(size_t(d), 0.0);
  for (int c = 0; c < d; ++c) n[size_t(c)] = m.scale[size_t(c)] * rk.normal();
  std::vector<char> keep(size_t(d), 0);
  for (int p = d / 4; p < d / 2; ++p) {
    auto [a, b] = pairChannels(p, d, o.ropeStyle);
    keep[size_t(a)] = !m.quiet[size_t(a)];
    keep[size_t(b)] = !m.quiet[size_t(b)];
  }
  double ns = 0;
  for (int c = 0; c < d; ++c) {
    if (!keep[size_t(c)]) n[size_t(c)] = 0;
    ns += n[size_t(c)] * m.sink[size_t(c)];
  }
  double n2 = 0;
  for (int c = 0; c < d; ++c) {
    n[size_t(c)] -= ns * m.sink[size_t(c)];  // s is a unit vector
    n2 += n[size_t(c)] * n[size_t(c)];
  }
  const double alpha = kOneHotScore / (softmaxScale * std::max(n2, 1e-12));
  for (int c = 0; c < d; ++c) q[c] = float(alpha * n[size_t(c)]);
  std::vector<double> cosv, sinv;
  ropeAngles(target, freq, cosv, sinv);
  rope(q, d, cosv, sinv, o.ropeStyle);
}

/// Elements of a tensor below which a layer is generated on one thread.
constexpr int64_t kMinParallelElements = int64_t{1} << 15;

SynthLayer generateLayer(const SynthOptions& o, int layer, int sequence, LayerCancel& cancel) {
  const int kvh = o.kvHeads, t = o.tokens, d = o.headDim, h = o.heads, tq = o.queries;
  const int group = h / kvh;
  const int massive = synthMassiveToken(o);
  const int massiveSinks = synthMassiveSinkCount(o);
  const std::vector<int> oneHot = synthOneHotHeads(o, layer);
  const double softmaxScale = 1.0 / std::sqrt(double(d));
  const uint64_t L = uint64_t(layer), B = uint64_t(sequence);
  std::vector<HeadModel> models;
  for (int g = 0; g < kvh; ++g) models.push_back(headModel(o, layer, g));

  SynthLayer out{Tensor3(kvh, t, d), Tensor3(kvh, t, d), Tensor3(kvh, t, d), Tensor3()};
  const std::vector<double> freq = ropeFrequencies(d, o.ropeTheta);
  // Tokens in parallel, heads inside, so each token's RoPE angles are computed once. A small
  // layer runs on one thread: starting the team costs more than its work, and on a busy machine
  // a barrier can cost a scheduler tick (synth --layers 100000 of tiny layers, issue 33).
  const bool parallel = int64_t(t) * kvh * d >= kMinParallelElements;
#pragma omp parallel for schedule(static) if (parallel)
  for (int j = 0; j < t; ++j) {
    cancel.poll(j);
    if (cancel.stopped()) continue;
    std::vector<double> cosv, sinv;
    ropeAngles(j, freq, cosv, sinv);
    for (int g = 0; g < kvh; ++g) {
      const HeadModel& m = models[size_t(g)];
      Rng rk(mix({o.seed, kKeyRow, L, B, uint64_t(g), uint64_t(j)}));
      float* kp = out.keyPreRope.row(g, j);
      for (int c = 0; c < d; ++c) {
        double x = m.mean[size_t(c)] + m.scale[size_t(c)] * rk.normal() + m.local[size_t(c)];
        if (j == kSynthSinkToken) x += kSinkMagnitude * m.sink[size_t(c)];
        kp[c] = float(x);
      }
      for (size_t i = 0; i < m.outliers.size(); ++i)
        kp[m.outliers[i]] = float(m.outlierValue[i] * (1.0 + 0.08 * rk.normal()));
      if (m.bias >= 0) kp[m.bias] = float(kBias + 0.5 * rk.normal());
      for (size_t i = 0; i < m.biasChannels.size(); ++i) kp[m.biasChannels[i]] += float(m.biasValues[i]);
      if (j < massiveSinks) kp[m.massiveKeyChannel] = float(massiveSinkRatio(j, massiveSinks) * m.keyNorm);
      for (int c = 0; c < d; ++c) kp[c] = storageRound(kp[c], o.dtype);
      float* k = out.key.row(g, j);
      std::copy(kp, kp + d, k);
      rope(k, d, cosv, sinv, o.ropeStyle);

      Rng rv(mix({o.seed, kValueRow, L, B, uint64_t(g), uint64_t(j)}));
      float* v = out.value.row(g, j);
      for (int c = 0; c < d; ++c) v[c] = float(m.valueScale[size_t(c)] * rv.normal());
      if (rv.uniform() < 1.0 / 16.0) {  // mild per-token outlier
        const int c = int(rv.next() % uint64_t(d));
        v[c] *= float(6.0 + 6.0 * rv.uniform());
      }
      if (j == kSynthSinkToken)
        for (int c = 0; c < d; ++c) v[c] *= 0.1f;  // sinks carry little value, as in real models
      if (j < massiveSinks)
        v[m.massiveValueChannel] = float(massiveSinkRatio(j, massiveSinks) * m.valueNorm);
      if (j == massive) {
        Rng rm(mix({o.seed, kMassive, L, uint64_t(g)}));
        for (int n = 0; n < 2; ++n)
          v[rm.next() % uint64_t(d)] =
              float((rm.uniform() < 0.5 ? -1 : 1) * (40.0 + 40.0 * rm.uniform()));
      }
    }
  }

  if (tq > 0 && !cancel.stopped()) {
    out.query = Tensor3(h, tq, d);
    const double logT = std::log(double(t));
#pragma omp parallel for schedule(static) if (int64_t(h) * tq * d >= kMinParallelElements)
    for (int64_t row = 0; row < int64_t(h) * tq; ++row) {
      const int qh = int(row / tq), i = int(row % tq);
      const int g = qh / group;
      const int64_t pos = int64_t(t - tq + i);
      const HeadModel& m = models[size_t(g)];
      Rng rh(mix({o.seed, kHead, L, uint64_t(qh)}));
      // Target scores: the sink beats an average token by log(T) + 2…4, the current token by 3…5.
      const double sinkScore = logT + 2.0 + 2.0 * rh.uniform();
      const double localScore = 3.0 + 2.0 * rh.uniform();
      const double beta = sinkScore / (kSinkMagnitude * softmaxScale);
      const double gamma = localScore / (kLocalityNorm * kLocalityNorm * softmaxScale);
      float* q = out.query.row(qh, i);
      if (std::find(oneHot.begin(), oneHot.end(), qh) != oneHot.end()) {
        oneHotQuery(o, m, layer, sequence, g, pos, softmaxScale, freq, q);
        continue;
      }
      Rng rq(mix({o.seed, kQueryRow, L, B, uint64_t(qh), uint64_t(i)}));
      for (int c = 0; c < d; ++c) q[c] = float(gamma * m.local[size_t(c)] + 0.6 * rq.normal());
      for (int c = 0; c < d; ++c)
        if (m.quiet[size_t(c)]) q[c] *= 0.15f;
      std::vector<double> cosv, sinv;
      ropeAngles(pos, freq, cosv, sinv);
      rope(q, d, cosv, sinv, o.ropeStyle);
      for (int c = 0; c < d; ++c) q[c] += float(beta * m.sink[size_t(c)]);
      if (massiveSinks > 0) {  // the massive entries' pair scores nothing (queries zero there)
        auto [a, b] = pairChannels(d / 2 - 1, d, o.ropeStyle);
        q[a] = q[b] = 0.0f;
      }
    }
  }
  return out;
}

}  // namespace

Status writeSynthDump(const std::string& path, const SynthOptions& o, const Progress& progress) {
  KVS_RETURN_IF_ERROR(validateSynthOptions(o));
  DumpWriterOptions w;
  w.layers = o.layers;
  w.kvHeads = o.kvHeads;
  w.tokens = o.tokens;
  w.headDim = o.headDim;
  w.heads = o.queries > 0 ? o.heads : 0;
  w.queries = o.queries;
  w.keyPreRope = true;
  w.sequences = o.sequences;
  w.withTokens = true;
  w.withTokenText = true;
  w.dtype = o.dtype;
  w.model = o.model;
  w.ropeTheta = o.ropeTheta;
  w.ropeStyle = o.ropeStyle;
  w.softmaxScale = 1.0 / std::sqrt(double(o.headDim));
  w.stringAttributes["synth_profile"] = o.profile;
  w.stringAttributes["synth_seed"] = std::to_string(o.seed);
  // The writer asks between blocks of each layer's writes, so Ctrl-C does not wait for a layer.
  double done = 0;
  w.cancel = [&](double, std::string_view) { return report(progress, done, "writing layers"); };
  auto writer = DumpWriter::create(path, w);
  if (!writer) return writer.status();
  DumpWriter& dw = **writer;

  static const char* const kWords[] = {"the", " of",   " and",  " to",  " a",  " in",   " is",
                                       " it", " that", " was",  " for", " on", " with", " as",
                                       " he", " she",  " they", " at",  " by", " this"};
  const int massive = synthMassiveToken(o);
  for (int b = 0; b < o.sequences; ++b) {
    std::vector<int64_t> ids(size_t(o.tokens));
    std::vector<std::string> text(size_t(o.tokens));
    Rng r(mix({o.seed, kToken, uint64_t(b)}));
    for (int j = 0; j < o.tokens; ++j) {
      const uint64_t word = r.next() % (sizeof kWords / sizeof kWords[0]);
      ids[size_t(j)] = j == 0 ? 1 : j == massive ? 29889 : int64_t(100 + word);
      text[size_t(j)] = j == 0 ? "<s>" : j == massive ? "." : kWords[word];
    }
    KVS_RETURN_IF_ERROR(dw.writeTokens(ids, b));
    KVS_RETURN_IF_ERROR(dw.writeTokenText(text, b));
  }
  const double total = double(o.layers) * o.sequences;
  for (int l = 0; l < o.layers; ++l)
    for (int b = 0; b < o.sequences; ++b) {
      done = (l * o.sequences + b) / total;
      if (!report(progress, done, "generating layers")) return Status::cancelled();
      LayerCancel cancel;
      cancel.progress = &progress;
      cancel.fraction = done;
      SynthLayer layer = generateLayer(o, l, b, cancel);
      if (cancel.stopped()) return Status::cancelled();
      KVS_RETURN_IF_ERROR(dw.write(l, TensorKind::Key, layer.key, b));
      KVS_RETURN_IF_ERROR(dw.write(l, TensorKind::KeyPreRope, layer.keyPreRope, b));
      KVS_RETURN_IF_ERROR(dw.write(l, TensorKind::Value, layer.value, b));
      if (o.queries > 0) KVS_RETURN_IF_ERROR(dw.write(l, TensorKind::Query, layer.query, b));
    }
  KVS_RETURN_IF_ERROR(dw.finish());
  report(progress, 1.0, "done");
  return Status::ok();
}

SynthOptions sampleOptions() { return SynthOptions{}; }

Expected<std::string> ensureSampleDump(const std::string& folder) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) return Status::ioError(folder + ": cannot create folder: " + ec.message());
  // The name carries a format revision so an older cached sample is never reused.
  const std::string path = (fs::path(folder) / "kvscope-sample-v1.h5").string();
  if (fs::is_regular_file(path, ec)) {
    if (Dump::open(path)) return path;
  }
  KVS_RETURN_IF_ERROR(writeSynthDump(path, sampleOptions()));
  return path;
}

}  // namespace kvscope
