// SPDX-License-Identifier: GPL-3.0-or-later
// The classifier, a block of vocabulary rows at a time: a 151,936-token vocabulary's logits for
// every position are T × 600 KB, so e2e never holds them whole; it keeps, per position, what
// llama-perplexity's KL statistics need (log-sum-exp, argmax, the next token's logit, and
// Σ p·(ℓ − ℓ′)) as running sums over the blocks.
#pragma once

#include <functional>
#include <limits>
#include <vector>

#include "core/model/forward.h"

namespace kvscope {

/// Vocabulary rows per block of the classifier.
inline constexpr int kVocabBlock = 4096;

/// The full-vocabulary logits of the stream's last position.
Status lastLogits(const Forward& forward, const Stream& stream, std::vector<float>& out);
/// Every position's logits [n, vocab] (record --logits); `progress(fraction)` false cancels.
Status allLogits(const Forward& forward, const Stream& stream, std::vector<float>& out,
                 const std::function<bool(double)>& progress = {});

/// The next-token distribution of one position under the reference (fp) and a quantized run.
struct NextTokenFigures {
  double kl = 0;           ///< KL(P_fp ‖ P_quant) in nats
  bool top1Agrees = true;  ///< argmax agree (lowest index on ties)
  double nllFp = 0;        ///< −ln P_fp(next token); meaningless without one
  double nllQuant = 0;
  double pFp = 0;          ///< P_fp(next token)
  double pQuant = 0;
};

/// Running per-position statistics of the reference and several quantized runs over vocabulary
/// blocks, all in double.
class NextTokenComparison {
 public:
  /// `next[p]`: the token after position p (−1 for the last).
  NextTokenComparison(std::vector<int> next, int quantized);
  /// Adds vocabulary rows [first, first + count): `fp` [positions, count] and `quant[i]` likewise.
  void addBlock(int first, int count, const float* fp, const std::vector<const float*>& quant);
  /// The figures of quantized run `i` at every position.
  [[nodiscard]] std::vector<NextTokenFigures> figures(int i) const;

 private:
  struct Running {
    double max = -std::numeric_limits<double>::infinity();
    double sum = 0;   ///< Σ exp(ℓ − max)
    int argmax = -1;
    double nextLogit = 0;
  };
  std::vector<int> next_;
  std::vector<Running> fp_;                 ///< [positions]
  std::vector<std::vector<Running>> quant_; ///< [run][positions]
  std::vector<std::vector<double>> cross_;  ///< [run][positions] Σ exp(ℓ_fp − max_fp)·(ℓ_fp − ℓ_q)
};

/// Runs the classifier over the final-normed hidden states of the reference stream and each
/// quantized stream, a block of vocabulary rows at a time, and returns each run's figures.
Status compareNextTokens(const Forward& forward, const Stream& reference, const std::vector<const Stream*>& quantized,
                         const std::vector<int>& tokens, std::vector<std::vector<NextTokenFigures>>& out,
                         const std::function<bool(double)>& progress = {});

}  // namespace kvscope
