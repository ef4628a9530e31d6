// SPDX-License-Identifier: GPL-3.0-or-later
// The interactive path of the GUI as core code: what the visible views of one (layer, kv head)
// need after a spec change, and its benchmark.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/attention/detail.h"
#include "core/bench/measure.h"
#include "core/quant/formats.h"
#include "core/util/status.h"
#include "core/util/tensor.h"

namespace kvscope::bench {

/// The shape of the interactive path: one layer of a long dump, one (layer, head) on screen.
struct InteractiveShape {
  int heads = 32;      ///< H
  int kvHeads = 8;     ///< KVH
  int tokens = 32768;  ///< T
  int queries = 64;    ///< Tq
  int dim = 128;       ///< D
  int columns = 1200;  ///< heat map width in token bins (pixels)
  int bins = 128;      ///< histogram bins (the GUI's default)
};

/// Heat map data of one head: |x̂ − x| binned along tokens with a per-bin max (the GUI's
/// HeatmapValue::Error), channels × columns row-major, and where each maximum lies.
struct HeatmapCells {
  int channels = 0;
  int columns = 0;
  std::vector<float> cells;
  std::vector<int> cellToken;
};

/// Histogram of one head's original and reconstructed values on shared bins, with the shape
/// statistics the GUI's histogram shows (ui/compute/histogram_data, scope "whole head").
struct HistogramCounts {
  double lo = 0, hi = 0;
  std::vector<double> original;
  std::vector<double> reconstructed;
  double kurtosis = 0;
  double maxOverMedian = 0;
};

/// Time of one named step of a computation.
struct Step {
  std::string name;
  double seconds = 0;     ///< wall clock
  double cpuSeconds = 0;  ///< process CPU time, all threads
};

/// Everything the visible views of one (layer, kv head) need after a spec change, with K the
/// tensor on screen: K̂ and V̂, K's error heat map and histogram, the scale group under the
/// cursor, and the attention detail of one query row.
struct ViewData {
  Tensor3 keyHat;    ///< reconstruction of K (one head or the whole layer)
  Tensor3 valueHat;
  HeatmapCells heatmap;
  HistogramCounts histogram;
  GroupDetail group;
  AttentionRowDetail detail;
  /// Each step in order: "quantize K", "quantize V", ("inverse RoPE" for the whole layer),
  /// "heat map", "histogram", "group", "attention row".
  std::vector<Step> steps;
};

/// Recomputes the views of kv head `head` after a spec change, mirroring the GUI (MainWindow::
/// recomputeLayer, HeatmapCanvas::rebuild, HistogramView::refresh, the drift view's row) without
/// Qt. `wholeLayer` false quantizes only that head; true quantizes every kv head first, as
/// ui/model quantizeLayer does (plus the inverse RoPE of K̂ it computes when the dump has
/// pre-RoPE keys, `withPreRope`). The detail row is the last query of the head's first query head.
Expected<ViewData> computeViewData(const Tensor3& key, const Tensor3& value, const Tensor3& query,
                                   int64_t head, std::string_view keySpec,
                                   std::string_view valueSpec, bool wholeLayer, bool withPreRope,
                                   const InteractiveShape& shape);

/// The interactive path timed both ways (one head, whole layer), and the drift view's series.
struct InteractiveFigures {
  InteractiveShape shape;
  std::string keySpec, valueSpec;
  Sample oneHead;     ///< spec change → views ready, quantizing only the visible head
  Sample wholeLayer;  ///< the same when the whole layer is quantized first (the GUI today)
  Sample driftSeries; ///< attentionPositionSeries over the layer (the drift view's lines)
  std::vector<Step> oneHeadSteps;    ///< ViewData::steps of one run
  std::vector<Step> wholeLayerSteps;
};

/// Times computeViewData on synthetic data of `shape`.
Expected<InteractiveFigures> benchInteractive(const InteractiveShape& shape,
                                              std::string_view keySpec, std::string_view valueSpec,
                                              const Budget& budget);

}  // namespace kvscope::bench
