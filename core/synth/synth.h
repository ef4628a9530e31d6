// SPDX-License-Identifier: GPL-3.0-or-later
// Synthetic KV dumps shaped like a real decoder-only LLM's: persistent outlier key channels,
// RoPE on keys (pre-RoPE keys stored too), an attention-sink token 0, a massive-activation
// token, values with mild per-token outliers, and queries that attend to recent tokens and the
// sink. Deterministic by seed on every platform (own PRNG, no std distributions).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/io/dump.h"
#include "core/io/dump_writer.h"
#include "core/util/status.h"
#include "core/util/tensor.h"

namespace kvscope {

/// Shape and character of a synthetic dump.
struct SynthOptions {
  int layers = 4;     ///< L
  int kvHeads = 2;    ///< KVH
  int heads = 8;      ///< H, a multiple of KVH
  int tokens = 256;   ///< T
  int queries = 32;   ///< Tq (queries of the last Tq positions); 0 = no query datasets
  int headDim = 64;   ///< D, even and at least 8
  int sequences = 1;  ///< B; a batch axis is written when B > 1
  uint64_t seed = 1;  ///< same seed, same dump (bit for bit)
  DiskType dtype = DiskType::Float16;
  std::string profile = "llama";  ///< one of synthProfiles()
  std::string model = "synthetic-llama";
  double ropeTheta = 10000.0;
  RopeStyle ropeStyle = RopeStyle::Half;
};

/// The names accepted in SynthOptions::profile.
std::vector<std::string> synthProfiles();

/// Checks SynthOptions (positive sizes, H multiple of KVH, Tq ≤ T, D even ≥ 8, known profile).
Status validateSynthOptions(const SynthOptions& options);

/// One layer of one sequence, as float32 before any on-disk rounding of key/value/query
/// (key_pre_rope is already rounded to the dump's dtype, and key = RoPE(key_pre_rope)).
struct SynthLayer {
  Tensor3 key;         ///< [KVH, T, D], after RoPE
  Tensor3 keyPreRope;  ///< [KVH, T, D]
  Tensor3 value;       ///< [KVH, T, D]
  Tensor3 query;       ///< [H, Tq, D] (empty when queries == 0), after RoPE
};

/// Generates layer `layer` of sequence `sequence` (options must be valid).
SynthLayer synthLayer(const SynthOptions& options, int layer, int sequence = 0);

/// Writes a synthetic dump to `path` (atomically), layer by layer with bounded memory.
Status writeSynthDump(const std::string& path, const SynthOptions& options,
                      const Progress& progress = {});

/// The persistent outlier key channels of (layer, kvHead), ascending; includes the bias channel
/// of the "bias-outlier" profile where it applies. Their max |key| is ≥ 10× the median channel's.
std::vector<int> synthOutlierChannels(const SynthOptions& options, int layer, int kvHead);

/// The "bias-outlier" profile's constant-bias key channel in `layer`, or -1 (other
/// layers/profiles).
int synthBiasChannel(const SynthOptions& options, int layer);

/// The channels of `layer` holding a large constant key bias, ascending (the same in every kv
/// head): bias-outlier's channel, or qwen2-bias's channels in its first and last layer.
std::vector<int> synthBiasChannels(const SynthOptions& options, int layer);

/// qwen2-bias: ‖b_k‖ of `layer`'s k_proj bias over its KVH·D entries (605 in layer 0, 921 in
/// the last, 22 in the others); 0 for other profiles.
double synthKeyBiasNorm(const SynthOptions& options, int layer);

/// massive-sinks: how many first tokens carry 100–1000× key and value norms; 0 otherwise.
int synthMassiveSinkCount(const SynthOptions& options);

/// low-entropy: the query heads of `layer` that put nearly all attention on one token (the
/// previous one), ascending; empty for other profiles.
std::vector<int> synthOneHotHeads(const SynthOptions& options, int layer);

/// The attention-sink token (always 0).
inline constexpr int kSynthSinkToken = 0;

/// The token with massive activations (large value entries), or -1 when T < 3.
int synthMassiveToken(const SynthOptions& options);

/// The built-in sample the GUI opens by default (4 layers, 2 kv heads, 8 heads, 256 tokens,
/// 32 queries, head dim 64, fp16).
SynthOptions sampleOptions();

/// Writes the sample dump into `folder` once (created if needed) and returns its path.
Expected<std::string> ensureSampleDump(const std::string& folder);

}  // namespace kvscope
