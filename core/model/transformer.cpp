// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/model/transformer.h"

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace kvscope {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMatrixMap = Eigen::Map<const RowMatrix>;
using StridedRows = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;
using VectorMap = Eigen::Map<Eigen::VectorXf>;
using ConstVectorMap = Eigen::Map<const Eigen::VectorXf>;

// out = W x with W row-major [rows, cols] (run.c's matmul).
void matVec(float* out, const float* w, const float* x, int rows, int cols) {
  VectorMap(out, rows).noalias() = ConstMatrixMap(w, rows, cols) * ConstVectorMap(x, cols);
}

void rmsNorm(float* out, const float* x, const float* weight, int n) {
  float ss = 0;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + kRmsNormEps);
  for (int i = 0; i < n; ++i) out[i] = weight[i] * (x[i] * inv);
}

void softmaxInPlace(float* x, int n) {
  const float mx = *std::max_element(x, x + n);
  float sum = 0;
  for (int i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  for (int i = 0; i < n; ++i) x[i] /= sum;
}

}  // namespace

Status ExactKvStore::store(int, int position, LayerCache& cache) {
  std::memcpy(cache.row(cache.key, position), cache.row(cache.exactKey, position),
              sizeof(float) * static_cast<size_t>(cache.kvDim));
  std::memcpy(cache.row(cache.value, position), cache.row(cache.exactValue, position),
              sizeof(float) * static_cast<size_t>(cache.kvDim));
  return Status::ok();
}

void ropeInterleaved(float* row, int heads, int headDim, int position, double theta) {
  for (int i = 0; i < headDim / 2; ++i) {
    const double freq = std::pow(theta, -2.0 * i / headDim);
    const double angle = position * freq;
    const double c = std::cos(angle), s = std::sin(angle);
    for (int h = 0; h < heads; ++h) {
      float* pair = row + static_cast<size_t>(h) * headDim + 2 * i;
      const double x0 = pair[0], x1 = pair[1];
      pair[0] = static_cast<float>(x0 * c - x1 * s);
      pair[1] = static_cast<float>(x0 * s + x1 * c);
    }
  }
}

Transformer::Transformer(std::shared_ptr<const Checkpoint> model, KvStore* store)
    : model_(std::move(model)), store_(store != nullptr ? store : &exact_) {
  const ModelConfig& c = model_->config();
  const size_t cacheSize = static_cast<size_t>(c.seqLen) * static_cast<size_t>(c.kvDim());
  caches_.resize(static_cast<size_t>(c.layers));
  for (LayerCache& lc : caches_) {
    lc.kvDim = c.kvDim();
    for (auto* v : {&lc.exactKey, &lc.exactKeyPreRope, &lc.exactValue, &lc.key, &lc.value})
      v->assign(cacheSize, 0.0f);
  }
  queries_.assign(static_cast<size_t>(c.layers), std::vector<float>(static_cast<size_t>(c.dim)));
  hidden_.assign(static_cast<size_t>(c.layers), std::vector<float>(static_cast<size_t>(c.dim)));
  logits_.assign(static_cast<size_t>(c.vocabSize), 0.0f);
}

Status Transformer::step(int token, int position) {
  const ModelConfig& c = model_->config();
  if (token < 0 || token >= c.vocabSize)
    return Status::invalidArgument("token " + std::to_string(token) + " is outside the vocabulary [0, " +
                                   std::to_string(c.vocabSize) + ")");
  if (position != nextPosition_)
    return Status::internal("positions must run 0, 1, 2, …; expected " + std::to_string(nextPosition_) +
                            ", got " + std::to_string(position));
  if (position >= c.seqLen)
    return Status::invalidArgument("position " + std::to_string(position) + " is beyond the model's seq_len " +
                                   std::to_string(c.seqLen));
  const int dim = c.dim, hd = c.headDim(), heads = c.heads, kvHeads = c.kvHeads, kvDim = c.kvDim();
  const int groupSize = heads / kvHeads, hidden = c.hiddenDim, span = position + 1;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

  std::vector<float> x(model_->tokenEmbedding() + static_cast<size_t>(token) * dim,
                       model_->tokenEmbedding() + static_cast<size_t>(token + 1) * dim);
  std::vector<float> xb(static_cast<size_t>(dim)), attOut(static_cast<size_t>(dim)),
      proj(static_cast<size_t>(dim)), scores(static_cast<size_t>(span)),
      hb(static_cast<size_t>(hidden)), hb2(static_cast<size_t>(hidden));

  for (int l = 0; l < c.layers; ++l) {
    const LayerWeights& w = model_->layer(l);
    LayerCache& lc = caches_[static_cast<size_t>(l)];
    std::vector<float>& q = queries_[static_cast<size_t>(l)];

    rmsNorm(xb.data(), x.data(), w.rmsAtt, dim);
    matVec(q.data(), w.wq, xb.data(), dim, dim);
    float* kPre = lc.row(lc.exactKeyPreRope, position);
    float* k = lc.row(lc.exactKey, position);
    matVec(kPre, w.wk, xb.data(), kvDim, dim);
    matVec(lc.row(lc.exactValue, position), w.wv, xb.data(), kvDim, dim);
    std::memcpy(k, kPre, sizeof(float) * static_cast<size_t>(kvDim));
    ropeInterleaved(q.data(), heads, hd, position);
    ropeInterleaved(k, kvHeads, hd, position);
    KVS_RETURN_IF_ERROR(store_->store(l, position, lc));

    // Grouped-query attention over the stored rows [0, position].
    for (int h = 0; h < heads; ++h) {
      const int g = h / groupSize;
      StridedRows keys(lc.key.data() + static_cast<size_t>(g) * hd, span, hd, Eigen::OuterStride<>(kvDim));
      StridedRows values(lc.value.data() + static_cast<size_t>(g) * hd, span, hd, Eigen::OuterStride<>(kvDim));
      VectorMap s(scores.data(), span);
      s.noalias() = keys * ConstVectorMap(q.data() + static_cast<size_t>(h) * hd, hd);
      s *= scale;
      softmaxInPlace(scores.data(), span);
      VectorMap(attOut.data() + static_cast<size_t>(h) * hd, hd).noalias() = values.transpose() * s;
    }
    matVec(proj.data(), w.wo, attOut.data(), dim, dim);
    for (int i = 0; i < dim; ++i) x[static_cast<size_t>(i)] += proj[static_cast<size_t>(i)];

    // SwiGLU feed-forward: w2(silu(w1 x) * w3 x).
    rmsNorm(xb.data(), x.data(), w.rmsFfn, dim);
    matVec(hb.data(), w.w1, xb.data(), hidden, dim);
    matVec(hb2.data(), w.w3, xb.data(), hidden, dim);
    for (int i = 0; i < hidden; ++i) {
      const float a = hb[static_cast<size_t>(i)];
      hb[static_cast<size_t>(i)] = a / (1.0f + std::exp(-a)) * hb2[static_cast<size_t>(i)];
    }
    matVec(proj.data(), w.w2, hb.data(), dim, hidden);
    for (int i = 0; i < dim; ++i) x[static_cast<size_t>(i)] += proj[static_cast<size_t>(i)];
    hidden_[static_cast<size_t>(l)] = x;
  }

  rmsNorm(xb.data(), x.data(), model_->rmsFinal(), dim);
  matVec(logits_.data(), model_->classifier(), xb.data(), c.vocabSize, dim);
  ++nextPosition_;
  return Status::ok();
}

uint64_t SplitMix64::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double SplitMix64::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

int sampleToken(const std::vector<float>& logits, double temperature, SplitMix64& rng) {
  const int n = static_cast<int>(logits.size());
  if (temperature <= 0) {
    return static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  const double mx = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    p[static_cast<size_t>(i)] = std::exp((logits[static_cast<size_t>(i)] - mx) / temperature);
    sum += p[static_cast<size_t>(i)];
  }
  const double u = rng.uniform() * sum;
  double acc = 0;
  for (int i = 0; i < n; ++i) {
    acc += p[static_cast<size_t>(i)];
    if (u < acc) return i;
  }
  return n - 1;  // rounding left u at the very top
}

}  // namespace kvscope
