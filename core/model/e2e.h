// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli e2e`: replay a recorded token sequence through the model twice, with an exact KV
// cache and with a quantized one, and measure what the quantization does to the next-token
// distribution (docs/real-models.md).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/model/checkpoint.h"
#include "core/model/record.h"
#include "core/quant/plan.h"
#include "core/engine/presets.h"
#include "core/quant/spec.h"
#include "core/util/status.h"

namespace kvscope {

/// One replayed position p (the distribution of token p+1).
struct E2ePosition {
  int position = 0;
  int token = 0;            ///< the token fed at p
  double kl = 0;            ///< KL(P_fp ‖ P_quant) of the next-token distributions, nats
  bool top1Agrees = true;   ///< argmax P_fp == argmax P_quant
  std::optional<double> nllFp;     ///< −ln P_fp(token p+1); empty at the last position
  std::optional<double> nllQuant;  ///< −ln P_quant(token p+1)
};

/// What one layer's attention saw during the quantized replay, over all positions and heads:
/// the stored (quantized) cache against the same replay's exact K/V, with the same query.
struct E2eLayer {
  int layer = 0;
  double attentionKlMean = 0;   ///< mean over (position, head) of KL(P_exact ‖ P_stored)
  double attentionKlMax = 0;
  double attentionTop1 = 1;     ///< fraction of (position, head) whose most-attended token agrees
  double outputRelError = 0;    ///< mean ‖ô − o‖₂ / ‖o‖₂ of the attention output
  double hiddenRelError = 0;    ///< mean ‖h_quant − h_fp‖₂ / ‖h_fp‖₂ of the residual stream after the layer
  std::string keySpec;          ///< canonical spec this layer's K was stored under
  std::string valueSpec;        ///< the same for V
};

/// Averages over positions.
struct E2eSummary {
  double klMean = 0;
  double klMax = 0;
  double top1Agreement = 1;
  double nllFp = 0;      ///< mean over positions 0 … T−2
  double nllQuant = 0;
  double pplRatio = 1;   ///< exp(nllQuant − nllFp)
};

/// Storage and streaming of one tensor kind.
struct E2eTensorInfo {
  Plan spec;                   ///< a spec or a plan (§12)
  std::string specText;        ///< canonical spec (or plan) string
  double bitsPerElement = 16;  ///< §5 accounting for the dump's length, over all layers for a plan
  std::string mode;            ///< streamingModeName ("per-layer" when a plan's layers differ)
  std::string storage;         ///< streamingDescription: how the replay stored it (per layer for a plan)
  std::vector<QuantSpec> layerSpecs;  ///< each layer's spec
};

/// Everything one e2e run produced.
struct E2eResult {
  std::string model;
  int tokens = 0;
  E2eTensorInfo key;
  E2eTensorInfo value;
  std::string preset;                 ///< empty when specs were given directly
  std::string engine;                 ///< the engine string the specs came from; empty otherwise
  E2eSummary summary;
  std::vector<E2ePosition> positions;
  std::vector<E2eLayer> layers;
  std::optional<double> dumpLogitsMaxAbsDiff;  ///< the fp replay against the dump's /logits
  std::vector<std::string> warnings;
  std::vector<std::string> notes;     ///< how the replay differs from the offline accounting
};

/// The exact replay, computed once and shared by every spec of a sweep.
struct E2eBaseline {
  std::vector<float> logits;   ///< [T, vocab]
  std::vector<float> hidden;   ///< [T, L, dim] residual stream after each layer
  std::optional<double> dumpLogitsMaxAbsDiff;
  std::vector<std::string> warnings;
};

/// Checks that `recording` fits `model` (shapes, token ids, length) and replays it exactly.
Expected<E2eBaseline> e2eBaseline(const std::shared_ptr<const Checkpoint>& model, const Recording& recording,
                                  const Progress& progress = {});

/// Replays `recording`'s tokens with the cache stored under `key`/`value` (specs or plans: each
/// layer under its own spec) and compares with `baseline`.
Expected<E2eResult> runE2e(const std::shared_ptr<const Checkpoint>& model, const Recording& recording,
                           const E2eBaseline& baseline, const Plan& key, const Plan& value,
                           const Progress& progress = {});

/// The result as JSON: {"summary": {…}, "key", "value", "positions": […], "layers": […], …}.
std::string e2eToJson(const E2eResult& result);

/// Parses a sweep: "K1:V1;K2:V2" (a preset name may stand for a pair) or, when `text` names a
/// file, its lines in the same form (# comments). Each entry gives (label, key, value). Its ';'
/// and ':' are those of plans, so written entries are specs (a preset's may resolve to a plan);
/// --key/--value take plans.
struct SweepEntry {
  std::string label;
  Plan key;
  Plan value;
};
/// Presets resolve for `shape` (the recording's head dim, layers and kv heads).
Expected<std::vector<SweepEntry>> parseSweep(const std::string& text, const KvShape& shape);

}  // namespace kvscope
