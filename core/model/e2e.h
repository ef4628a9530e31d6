// SPDX-License-Identifier: GPL-3.0-or-later
// `kvscope-cli e2e`: replay a dump's token sequence through the model with an exact KV cache and,
// side by side, with each quantized one, and measure what the quantization does to the next-token
// distribution, with the figures `llama-perplexity --kl-divergence` reports (docs/real-models.md).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/engine/presets.h"
#include "core/io/dump.h"
#include "core/model/model.h"
#include "core/quant/plan.h"
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
  std::optional<double> deltaP;    ///< P_quant(token p+1) − P_fp(token p+1) (llama-perplexity's Δp)
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

/// Statistics over the scored positions (those with a next token, from `scoreFrom`), defined as
/// llama-perplexity's KL-divergence mode defines them.
struct E2eSummary {
  int scored = 0;          ///< positions scored
  int scoreFrom = 0;       ///< the first scored position
  double klMean = 0;
  double klMedian = 0;     ///< the middle value, or the mean of the two middle ones
  double klP90 = 0, klP95 = 0, klP99 = 0;  ///< linear interpolation between sorted values
  double klMax = 0;
  double top1Agreement = 1;  ///< "Same top p"
  double meanDeltaP = 0;     ///< mean of P_quant(next) − P_fp(next)
  double rmsDeltaP = 0;      ///< sqrt(mean Δp²)
  double nllFp = 0;          ///< mean −ln P(next token)
  double nllQuant = 0;
  double pplFp = 1;          ///< exp(nllFp)
  double pplQuant = 1;
  double pplRatio = 1;       ///< exp(nllQuant − nllFp)
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

/// One setting to replay: K and V plans, and what an engine's attention does to Q.
struct E2eSetting {
  std::string label;          ///< the sweep entry, preset or engine string as typed
  Plan key;
  Plan value;
  std::string querySpec;      ///< spec the engine converts Q with before the scores; empty = exact
  std::string preset;         ///< the preset it came from, or empty
  std::string engine;         ///< the engine string it came from, or empty
  std::vector<std::string> notes;  ///< the resolution's notes
};

/// Everything one e2e run of one setting produced.
struct E2eResult {
  std::string model;
  std::string modelFormat;
  std::string architecture;
  int tokens = 0;
  std::string label;
  E2eTensorInfo key;
  E2eTensorInfo value;
  std::string querySpec;
  std::string preset;                 ///< empty when specs were given directly
  std::string engine;                 ///< the engine string the specs came from; empty otherwise
  E2eSummary summary;
  std::vector<E2ePosition> positions;
  std::vector<E2eLayer> layers;
  std::optional<double> dumpLogitsMaxAbsDiff;  ///< the exact replay against the dump's /logits
  std::optional<double> dumpKvMaxAbsDiff;      ///< the exact replay's K and V against the dump's
  std::vector<std::string> warnings;
  std::vector<std::string> notes;     ///< how the replay differs from the offline accounting
};

struct E2eOptions {
  int scoreFrom = 0;  ///< first scored position (llama-perplexity scores the second half of each chunk: T/2)
};

/// Replays the dump's tokens through `model` once exactly and once per setting (side by side, each
/// layer dequantized once) and compares. The dump must come from this model (shapes and token ids
/// are checked; its K/V and /logits are compared with the exact replay and a difference is a
/// warning). Calibrated specs read the dump's tensors.
Expected<std::vector<E2eResult>> runE2e(const std::shared_ptr<const Model>& model, const Dump& dump,
                                        const std::vector<E2eSetting>& settings, const E2eOptions& options = {},
                                        const Progress& progress = {});

/// The result as JSON: {"summary": {…}, "key", "value", "positions": […], "layers": […], …}.
std::string e2eToJson(const E2eResult& result);

/// Parses a sweep: "K1:V1;K2:V2" (a preset name may stand for a pair) or, when `text` names a
/// file, its lines in the same form (# comments). Each entry gives (label, key, value). Its ';'
/// and ':' are those of plans, so written entries are specs (a preset's may resolve to a plan);
/// --key/--value take plans. Presets resolve for `shape` (the dump's head dim, layers and kv heads).
Expected<std::vector<E2eSetting>> parseSweep(const std::string& text, const KvShape& shape);

}  // namespace kvscope
