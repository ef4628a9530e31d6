// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/model/logits.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace kvscope {

Status lastLogits(const Forward& forward, const Stream& stream, std::vector<float>& out) {
  const ModelHparams& hp = forward.model().hparams();
  std::vector<float> normed;
  KVS_RETURN_IF_ERROR(forward.finalNorm(stream, normed));
  const float* last = normed.data() + normed.size() - static_cast<size_t>(hp.dim);
  out.resize(static_cast<size_t>(hp.vocab));
  std::vector<float> weights;
  for (int v0 = 0; v0 < hp.vocab; v0 += kVocabBlock) {
    const int count = std::min(kVocabBlock, hp.vocab - v0);
    KVS_RETURN_IF_ERROR(forward.logitsBlock(last, 1, v0, count, weights, out.data() + v0));
  }
  return Status::ok();
}

Status allLogits(const Forward& forward, const Stream& stream, std::vector<float>& out,
                 const std::function<bool(double)>& progress) {
  const ModelHparams& hp = forward.model().hparams();
  std::vector<float> normed;
  KVS_RETURN_IF_ERROR(forward.finalNorm(stream, normed));
  const int n = static_cast<int>(normed.size() / static_cast<size_t>(hp.dim));
  out.resize(static_cast<size_t>(n) * hp.vocab);
  std::vector<float> weights, block;
  for (int v0 = 0; v0 < hp.vocab; v0 += kVocabBlock) {
    const int count = std::min(kVocabBlock, hp.vocab - v0);
    block.resize(static_cast<size_t>(n) * count);
    KVS_RETURN_IF_ERROR(forward.logitsBlock(normed.data(), n, v0, count, weights, block.data()));
    for (int r = 0; r < n; ++r)
      std::memcpy(out.data() + static_cast<size_t>(r) * hp.vocab + v0, block.data() + static_cast<size_t>(r) * count,
                  sizeof(float) * static_cast<size_t>(count));
    if (progress && !progress(static_cast<double>(v0 + count) / hp.vocab)) return Status::cancelled();
  }
  return Status::ok();
}

NextTokenComparison::NextTokenComparison(std::vector<int> next, int quantized)
    : next_(std::move(next)),
      fp_(next_.size()),
      quant_(static_cast<size_t>(quantized), std::vector<Running>(next_.size())),
      cross_(static_cast<size_t>(quantized), std::vector<double>(next_.size(), 0.0)) {}

namespace {

struct BlockMax {
  double max;
  int arg;
};

BlockMax blockMax(const float* row, int count, int first) {
  BlockMax b{-std::numeric_limits<double>::infinity(), -1};
  for (int j = 0; j < count; ++j) {
    if (row[j] > b.max) {  // strict: the lowest index wins a tie, as argmax does
      b.max = row[j];
      b.arg = first + j;
    }
  }
  return b;
}

}  // namespace

void NextTokenComparison::addBlock(int first, int count, const float* fp, const std::vector<const float*>& quant) {
  const int n = static_cast<int>(next_.size());
#pragma omp parallel for schedule(static)
  for (int p = 0; p < n; ++p) {
    const float* f = fp + static_cast<size_t>(p) * count;
    Running& rf = fp_[static_cast<size_t>(p)];
    const BlockMax bf = blockMax(f, count, first);
    const double oldMaxFp = rf.max;
    if (bf.max > rf.max) {
      rf.sum *= std::exp(rf.max - bf.max);
      rf.max = bf.max;
      rf.argmax = bf.arg;
    }
    // The cross sums of every run are relative to the same fp maximum: rescale them with it.
    const double crossScale = std::isinf(oldMaxFp) ? 0.0 : std::exp(oldMaxFp - rf.max);
    const int next = next_[static_cast<size_t>(p)];
    for (size_t i = 0; i < quant.size(); ++i) cross_[i][static_cast<size_t>(p)] *= crossScale;
    for (int j = 0; j < count; ++j) rf.sum += std::exp(static_cast<double>(f[j]) - rf.max);
    if (next >= first && next < first + count) rf.nextLogit = f[next - first];
    for (size_t i = 0; i < quant.size(); ++i) {
      const float* q = quant[i] + static_cast<size_t>(p) * count;
      Running& rq = quant_[i][static_cast<size_t>(p)];
      const BlockMax bq = blockMax(q, count, first);
      if (bq.max > rq.max) {
        rq.sum *= std::exp(rq.max - bq.max);
        rq.max = bq.max;
        rq.argmax = bq.arg;
      }
      double cross = 0;
      for (int j = 0; j < count; ++j) {
        rq.sum += std::exp(static_cast<double>(q[j]) - rq.max);
        cross += std::exp(static_cast<double>(f[j]) - rf.max) * (static_cast<double>(f[j]) - q[j]);
      }
      cross_[i][static_cast<size_t>(p)] += cross;
      if (next >= first && next < first + count) rq.nextLogit = q[next - first];
    }
  }
}

std::vector<NextTokenFigures> NextTokenComparison::figures(int i) const {
  std::vector<NextTokenFigures> out(next_.size());
  for (size_t p = 0; p < next_.size(); ++p) {
    const Running& rf = fp_[p];
    const Running& rq = quant_[static_cast<size_t>(i)][p];
    const double lseFp = rf.max + std::log(rf.sum), lseQ = rq.max + std::log(rq.sum);
    NextTokenFigures& f = out[p];
    // KL = Σ p_fp (ℓ_fp − ℓ_q) − lse_fp + lse_q, with Σ p_fp (ℓ_fp − ℓ_q) = cross / sum_fp.
    f.kl = std::max(0.0, cross_[static_cast<size_t>(i)][p] / rf.sum - lseFp + lseQ);
    f.top1Agrees = rf.argmax == rq.argmax;
    if (next_[p] >= 0) {
      f.nllFp = lseFp - rf.nextLogit;
      f.nllQuant = lseQ - rq.nextLogit;
      f.pFp = std::exp(-f.nllFp);
      f.pQuant = std::exp(-f.nllQuant);
    }
  }
  return out;
}

Status compareNextTokens(const Forward& forward, const Stream& reference, const std::vector<const Stream*>& quantized,
                         const std::vector<int>& tokens, std::vector<std::vector<NextTokenFigures>>& out,
                         const std::function<bool(double)>& progress) {
  const ModelHparams& hp = forward.model().hparams();
  const int n = static_cast<int>(tokens.size());
  std::vector<int> next(static_cast<size_t>(n), -1);
  for (int p = 0; p + 1 < n; ++p) next[static_cast<size_t>(p)] = tokens[static_cast<size_t>(p + 1)];
  NextTokenComparison cmp(next, static_cast<int>(quantized.size()));
  std::vector<float> fpNormed;
  KVS_RETURN_IF_ERROR(forward.finalNorm(reference, fpNormed));
  std::vector<std::vector<float>> qNormed(quantized.size());
  for (size_t i = 0; i < quantized.size(); ++i) KVS_RETURN_IF_ERROR(forward.finalNorm(*quantized[i], qNormed[i]));
  std::vector<float> weights, fpBlock;
  std::vector<std::vector<float>> qBlocks(quantized.size());
  for (int v0 = 0; v0 < hp.vocab; v0 += kVocabBlock) {
    const int count = std::min(kVocabBlock, hp.vocab - v0);
    fpBlock.resize(static_cast<size_t>(n) * count);
    KVS_RETURN_IF_ERROR(forward.logitsBlock(fpNormed.data(), n, v0, count, weights, fpBlock.data()));
    std::vector<const float*> qPtr;
    for (size_t i = 0; i < quantized.size(); ++i) {
      // The same classifier rows: multiply without reading them again.
      qBlocks[i].resize(static_cast<size_t>(n) * count);
      KVS_RETURN_IF_ERROR(forward.logitsWith(qNormed[i].data(), n, count, weights, qBlocks[i].data()));
      qPtr.push_back(qBlocks[i].data());
    }
    cmp.addBlock(v0, count, fpBlock.data(), qPtr);
    if (progress && !progress(static_cast<double>(v0 + count) / hp.vocab)) return Status::cancelled();
  }
  out.clear();
  for (size_t i = 0; i < quantized.size(); ++i) out.push_back(cmp.figures(static_cast<int>(i)));
  return Status::ok();
}

}  // namespace kvscope
