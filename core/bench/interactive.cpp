// SPDX-License-Identifier: GPL-3.0-or-later
#include "core/bench/interactive.h"

#include <memory>
#include <string>

#include "core/attention/attention.h"
#include "core/quant/spec.h"

namespace kvscope::bench {

ViewRequest interactiveRequest(const InteractiveShape& shape, int64_t head, bool wholeLayer,
                               bool withPreRope) {
  ViewRequest r;
  r.kvHead = head;
  r.wholeLayer = wholeLayer;
  r.keyPreRopeHat = withPreRope;
  // K's |x̂ − x| heat map: the mode that changes with the spec (the default |x| mode is cheaper).
  r.heatmapTensor = TensorKind::Key;
  r.heatmapValue = HeatmapValue::Error;
  r.heatmapColumns = shape.columns;
  r.histogramTensor = TensorKind::Key;
  r.histogramScope = HistogramScope::Head;
  r.histogramBins = shape.bins;
  r.group = true;
  r.groupToken = shape.tokens / 2;
  r.groupChannel = 3;
  const int group = shape.kvHeads > 0 ? shape.heads / shape.kvHeads : 1;
  r.queryHead = static_cast<int>(head) * group;
  r.queryIndex = shape.queries - 1;
  return r;
}

Status recomputeViews(const Tensor3& key, const Tensor3& value, const Tensor3& query, int64_t head,
                      std::string_view keySpec, std::string_view valueSpec, bool wholeLayer,
                      bool withPreRope, const InteractiveShape& shape, ViewWorkspace& workspace,
                      ViewData& out) {
  auto ks = parseSpec(keySpec);
  if (!ks) return ks.status().withContext("K");
  auto vs = parseSpec(valueSpec);
  if (!vs) return vs.status().withContext("V");
  LayerViewInput layer;
  layer.key = &key;
  layer.value = &value;
  layer.query = &query;
  layer.keyPreRope = withPreRope ? &key : nullptr;
  // The tensors live as long as the caller's loop: their address identifies them.
  const std::shared_ptr<const void> owner(&key, [](const void*) {});
  return computeViewData(layer, owner, *ks, *vs, interactiveRequest(shape, head, wholeLayer, withPreRope),
                         workspace, out);
}

Expected<InteractiveFigures> benchInteractive(const InteractiveShape& shape,
                                              std::string_view keySpec, std::string_view valueSpec,
                                              const Budget& budget) {
  const Tensor3 key = syntheticTensor(shape.kvHeads, shape.tokens, shape.dim, 21);
  const Tensor3 value = syntheticTensor(shape.kvHeads, shape.tokens, shape.dim, 22);
  const Tensor3 query = syntheticTensor(shape.heads, shape.queries, shape.dim, 23);
  InteractiveFigures figures;
  figures.shape = shape;
  figures.keySpec = std::string(keySpec);
  figures.valueSpec = std::string(valueSpec);
  const int64_t head = shape.kvHeads / 2;
  for (const bool whole : {false, true}) {
    // One workspace and output per path, reused across runs as the GUI's worker reuses them.
    ViewWorkspace workspace;
    ViewData views;
    auto time = timeRepeated(
        [&]() -> Status {
          return recomputeViews(key, value, query, head, keySpec, valueSpec, whole, /*withPreRope=*/false,
                                shape, workspace, views);
        },
        budget);
    if (!time) return time.status();
    (whole ? figures.wholeLayer : figures.oneHead) = *time;
    KVS_RETURN_IF_ERROR(recomputeViews(key, value, query, head, keySpec, valueSpec, whole, false, shape,
                                       workspace, views));
    (whole ? figures.wholeLayerSteps : figures.oneHeadSteps) = views.steps;

    if (!whole) {
      // The drift view's line: the series of the visible kv head, on its own worker in the GUI.
      AttentionInput attention;
      attention.query = &workspace.query;
      attention.key = &workspace.key;
      attention.value = &workspace.value;
      attention.keyHat = &views.keyHat;
      attention.valueHat = &views.valueHat;
      Budget once = budget;
      once.minRuns = 1;
      once.minSeconds = 0;
      once.maxRuns = 1;
      auto drift = timeRepeated(
          [&]() -> Status {
            auto series = attentionPositionSeries(attention, SeriesGrouping::KvHead);
            return series ? Status::ok() : series.status();
          },
          once);
      if (!drift) return drift.status().withContext("attentionPositionSeries");
      figures.driftSeries = *drift;
    }
  }
  return figures;
}

}  // namespace kvscope::bench
