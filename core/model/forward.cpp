// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/model/forward.h"

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/modelfile/model_format.h"
#include "core/quant/rope.h"
#include "core/util/small_float.h"

namespace kvscope {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixMap = Eigen::Map<RowMatrix>;
using ConstMatrixMap = Eigen::Map<const RowMatrix>;
using StridedMap = Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>>;
using ConstStridedMap = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;

/// Positions handled by one GEMM of the projections and the feed-forward: bounds the [rows, ffn]
/// scratch whatever T is, and keeps the GEMMs large enough to run near the machine's rate.
constexpr int kRowBlock = 512;
/// Queries per block of attention scores ([block, T] per head and thread).
constexpr int kQueryBlock = 64;

/// out[n, rows] = x[n, cols] · w[rows, cols]ᵀ (+ bias), x rounded first as `round` says.
void project(const float* x, int n, int cols, const float* w, int rows, const float* bias, float* out,
             ActivationRounding round = ActivationRounding::None) {
  std::vector<float> rounded;
  if (round != ActivationRounding::None) {
    rounded.resize(static_cast<size_t>(n) * cols);
    const size_t count = rounded.size();
    if (round == ActivationRounding::Fp16) {
      for (size_t i = 0; i < count; ++i) rounded[i] = fp::roundFp16(x[i]);
    } else {
      for (size_t i = 0; i < count; ++i) rounded[i] = fp::roundBf16(x[i]);
    }
    x = rounded.data();
  }
  MatrixMap o(out, n, rows);
  o.noalias() = ConstMatrixMap(x, n, cols) * ConstMatrixMap(w, rows, cols).transpose();
  if (bias != nullptr) o.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(bias, rows);
}

float silu(float a) { return a / (1.0f + std::exp(-a)); }

Status roleRows(const Model& m, TensorRole role, int layer, int64_t rows, int64_t cols, float* out) {
  const WeightInfo info = m.info(role, layer);
  int64_t r = 1, c = 0;
  if (info.shape.size() == 1) {
    c = info.shape[0];
  } else if (info.shape.size() == 2) {
    r = info.shape[0];
    c = info.shape[1];
  }
  if (r != rows || c != cols)
    return Status::invalidData(m.path() + ": tensor " + info.name + " has shape [" + std::to_string(r) + ", " +
                               std::to_string(c) + "], the model's hyperparameters need [" + std::to_string(rows) +
                               ", " + std::to_string(cols) + "]");
  return m.rows(role, layer, 0, rows, out);
}

/// Row-wise softmax of s[0..n) in place, in double, into p (double); returns the argmax.
int softmaxRow(const float* s, int n, double* p) {
  double mx = -std::numeric_limits<double>::infinity();
  int arg = 0;
  for (int j = 0; j < n; ++j) {
    if (s[j] > mx) {
      mx = s[j];
      arg = j;
    }
  }
  double sum = 0;
  for (int j = 0; j < n; ++j) sum += (p[j] = std::exp(static_cast<double>(s[j]) - mx));
  const double inv = 1.0 / sum;
  for (int j = 0; j < n; ++j) p[j] *= inv;
  return arg;
}

/// Everything one head of one stream's attention needs.
struct AttentionArgs {
  int n = 0, p0 = 0, heads = 0, kvHeads = 0, d = 0;
  const float* q = nullptr;        ///< [n, H·D] exact queries
  const float* qStored = nullptr;  ///< [n, H·D] queries as the engine converts them (== q without)
  const float* kExact = nullptr;   ///< [p0 + n, KVH·D]
  const float* vExact = nullptr;
  const StoredRows* kStored = nullptr;  ///< null: the stream reads its exact rows
  const StoredRows* vStored = nullptr;
  float* out = nullptr;                 ///< [n, H·D] what the stream's attention returns
  AttentionFigures* figures = nullptr;  ///< the stored cache against the exact rows (needs stores)
};

/// Attention of queries [p0, p0 + n) over an exact cache of keys [0, p0 + n).
AttentionArgs exactAttention(const ModelHparams& hp, int n, int p0, const float* q, const float* k, const float* v,
                             float* out) {
  AttentionArgs a;
  a.n = n;
  a.p0 = p0;
  a.heads = hp.heads;
  a.kvHeads = hp.kvHeads;
  a.d = hp.headDim;
  a.q = a.qStored = q;
  a.kExact = k;
  a.vExact = v;
  a.out = out;
  return a;
}

void attention(const AttentionArgs& a) {
  const int D = a.d, qDim = a.heads * a.d, kvDim = a.kvHeads * a.d, group = a.heads / a.kvHeads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const bool stored = a.kStored != nullptr || a.vStored != nullptr;
  const bool kAll = a.kStored == nullptr || a.kStored->everyVisibleRowStored();
  const bool vAll = a.vStored == nullptr || a.vStored->everyVisibleRowStored();
  const bool converted = a.qStored != a.q;
  std::vector<AttentionFigures> perHead(static_cast<size_t>(a.heads));

#pragma omp parallel
  {
    RowMatrix sExact, sMix, sAlt, pMix, pPart, oExact, oAlt;
    std::vector<double> pe, ps;
#pragma omp for schedule(dynamic, 1)
    for (int h = 0; h < a.heads; ++h) {
      const int g = h / group;
      AttentionFigures& fig = perHead[static_cast<size_t>(h)];
      const float* kE = a.kExact + static_cast<size_t>(g) * D;
      const float* vE = a.vExact + static_cast<size_t>(g) * D;
      const float* kQ = a.kStored != nullptr ? a.kStored->rows.data() + static_cast<size_t>(g) * D : kE;
      const float* vQ = a.vStored != nullptr ? a.vStored->rows.data() + static_cast<size_t>(g) * D : vE;
      for (int b0 = 0; b0 < a.n; b0 += kQueryBlock) {
        const int b = std::min(kQueryBlock, a.n - b0);
        const int span = a.p0 + b0 + b;  // keys the block's last query sees
        ConstStridedMap qBlock(a.q + static_cast<size_t>(b0) * qDim + static_cast<size_t>(h) * D, b, D,
                               Eigen::OuterStride<>(qDim));
        ConstStridedMap qsBlock(a.qStored + static_cast<size_t>(b0) * qDim + static_cast<size_t>(h) * D, b, D,
                                Eigen::OuterStride<>(qDim));
        ConstStridedMap keysE(kE, span, D, Eigen::OuterStride<>(kvDim));
        ConstStridedMap valsE(vE, span, D, Eigen::OuterStride<>(kvDim));
        ConstStridedMap keysQ(kQ, span, D, Eigen::OuterStride<>(kvDim));
        ConstStridedMap valsQ(vQ, span, D, Eigen::OuterStride<>(kvDim));
        StridedMap outBlock(a.out + static_cast<size_t>(b0) * qDim + static_cast<size_t>(h) * D, b, D,
                            Eigen::OuterStride<>(qDim));

        const bool needExact = !stored || a.figures != nullptr || (!kAll && !converted);
        if (needExact) sExact.noalias() = (qBlock * keysE.transpose()) * scale;
        if (!stored) {
          // The exact cache: softmax over keys [0, p], then P·V.
          pMix.resize(b, span);
          pe.resize(static_cast<size_t>(span));
          for (int r = 0; r < b; ++r) {
            const int visible = a.p0 + b0 + r + 1;
            softmaxRow(sExact.row(r).data(), visible, pe.data());
            for (int j = 0; j < visible; ++j) pMix(r, j) = static_cast<float>(pe[static_cast<size_t>(j)]);
            for (int j = visible; j < span; ++j) pMix(r, j) = 0.0f;
          }
          outBlock.noalias() = pMix * valsE;
          continue;
        }
        // Scores as the stream reads its cache: the stored row once since[j] ≤ p, else the exact
        // row, both against the query as the engine converts it.
        sMix.noalias() = (qsBlock * keysQ.transpose()) * scale;
        if (!kAll) {
          const RowMatrix* exactScores = &sExact;
          if (converted) {
            sAlt.noalias() = (qsBlock * keysE.transpose()) * scale;
            exactScores = &sAlt;
          }
          const std::vector<int>& since = a.kStored->since;
          for (int r = 0; r < b; ++r) {
            const int p = a.p0 + b0 + r;
            for (int j = 0; j <= p; ++j) {
              if (since[static_cast<size_t>(j)] > p) sMix(r, j) = (*exactScores)(r, j);
            }
          }
        }
        pMix.resize(b, span);
        pPart.resize(b, span);
        ps.resize(static_cast<size_t>(span));
        pe.resize(static_cast<size_t>(span));
        if (a.figures != nullptr) {
          oExact.resize(b, D);
        }
        for (int r = 0; r < b; ++r) {
          const int p = a.p0 + b0 + r, visible = p + 1;
          const int argStored = softmaxRow(sMix.row(r).data(), visible, ps.data());
          for (int j = 0; j < visible; ++j) pMix(r, j) = static_cast<float>(ps[static_cast<size_t>(j)]);
          for (int j = visible; j < span; ++j) pMix(r, j) = 0.0f;
          if (a.figures != nullptr) {
            const int argExact = softmaxRow(sExact.row(r).data(), visible, pe.data());
            double kl = 0;
            for (int j = 0; j < visible; ++j) {
              const double pj = pe[static_cast<size_t>(j)], qj = ps[static_cast<size_t>(j)];
              if (pj > 0) kl += pj * (std::log(pj) - std::log(std::max(qj, 1e-300)));
            }
            kl = std::max(kl, 0.0);
            fig.klSum += kl;
            fig.klMax = std::max(fig.klMax, kl);
            fig.top1 += argExact == argStored ? 1 : 0;
            ++fig.count;
            // The exact output of this query, for the relative error below.
            for (int i = 0; i < D; ++i) {
              double o = 0;
              for (int j = 0; j < visible; ++j) o += pe[static_cast<size_t>(j)] * valsE(j, i);
              oExact(r, i) = static_cast<float>(o);
            }
          }
        }
        if (vAll) {
          outBlock.noalias() = pMix * valsQ;
        } else {
          // P̂ split by where each value row is read from at query p.
          const std::vector<int>& since = a.vStored->since;
          for (int r = 0; r < b; ++r) {
            const int p = a.p0 + b0 + r;
            for (int j = 0; j < span; ++j) {
              const bool fromStored = j <= p && since[static_cast<size_t>(j)] <= p;
              pPart(r, j) = fromStored ? pMix(r, j) : 0.0f;
              pMix(r, j) -= pPart(r, j);
            }
          }
          oAlt.noalias() = pPart * valsQ;
          outBlock.noalias() = pMix * valsE;
          outBlock += oAlt;
        }
        if (a.figures != nullptr) {
          for (int r = 0; r < b; ++r) {
            double on = 0, dn = 0;
            for (int i = 0; i < D; ++i) {
              const double o = oExact(r, i), diff = static_cast<double>(outBlock(r, i)) - o;
              on += o * o;
              dn += diff * diff;
            }
            fig.outputRelErrorSum += on > 0 ? std::sqrt(dn / on) : 0.0;
          }
        }
      }
    }
  }
  if (a.figures != nullptr) {
    for (const AttentionFigures& f : perHead) {
      a.figures->klSum += f.klSum;
      a.figures->klMax = std::max(a.figures->klMax, f.klMax);
      a.figures->top1 += f.top1;
      a.figures->outputRelErrorSum += f.outputRelErrorSum;
      a.figures->count += f.count;
    }
  }
}

}  // namespace

ActivationRounding activationRounding(const Model& model, TensorRole role, int layer) {
  if (model.format() != ModelFormat::Gguf) return ActivationRounding::None;
  const std::string type = model.info(role, layer).type;
  if (type == "f16") return ActivationRounding::Fp16;
  if (type == "bf16") return ActivationRounding::Bf16;
  return ActivationRounding::None;
}

size_t LayerWeightsF32::bytes() const {
  size_t n = 0;
  for (const auto* v : {&attnNorm, &wqkv, &bqkv, &qNorm, &kNorm, &wo, &ffnNorm, &wGateUp, &wDown}) n += v->size();
  return n * sizeof(float);
}

bool StoredRows::everyVisibleRowStored() const {
  for (size_t j = 0; j < since.size(); ++j) {
    if (since[j] > static_cast<int>(j)) return false;
  }
  return true;
}

void rmsNormRows(const float* x, const float* weight, int rows, int n, double eps, float* out) {
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(rows) * n > 65536)
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<size_t>(r) * n;
    float* o = out + static_cast<size_t>(r) * n;
    // ggml_compute_forward_rms_norm_f32's arithmetic: float squares summed in double, the mean
    // rounded to float, float epsilon, then (x · scale) · w; the same bits as llama.cpp.
    double ss = 0;
    for (int i = 0; i < n; ++i) ss += static_cast<double>(xr[i] * xr[i]);
    const auto mean = static_cast<float>(ss / n);
    const float inv = 1.0f / std::sqrt(mean + static_cast<float>(eps));
    for (int i = 0; i < n; ++i) o[i] = (xr[i] * inv) * weight[i];
  }
}

void applyModelRope(float* rows, int count, int heads, int headDim, int firstPosition, const ModelRope& rope) {
  applyRopeRows(rows, count, heads, headDim, firstPosition, rope.style, rope.invFreq);
}

Status loadLayerWeights(const Model& model, int l, LayerWeightsF32& w) {
  const ModelHparams& hp = model.hparams();
  const int dim = hp.dim, qDim = hp.qDim(), kvDim = hp.kvDim(), ffn = hp.ffn, D = hp.headDim;
  w.attnNorm.resize(static_cast<size_t>(dim));
  KVS_RETURN_IF_ERROR(roleRows(model, TensorRole::AttnNorm, l, 1, dim, w.attnNorm.data()));
  w.wqkv.resize(static_cast<size_t>(qDim + 2 * kvDim) * dim);
  KVS_RETURN_IF_ERROR(roleRows(model, TensorRole::AttnQ, l, qDim, dim, w.wqkv.data()));
  KVS_RETURN_IF_ERROR(roleRows(model, TensorRole::AttnK, l, kvDim, dim, w.wqkv.data() + static_cast<size_t>(qDim) * dim));
  KVS_RETURN_IF_ERROR(
      roleRows(model, TensorRole::AttnV, l, kvDim, dim, w.wqkv.data() + static_cast<size_t>(qDim + kvDim) * dim));
  w.bqkv.clear();
  if (hp.qkvBias) {
    w.bqkv.assign(static_cast<size_t>(qDim + 2 * kvDim), 0.0f);
    // A family with optional biases may carry some of them only (a Llama with attention_bias has all three).
    if (model.has(TensorRole::AttnQBias, l))
      KVS_RETURN_IF_ERROR(roleRows(model, TensorRole::AttnQBias, l, 1, qDim, w.bqkv.data()));
    if (model.has(TensorRole::AttnKBias, l))
      KVS_RETURN_IF_ERROR(roleRows(model, TensorRole::AttnKBias, l, 1, kvDim, w.bqkv.data() + qDim));
    if (model.has(TensorRole::AttnVBias, l))
      KVS_RETURN_IF_ERROR(roleRows(model, TensorRole::AttnVBias, l, 1, kvDim, w.bqkv.data() + qDim + kvDim));
  }
  w.qNorm.clear();
  w.kNorm.clear();
  if (hp.qkNorm) {
    w.qNorm.resize(static_cast<size_t>(D));
    w.kNorm.resize(static_cast<size_t>(D));
    KVS_RETURN_IF_ERROR(roleRows(model, TensorRole::AttnQNorm, l, 1, D, w.qNorm.data()));
    KVS_RETURN_IF_ERROR(roleRows(model, TensorRole::AttnKNorm, l, 1, D, w.kNorm.data()));
  }
  w.wo.resize(static_cast<size_t>(dim) * qDim);
  KVS_RETURN_IF_ERROR(roleRows(model, TensorRole::AttnOutput, l, dim, qDim, w.wo.data()));
  w.ffnNorm.resize(static_cast<size_t>(dim));
  KVS_RETURN_IF_ERROR(roleRows(model, TensorRole::FfnNorm, l, 1, dim, w.ffnNorm.data()));
  w.wGateUp.resize(static_cast<size_t>(2 * ffn) * dim);
  KVS_RETURN_IF_ERROR(roleRows(model, TensorRole::FfnGate, l, ffn, dim, w.wGateUp.data()));
  KVS_RETURN_IF_ERROR(roleRows(model, TensorRole::FfnUp, l, ffn, dim, w.wGateUp.data() + static_cast<size_t>(ffn) * dim));
  w.wDown.resize(static_cast<size_t>(dim) * ffn);
  KVS_RETURN_IF_ERROR(roleRows(model, TensorRole::FfnDown, l, dim, ffn, w.wDown.data()));
  w.qkvRound[0] = activationRounding(model, TensorRole::AttnQ, l);
  w.qkvRound[1] = activationRounding(model, TensorRole::AttnK, l);
  w.qkvRound[2] = activationRounding(model, TensorRole::AttnV, l);
  w.woRound = activationRounding(model, TensorRole::AttnOutput, l);
  const ActivationRounding gate = activationRounding(model, TensorRole::FfnGate, l);
  if (gate != activationRounding(model, TensorRole::FfnUp, l))
    return Status::unsupported(model.path() + ": layer " + std::to_string(l) +
                               ": ffn_gate and ffn_up of different float types are not supported");
  w.gateUpRound = gate;
  w.downRound = activationRounding(model, TensorRole::FfnDown, l);
  // A weight that is not finite makes every later figure NaN: refuse it by name.
  for (const auto& [v, what] : {std::pair{&w.wqkv, "attn_q/k/v"}, std::pair{&w.wo, "attn_output"},
                                std::pair{&w.wGateUp, "ffn_gate/up"}, std::pair{&w.wDown, "ffn_down"},
                                std::pair{&w.attnNorm, "attn_norm"}, std::pair{&w.ffnNorm, "ffn_norm"},
                                std::pair{&w.bqkv, "attn_q/k/v bias"}}) {
    for (float x : *v) {
      if (!std::isfinite(x))
        return Status::invalidData(model.path() + ": layer " + std::to_string(l) + ": " + what +
                                   " holds a non-finite weight (NaN or infinity)");
    }
  }
  return Status::ok();
}

Forward::Forward(std::shared_ptr<const Model> model) : model_(std::move(model)) {
  cache_.resize(static_cast<size_t>(model_->hparams().layers));
}

Status Forward::layerWeights(int layer, const LayerWeightsF32*& out) {
  auto& kept = cache_[static_cast<size_t>(layer)];
  if (kept) {
    out = kept.get();
    return Status::ok();
  }
  size_t used = 0;
  for (const auto& c : cache_) used += c ? c->bytes() : 0;
  auto w = std::make_unique<LayerWeightsF32>();
  KVS_RETURN_IF_ERROR(loadLayerWeights(*model_, layer, *w));
  if (used + w->bytes() <= cacheBudget_) {
    kept = std::move(w);
    out = kept.get();
  } else {
    scratch_ = std::move(*w);
    out = &scratch_;
  }
  return Status::ok();
}

namespace {

/// A sequence of `positions` fits the model: its context, and a sliding window it would cross.
Status checkLength(const ModelHparams& hp, int positions) {
  if (positions > hp.contextLength)
    return Status::invalidArgument(std::to_string(positions) + " positions exceed the model's context length " +
                                   std::to_string(hp.contextLength));
  if (hp.slidingWindow > 0 && positions > hp.slidingWindow)
    return Status::unsupported(std::to_string(positions) + " positions exceed the model's sliding attention window " +
                               std::to_string(hp.slidingWindow) + " (kvscope runs full causal attention only)");
  return Status::ok();
}

/// Embedding rows of `tokens` into hidden [n, dim].
Status embed(const Model& m, std::span<const int> tokens, std::vector<float>& hidden) {
  const ModelHparams& hp = m.hparams();
  hidden.resize(tokens.size() * static_cast<size_t>(hp.dim));
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int t = tokens[i];
    if (t < 0 || t >= hp.vocab)
      return Status::invalidArgument("token " + std::to_string(t) + " at position " + std::to_string(i) +
                                     " is outside the vocabulary [0, " + std::to_string(hp.vocab) + ")");
    KVS_RETURN_IF_ERROR(m.rows(TensorRole::TokenEmbedding, 0, t, 1, hidden.data() + i * hp.dim));
  }
  return Status::ok();
}

/// The layer's attention input: q, pre-RoPE k, k and v of rows [0, n) of `hidden` at positions
/// first, first+1, …
void attentionInputs(const ModelHparams& hp, const LayerWeightsF32& w, const float* hidden, int n, int first,
                     std::vector<float>& normed, std::vector<float>& qkv, std::vector<float>& q,
                     std::vector<float>& kPre, std::vector<float>& k, std::vector<float>& v) {
  const int dim = hp.dim, qDim = hp.qDim(), kvDim = hp.kvDim(), D = hp.headDim, width = qDim + 2 * kvDim;
  normed.resize(static_cast<size_t>(n) * dim);
  rmsNormRows(hidden, w.attnNorm.data(), n, dim, hp.rmsEps, normed.data());
  qkv.resize(static_cast<size_t>(n) * width);
  const bool fused = w.qkvRound[0] == w.qkvRound[1] && w.qkvRound[1] == w.qkvRound[2];
  for (int r0 = 0; r0 < n; r0 += kRowBlock) {
    const int rows = std::min(kRowBlock, n - r0);
    const float* in = normed.data() + static_cast<size_t>(r0) * dim;
    float* out = qkv.data() + static_cast<size_t>(r0) * width;
    if (fused) {
      project(in, rows, dim, w.wqkv.data(), width, w.bqkv.empty() ? nullptr : w.bqkv.data(), out, w.qkvRound[0]);
      continue;
    }
    // Weights of different float types round the activations differently: one product each.
    std::vector<float> part;
    const int widths[3] = {qDim, kvDim, kvDim};
    int offset = 0;
    for (int i = 0; i < 3; ++i) {
      part.resize(static_cast<size_t>(rows) * widths[i]);
      project(in, rows, dim, w.wqkv.data() + static_cast<size_t>(offset) * dim, widths[i],
              w.bqkv.empty() ? nullptr : w.bqkv.data() + offset, part.data(), w.qkvRound[i]);
      for (int r = 0; r < rows; ++r)
        std::memcpy(out + static_cast<size_t>(r) * width + offset, part.data() + static_cast<size_t>(r) * widths[i],
                    sizeof(float) * static_cast<size_t>(widths[i]));
      offset += widths[i];
    }
  }
  q.resize(static_cast<size_t>(n) * qDim);
  kPre.resize(static_cast<size_t>(n) * kvDim);
  v.resize(static_cast<size_t>(n) * kvDim);
  for (int r = 0; r < n; ++r) {
    const float* row = qkv.data() + static_cast<size_t>(r) * width;
    std::memcpy(q.data() + static_cast<size_t>(r) * qDim, row, sizeof(float) * static_cast<size_t>(qDim));
    std::memcpy(kPre.data() + static_cast<size_t>(r) * kvDim, row + qDim, sizeof(float) * static_cast<size_t>(kvDim));
    std::memcpy(v.data() + static_cast<size_t>(r) * kvDim, row + qDim + kvDim, sizeof(float) * static_cast<size_t>(kvDim));
  }
  if (hp.qkNorm) {
    // Per-head RMSNorm of q and k (qwen3), before RoPE, with the model's epsilon.
    std::vector<float> tmp(static_cast<size_t>(D));
    for (int r = 0; r < n * hp.heads; ++r) {
      float* head = q.data() + static_cast<size_t>(r) * D;
      rmsNormRows(head, w.qNorm.data(), 1, D, hp.rmsEps, tmp.data());
      std::memcpy(head, tmp.data(), sizeof(float) * static_cast<size_t>(D));
    }
    for (int r = 0; r < n * hp.kvHeads; ++r) {
      float* head = kPre.data() + static_cast<size_t>(r) * D;
      rmsNormRows(head, w.kNorm.data(), 1, D, hp.rmsEps, tmp.data());
      std::memcpy(head, tmp.data(), sizeof(float) * static_cast<size_t>(D));
    }
  }
  k = kPre;
  applyModelRope(q.data(), n, hp.heads, D, first, hp.rope);
  applyModelRope(k.data(), n, hp.kvHeads, D, first, hp.rope);
}

/// x += attn·Woᵀ, then the SwiGLU feed-forward with its residual, on rows [0, n) of hidden.
void finishLayer(const ModelHparams& hp, const LayerWeightsF32& w, float* hidden, int n, const float* attn,
                 std::vector<float>& normed, std::vector<float>& gateUp, std::vector<float>& act,
                 std::vector<float>& proj) {
  const int dim = hp.dim, qDim = hp.qDim(), ffn = hp.ffn;
  proj.resize(static_cast<size_t>(std::min(n, kRowBlock)) * dim);
  for (int r0 = 0; r0 < n; r0 += kRowBlock) {
    const int rows = std::min(kRowBlock, n - r0);
    project(attn + static_cast<size_t>(r0) * qDim, rows, qDim, w.wo.data(), dim, nullptr, proj.data(), w.woRound);
    MatrixMap(hidden + static_cast<size_t>(r0) * dim, rows, dim) += MatrixMap(proj.data(), rows, dim);
  }
  normed.resize(static_cast<size_t>(n) * dim);
  rmsNormRows(hidden, w.ffnNorm.data(), n, dim, hp.rmsEps, normed.data());
  for (int r0 = 0; r0 < n; r0 += kRowBlock) {
    const int rows = std::min(kRowBlock, n - r0);
    gateUp.resize(static_cast<size_t>(rows) * 2 * ffn);
    project(normed.data() + static_cast<size_t>(r0) * dim, rows, dim, w.wGateUp.data(), 2 * ffn, nullptr,
            gateUp.data(), w.gateUpRound);
    act.resize(static_cast<size_t>(rows) * ffn);
#pragma omp parallel for schedule(static) if (static_cast<int64_t>(rows) * ffn > 65536)
    for (int r = 0; r < rows; ++r) {
      const float* g = gateUp.data() + static_cast<size_t>(r) * 2 * ffn;
      float* a = act.data() + static_cast<size_t>(r) * ffn;
      for (int i = 0; i < ffn; ++i) a[i] = silu(g[i]) * g[ffn + i];
    }
    project(act.data(), rows, ffn, w.wDown.data(), dim, nullptr, proj.data(), w.downRound);
    MatrixMap(hidden + static_cast<size_t>(r0) * dim, rows, dim) += MatrixMap(proj.data(), rows, dim);
  }
}

}  // namespace

Status Forward::run(Stream& stream, std::span<const int> tokens,
                    const std::function<Status(const LayerTensors&)>& observe, const Progress& progress) {
  const ModelHparams& hp = model_->hparams();
  const int n = static_cast<int>(tokens.size()), L = hp.layers, kvDim = hp.kvDim(), qDim = hp.qDim();
  if (n == 0) return Status::ok();
  if (stream.keys.size() != static_cast<size_t>(L)) {
    stream.keys.assign(static_cast<size_t>(L), {});
    stream.values.assign(static_cast<size_t>(L), {});
  }
  const int first = static_cast<int>(stream.keys[0].size() / static_cast<size_t>(kvDim));
  KVS_RETURN_IF_ERROR(checkLength(hp, first + n));
  KVS_RETURN_IF_ERROR(embed(*model_, tokens, stream.hidden));
  std::vector<float> normed, qkv, q, kPre, k, v, attn, gateUp, act, proj;
  for (int l = 0; l < L; ++l) {
    const LayerWeightsF32* w = nullptr;
    KVS_RETURN_IF_ERROR(layerWeights(l, w));
    attentionInputs(hp, *w, stream.hidden.data(), n, first, normed, qkv, q, kPre, k, v);
    std::vector<float>& keys = stream.keys[static_cast<size_t>(l)];
    std::vector<float>& values = stream.values[static_cast<size_t>(l)];
    keys.insert(keys.end(), k.begin(), k.end());
    values.insert(values.end(), v.begin(), v.end());
    if (observe) {
      KVS_RETURN_IF_ERROR(observe(LayerTensors{l, first, n, q.data(), kPre.data(), k.data(), v.data()}));
    }
    attn.assign(static_cast<size_t>(n) * qDim, 0.0f);
    attention(exactAttention(hp, n, first, q.data(), keys.data(), values.data(), attn.data()));
    finishLayer(hp, *w, stream.hidden.data(), n, attn.data(), normed, gateUp, act, proj);
    if (!report(progress, static_cast<double>(l + 1) / L, "layer " + std::to_string(l + 1) + " of " + std::to_string(L)))
      return Status::cancelled();
  }
  return Status::ok();
}

Status Forward::runLockstep(std::span<Stream*> streams, std::span<const CacheStore* const> stores,
                            std::span<const int> tokens, std::vector<std::vector<AttentionFigures>>& figures,
                            const std::function<Status(size_t stream, const LayerTensors&)>& observe,
                            const std::function<Status(int layer)>& afterLayer, const Progress& progress) {
  const ModelHparams& hp = model_->hparams();
  const int n = static_cast<int>(tokens.size()), L = hp.layers, qDim = hp.qDim();
  if (stores.size() != streams.size()) return Status::internal("runLockstep: one store per stream");
  KVS_RETURN_IF_ERROR(checkLength(hp, n));
  figures.assign(streams.size(), std::vector<AttentionFigures>(static_cast<size_t>(L)));
  std::vector<float> first;
  KVS_RETURN_IF_ERROR(embed(*model_, tokens, first));
  for (Stream* s : streams) {
    s->hidden = first;
    s->keys.assign(static_cast<size_t>(L), {});
    s->values.assign(static_cast<size_t>(L), {});
  }
  std::vector<float> normed, qkv, q, qStored, kPre, k, v, attn, gateUp, act, proj;
  StoredRows storedKey, storedValue;
  for (int l = 0; l < L; ++l) {
    const LayerWeightsF32* w = nullptr;
    KVS_RETURN_IF_ERROR(layerWeights(l, w));
    for (size_t i = 0; i < streams.size(); ++i) {
      Stream& s = *streams[i];
      const CacheStore* store = stores[i];
      attentionInputs(hp, *w, s.hidden.data(), n, 0, normed, qkv, q, kPre, k, v);
      if (observe) KVS_RETURN_IF_ERROR(observe(i, LayerTensors{l, 0, n, q.data(), kPre.data(), k.data(), v.data()}));
      attn.assign(static_cast<size_t>(n) * qDim, 0.0f);
      AttentionArgs args = exactAttention(hp, n, 0, q.data(), k.data(), v.data(), attn.data());
      if (store != nullptr) {
        KVS_RETURN_IF_ERROR(store->store(l, n, k.data(), kPre.data(), v.data(), storedKey, storedValue));
        if (store->transformQuery) {
          qStored = q;
          KVS_RETURN_IF_ERROR(store->transformQuery(l, n, qStored.data()));
          args.qStored = qStored.data();
        }
        args.kStored = &storedKey;
        args.vStored = &storedValue;
        args.figures = &figures[i][static_cast<size_t>(l)];
      }
      attention(args);
      finishLayer(hp, *w, s.hidden.data(), n, attn.data(), normed, gateUp, act, proj);
    }
    if (afterLayer) KVS_RETURN_IF_ERROR(afterLayer(l));
    if (!report(progress, static_cast<double>(l + 1) / L, "layer " + std::to_string(l + 1) + " of " + std::to_string(L)))
      return Status::cancelled();
  }
  return Status::ok();
}

Status Forward::finalNorm(const Stream& stream, std::vector<float>& out) const {
  const ModelHparams& hp = model_->hparams();
  std::vector<float> weight(static_cast<size_t>(hp.dim));
  KVS_RETURN_IF_ERROR(roleRows(*model_, TensorRole::OutputNorm, 0, 1, hp.dim, weight.data()));
  const int n = static_cast<int>(stream.hidden.size() / static_cast<size_t>(hp.dim));
  out.resize(stream.hidden.size());
  rmsNormRows(stream.hidden.data(), weight.data(), n, hp.dim, hp.rmsEps, out.data());
  return Status::ok();
}

Status Forward::logitsBlock(const float* normed, int rows, int firstVocab, int count, std::vector<float>& weights,
                            float* out) const {
  const ModelHparams& hp = model_->hparams();
  weights.resize(static_cast<size_t>(count) * hp.dim);
  const TensorRole role = hp.tiedEmbeddings ? TensorRole::TokenEmbedding : TensorRole::Output;
  KVS_RETURN_IF_ERROR(model_->rows(role, 0, firstVocab, count, weights.data()));
  project(normed, rows, hp.dim, weights.data(), count, nullptr, out, activationRounding(*model_, role));
  return Status::ok();
}

Status Forward::logitsWith(const float* normed, int rows, int count, const std::vector<float>& weights,
                           float* out) const {
  const ModelHparams& hp = model_->hparams();
  if (weights.size() != static_cast<size_t>(count) * hp.dim) return Status::internal("logitsWith: weights of another block");
  const TensorRole role = hp.tiedEmbeddings ? TensorRole::TokenEmbedding : TensorRole::Output;
  project(normed, rows, hp.dim, weights.data(), count, nullptr, out, activationRounding(*model_, role));
  return Status::ok();
}

}  // namespace kvscope
