// SPDX-License-Identifier: GPL-3.0-or-later
// The outlier profile of a dump's K, pre-RoPE K and V: outlier channels and how persistent they
// are, sink / massive-activation tokens, kurtosis, and how many of a format's codes the data
// actually uses (docs/attention.md, "Outlier profile").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/io/dump.h"
#include "core/quant/plan.h"
#include "core/quant/spec.h"
#include "core/util/status.h"
#include "core/util/tensor.h"

namespace kvscope {

/// Options of a profile.
struct OutlierOptions {
  double threshold = 6.0;      ///< a channel is an outlier when max|x| / median > threshold
  int topTokens = 5;           ///< tokens listed by norm ratio (plus every one above threshold)
  std::optional<Plan> spec;    ///< code utilisation under this spec or plan (K and V; prerope: K only)
  std::vector<int> layers;     ///< empty = all
  int sequence = 0;
};

/// One channel of one kv head.
struct ChannelStat {
  int channel = 0;
  double maxAbs = 0;       ///< max over tokens of |x|
  double ratio = 0;        ///< maxAbs / median over channels of maxAbs
  double persistence = 0;  ///< fraction of tokens where the channel is among the token's top 1%
};

/// One token of one kv head.
struct TokenStat {
  int64_t token = 0;
  double norm = 0;    ///< ‖x_t‖₂ over the head's D channels
  double ratio = 0;   ///< norm / median token norm
  std::string text;   ///< the dump's token text, empty when it has none
};

/// The profile of one tensor of one kv head.
struct TensorOutliers {
  std::vector<ChannelStat> channels;        ///< all D channels, by channel index
  std::vector<ChannelStat> outlierChannels; ///< ratio > threshold, largest ratio first
  std::vector<double> tokenNormRatio;       ///< [T] norm / median token norm
  std::vector<TokenStat> topTokens;         ///< largest norm ratios first (topTokens + above threshold)
  double kurtosis = 0;                      ///< Pearson m4 / m2² over all T·D values (normal: 3)
  std::optional<double> codeUtilisation;    ///< mean over the head's groups (see codeUtilisation)
};

/// Per-channel and per-token statistics of kv head `head` of `x` (no code utilisation).
TensorOutliers profileHead(const Tensor3& x, int64_t head, const OutlierOptions& options,
                           const std::vector<std::string>& tokenText = {});

/// Number of channels counted as a token's "top 1%": ceil(0.01 · D), at least 1.
int64_t topChannelCount(int64_t headDim);

/// Code utilisation of `spec` on a layer tensor: for each scale group (or block) of the quantized
/// tokens, after rotation and with outliers set aside, the number of distinct codes the central
/// 99% of its values (by value: floor(0.5%·n) dropped at each end) map to, divided by the
/// format's 2^bits codes. Returns the mean per kv head (a group belongs to the head of its first
/// element; an axis=tensor group counts for every head) and, last, the mean over all groups.
/// `preRope` is needed for prerope specs. Elementwise formats (fp16, bf16, none) are an error.
Expected<std::vector<double>> codeUtilisation(const Tensor3& x, const QuantSpec& spec,
                                              const Tensor3* preRope = nullptr);

/// The profile of one kv head: K, pre-RoPE K (when the dump has it) and V.
struct HeadOutliers {
  int kvHead = 0;
  TensorOutliers key;
  std::optional<TensorOutliers> keyPreRope;
  TensorOutliers value;
};

/// The profile of one layer.
struct LayerOutliers {
  int layer = 0;
  std::vector<HeadOutliers> heads;
  std::optional<double> keyUtilisation;    ///< mean over all the layer tensor's groups
  std::optional<double> valueUtilisation;
};

/// A dump's profile.
struct OutlierProfile {
  DumpInfo dump;
  double threshold = 6.0;
  std::string spec;                 ///< canonical spec (or plan) of the utilisation, empty when none
  std::vector<LayerOutliers> layers;
  std::vector<std::string> notes;
};

/// Profiles a dump layer by layer (peak memory about one layer). Cancels via `progress`.
Expected<OutlierProfile> outlierProfile(const Dump& dump, const OutlierOptions& options,
                                        const Progress& progress = {});

}  // namespace kvscope
