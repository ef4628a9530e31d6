// SPDX-License-Identifier: GPL-3.0-or-later
// The interactive path of the GUI as core code: what the visible views of one (layer, kv head)
// need after a spec change, and its benchmark.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/bench/measure.h"
#include "core/inspect/view_data.h"
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

/// Time of one named step of a computation.
using Step = ViewStep;

/// What the GUI's visible views ask for after a spec change, at this shape: K's error heat map
/// (`columns` wide), K's histogram over the whole head (`bins`), the scale group under the cursor
/// (token T/2, channel 3) and the attention row of the last query of the head's first query
/// head. `wholeLayer` quantizes every kv head first (what the GUI does for specs whose groups
/// span heads); `withPreRope` adds K̂ with RoPE undone.
ViewRequest interactiveRequest(const InteractiveShape& shape, int64_t head, bool wholeLayer,
                               bool withPreRope);

/// Recomputes the views of kv head `head` after a spec change with the GUI's own code
/// (kvscope::computeViewData), reusing `workspace` and `out` as the GUI's worker does. With
/// `withPreRope` the synthetic K stands in for the pre-RoPE keys.
Status recomputeViews(const Tensor3& key, const Tensor3& value, const Tensor3& query, int64_t head,
                      std::string_view keySpec, std::string_view valueSpec, bool wholeLayer,
                      bool withPreRope, const InteractiveShape& shape, ViewWorkspace& workspace,
                      ViewData& out);

/// The interactive path timed both ways (one head, whole layer), and the drift view's series.
struct InteractiveFigures {
  InteractiveShape shape;
  std::string keySpec, valueSpec;
  Sample oneHead;     ///< spec change → views ready, quantizing only the visible head (the GUI)
  Sample wholeLayer;  ///< the same when the whole layer is quantized first (the GUI's path for
                      ///< specs whose groups span heads: axis=tensor, nvfp4)
  Sample driftSeries; ///< attentionPositionSeries of the visible kv head (the drift view's line)
  std::vector<Step> oneHeadSteps;    ///< ViewData::steps of one run
  std::vector<Step> wholeLayerSteps;
};

/// Times computeViewData on synthetic data of `shape`.
Expected<InteractiveFigures> benchInteractive(const InteractiveShape& shape,
                                              std::string_view keySpec, std::string_view valueSpec,
                                              const Budget& budget);

}  // namespace kvscope::bench
