// SPDX-License-Identifier: GPL-3.0-or-later
// The evaluation driver: quantize a dump's K and V layer by layer, measure tensor (§7) and
// attention (§6) damage, and gather it in an EvalReport that the CLI, the GUI and the search
// all use. Serializers live in core/report/report_format.h.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/attention/attention.h"
#include "core/io/dump.h"
#include "core/metrics/tensor_metrics.h"
#include "core/quant/plan.h"
#include "core/quant/quantize.h"
#include "core/quant/spec.h"
#include "core/util/status.h"
#include "core/util/tensor.h"

namespace kvscope {

/// What to do with NaN/Inf in a layer's tensors.
enum class NonFinitePolicy {
  Refuse,     ///< fail, naming the counts and the first location (default)
  SkipHeads,  ///< evaluate the other heads; skipped ones are listed in the report
};
/// "refuse", "skip-heads".
const char* nonFinitePolicyName(NonFinitePolicy policy);
/// Parses "refuse" / "skip-heads"; errors say what is allowed.
Expected<NonFinitePolicy> parseNonFinitePolicy(std::string_view text);

/// Parses `--queries`: "all" gives 0, "last:N" gives N ≥ 1; errors say what is allowed.
Expected<int> parseQueryCount(std::string_view text);

/// Options of one evaluation.
struct LayerResult;

struct EvalOptions {
  Plan key;                      ///< keys' spec per layer (a plain spec is a one-part plan)
  Plan value;                    ///< values' spec per layer
  std::string preset;            ///< preset name the specs came from (recorded only; may be empty)
  std::string engine;            ///< engine string the specs came from (recorded only; may be empty)
  std::vector<int> layers;       ///< layers to evaluate, ascending; empty = all
  int sequence = 0;              ///< batch index B
  int lastQueries = 0;           ///< 0 = all queries, N = the last N (AttentionInput::lastQueries)
  NonFinitePolicy nonFinite = NonFinitePolicy::Refuse;
  /// Evaluates `layers` in the order given instead of ascending (the GUI's summary puts the
  /// selected layer first); the report's layers follow that order.
  bool keepLayerOrder = false;
  /// Called with each layer's result as soon as it is done, before the next layer is read (the
  /// GUI's summary streams its rows through it). Runs on the evaluating thread.
  std::function<void(const LayerResult&)> onLayer;
};

/// Result for one (layer, kv head).
struct HeadResult {
  int kvHead = 0;
  bool skipped = false;       ///< non-finite input under NonFinitePolicy::SkipHeads
  std::string skipReason;     ///< why it was skipped ("key: 3 NaN, first at token 5, channel 2")
  TensorMetrics key;          ///< §7 of K̂ against `key`
  TensorMetrics value;        ///< §7 of V̂ against `value`
  std::optional<AttentionCases> attention;  ///< §6; empty without queries or attention engine
};

/// Results of one layer, one entry per kv head (index = kv head).
struct LayerResult {
  int layer = 0;
  std::vector<HeadResult> heads;
  QuantSpec keySpec;    ///< the spec this layer's K was quantized with (its plan's, §12)
  QuantSpec valueSpec;  ///< the spec this layer's V was quantized with
};

/// Means over all evaluated (layer, kv head) entries; *_max fields (max_abs_error, score_max,
/// kl_max) take the max. sqnr_db averages the entries where it is finite (empty if none is).
struct EvalSummary {
  int entries = 0;  ///< evaluated (layer, kv head) pairs, skipped ones excluded
  TensorMetrics key;
  TensorMetrics value;
  std::optional<AttentionCases> attention;  ///< empty when no entry has attention metrics
};

/// Everything one evaluation produced.
struct EvalReport {
  DumpInfo dump;                 ///< the dump's metadata
  int sequence = 0;
  Plan key;
  Plan value;
  std::string preset;            ///< empty when the specs were given directly
  std::string engine;            ///< the engine string the specs came from; empty otherwise
  StorageCount keyStorage;       ///< planStorage of K: one layer tensor for a uniform plan, else all L
  StorageCount valueStorage;     ///< the same for V
  double bytesPerTokenBaseline = 0;   ///< fp16 K+V bytes per token over all L layers
  double bytesPerTokenQuantized = 0;  ///< quantized K+V bytes per token over all L layers
  int lastQueries = 0;           ///< as requested (0 = all)
  NonFinitePolicy nonFinite = NonFinitePolicy::Refuse;
  std::vector<LayerResult> layers;    ///< evaluated layers, ascending
  EvalSummary summary;
  std::vector<std::string> notes;     ///< warnings and why attention is missing, for people

  [[nodiscard]] double keyBitsPerElement() const { return keyStorage.bitsPerElement(); }
  [[nodiscard]] double valueBitsPerElement() const { return valueStorage.bitsPerElement(); }
};

/// One layer's tensors as read from a dump (query and keyPreRope optional).
struct LayerData {
  Tensor3 key;
  Tensor3 value;
  std::optional<Tensor3> query;
  std::optional<Tensor3> keyPreRope;
};

/// Everything about one evaluated layer, reconstructions included (for the GUI's views).
struct LayerEvaluation {
  LayerResult result;
  Tensor3 keyHat;                 ///< reconstructed K (compare with `key`)
  Tensor3 valueHat;               ///< reconstructed V
  StorageCount keyStorage;
  StorageCount valueStorage;
  std::vector<std::string> notes; ///< e.g. why attention metrics are missing
};

/// Dump-level parameters evaluateLayer needs.
struct LayerContext {
  int layer = 0;
  RopeParams rope;
  double softmaxScale = 0;  ///< 0 = 1/sqrt(D)
  std::string origin;       ///< prefix for error messages, e.g. "model.h5: layer 3"
  int layers = 0;           ///< the dump's layer count, to resolve plans (0: uniform plans only)
};

/// The K and V specs of layer `context.layer` under options' plans; errors when a non-uniform
/// plan meets an unknown layer count (context.layers = 0) or a layer outside it.
Expected<std::pair<QuantSpec, QuantSpec>> layerSpecs(const EvalOptions& options, const LayerContext& context);

/// Evaluates one layer already in memory with that layer's specs. Non-finite values follow options.nonFinite. When the
/// attention engine answers Status::unsupported, attention stays empty and a note says why.
Expected<LayerEvaluation> evaluateLayer(LayerData data, const LayerContext& context,
                                        const EvalOptions& options, const Progress& progress = {});

/// The same into `ev`, reusing its reconstructions' buffers (for loops over layers or specs).
Status evaluateLayerInto(LayerData data, const LayerContext& context, const EvalOptions& options,
                         LayerEvaluation& ev, const Progress& progress = {});

/// Checks options against a dump (layers, sequence, queries, plans via validatePlan).
Status validateEvalOptions(const DumpInfo& info, const EvalOptions& options);

/// Evaluates a dump layer by layer (reads K, V, Q and pre-RoPE K of one layer, quantizes,
/// measures, drops them: peak memory is about one layer). Cancels when `progress` says so.
Expected<EvalReport> evaluate(const Dump& dump, const EvalOptions& options, const Progress& progress = {});

/// The summary of §8 over `layers` (skipped heads excluded).
EvalSummary summarize(const std::vector<LayerResult>& layers);

}  // namespace kvscope
