// SPDX-License-Identifier: GPL-3.0-or-later
// What the GUI's views of one (layer, kv head) show after a spec change: the reconstruction of
// that head, the heat map cells, the histogram with its statistics, the scale group under the
// cursor and one attention row. Plain core code, so the GUI's layer lane and the interactive
// benchmark (core/bench/interactive.h) run the same functions. Buffers are reused across calls.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/attention/detail.h"
#include "core/io/dump.h"
#include "core/quant/formats.h"
#include "core/quant/quantize.h"
#include "core/quant/spec.h"
#include "core/util/status.h"
#include "core/util/tensor.h"

namespace kvscope {

/// What a heat map cell shows.
enum class HeatmapValue {
  Magnitude,   ///< |x|
  Normalized,  ///< |x| / σ of its channel (over all tokens of the head)
  Error,       ///< |x̂ − x|
};

/// Channel × token magnitudes of one kv head, binned along tokens with a per-bin MAX so that a
/// lone outlier token stays visible however many tokens share a pixel column.
struct HeatmapData {
  int channels = 0;
  int tokens = 0;
  int columns = 0;               ///< number of token bins (≤ tokens)
  std::vector<float> cells;      ///< channels × columns, row-major by channel
  std::vector<int> cellToken;    ///< the token where each cell's maximum lies
  std::vector<float> channelMax; ///< per channel, the max over all tokens
  float maxValue = 0;            ///< the largest cell
  float minPositive = 0;         ///< the smallest cell > 0 (log colour scales start here)

  /// First token of bin `column`; bin b covers [binStart(b), binStart(b + 1)).
  [[nodiscard]] int binStart(int column) const {
    return columns > 0 ? static_cast<int>(int64_t{column} * tokens / columns) : 0;
  }
  /// Cell (channel, column).
  [[nodiscard]] float cell(int channel, int column) const {
    return cells[static_cast<size_t>(channel) * static_cast<size_t>(columns) + static_cast<size_t>(column)];
  }
};

/// Bins head `head` of `x` into at most `maxColumns` token columns, into `out` (its buffers
/// are reused). HeatmapValue::Error compares with head `hatHead` of `xHat` (same tokens and
/// dim); without it `out` is left empty. Ties keep the first token of the bin.
void computeHeatmapInto(const Tensor3& x, int64_t head, const Tensor3* xHat, int64_t hatHead,
                        HeatmapValue value, int maxColumns, HeatmapData& out);

/// computeHeatmapInto into a new HeatmapData, `xHat`'s head `head` compared for
/// HeatmapValue::Error (same shape as `x`; without it the result is empty).
HeatmapData computeHeatmap(const Tensor3& x, const Tensor3* xHat, int64_t head, HeatmapValue value, int maxColumns);

/// Which values of the selected kv head a histogram counts.
enum class HistogramScope { Head, Channel, Token };

/// Histogram of a slice of one head, original and reconstruction on shared bins.
struct HistogramData {
  std::vector<double> edges;          ///< bins + 1 ascending edges
  std::vector<double> original;       ///< count per bin
  std::vector<double> reconstructed;  ///< count per bin (empty without a reconstruction)
  int64_t count = 0;                  ///< values counted
  double min = 0, max = 0;            ///< range of the original values
  double kurtosis = 0;                ///< Pearson kurtosis m4/m2² of the original (3 for a normal)
  double maxOverMedian = 0;           ///< max |x| / median |x| of the original (0 when the median is 0)
};

/// Scratch memory of the histogram, kept between calls so that no call allocates per value.
struct HistogramWorkspace {
  std::vector<float> original;       ///< a strided slice (one channel) gathered
  std::vector<float> reconstructed;
  std::vector<int64_t> counts;       ///< per-thread bin and radix counts
  std::vector<int64_t> radix;        ///< radix counts of |x| summed over threads
};

/// Counts head `head` of `x` (and head `hatHead` of `xHat`, same tokens and dim) restricted to
/// `scope`: `index` is the channel (Channel) or the token (Token). Bins span both tensors'
/// values; a bin is floor((v − lo) / (hi − lo) · bins), clamped. The median |x| is exact (the
/// mean of the two middle values for an even count), found by radix selection, not by sorting.
void computeHistogramInto(const Tensor3& x, int64_t head, const Tensor3* xHat, int64_t hatHead,
                          HistogramScope scope, int64_t index, int bins, HistogramWorkspace& workspace,
                          HistogramData& out);

/// computeHistogramInto into a new HistogramData, with `xHat` (same shape as `x`, else ignored)
/// counted on the same head.
HistogramData computeHistogram(const Tensor3& x, const Tensor3* xHat, int64_t head, HistogramScope scope,
                               int64_t index, int bins);

/// Counts the values of head `head` of `x` in `scope` (`index` as for computeHistogramInto) that
/// lie in [lo, hi], on `bins` uniform bins: bin floor((v − lo) / (hi − lo) · bins), v = hi in the
/// last one; values outside [lo, hi] (and NaN) are not counted. `out` gets `bins` counts; it is
/// empty when the slice does not exist, bins < 1 or hi ≤ lo.
void countInRange(const Tensor3& x, int64_t head, HistogramScope scope, int64_t index, double lo, double hi,
                  int bins, std::vector<double>& out);

/// The histogram of a zoomed x range: `bins` bins over [lo, hi] with the counts of head `head` of
/// `x` and (when given) head `hatHead` of `xHat` in that range (countInRange). `count` is the
/// originals counted; min, max, kurtosis and maxOverMedian stay 0 (they describe the whole slice).
void rebinHistogramInto(const Tensor3& x, int64_t head, const Tensor3* xHat, int64_t hatHead, HistogramScope scope,
                        int64_t index, double lo, double hi, int bins, HistogramData& out);

/// How much taller than the median non-empty bin the tallest may be before a histogram reads
/// better with log counts (prefersLogCounts).
inline constexpr double kHeavyTailRatio = 50.0;

/// The heavy-tail rule for a count axis: true when the original's tallest bin holds more than
/// kHeavyTailRatio times the median count of its non-empty bins (the mean of the two middle ones
/// for an even number), i.e. a linear axis would show one spike and flat tails.
[[nodiscard]] bool prefersLogCounts(const HistogramData& histogram);

/// Expected counts per bin of `edges` for `count` values distributed as a coordinate of a random
/// unit vector in `dim` dimensions, f(t) ∝ (1 − t²)^((D−3)/2) on [−1, 1] (the density tq/tqp's
/// codebook assumes); empty when dim is below codebook::kMinSphereDim or edges has fewer than 2.
[[nodiscard]] std::vector<double> sphereDensityCounts(int64_t dim, int64_t count, const std::vector<double>& edges);

/// Median of |v[i]| over i < n (mean of the two middle ones when n is even), exact; 0 for n = 0.
/// Values must not be NaN. `counts` is scratch (resized as needed).
double medianAbs(const float* v, int64_t n, std::vector<int64_t>& counts);

/// True when quantizing one kv head alone under `spec` gives exactly that head's slice of the
/// whole layer's reconstruction (quantization.md §1-3). False for axis=tensor (one scale for all
/// heads, unless fp8's `unitscale` fixes it at 1), for nvfp4 (its global scale spans the layer)
/// and for block formats whose blocks cross heads (D not a multiple of the block size).
bool quantizesPerHead(const QuantSpec& spec, int64_t headDim);

/// Copies heads [first, first + count) of `x` into `out`, reusing its buffer.
void copyHeads(const Tensor3& x, int64_t first, int64_t count, Tensor3& out);

/// The drift view's "along query positions" series for one kv head: `oneHead` holds that head's
/// K, V, K̂, V̂ (one head each) and its group's queries; the result is grouped by kv head with
/// `kvHeads` lines, line `kvHead` filled and the others empty (what the view reads for the
/// selected row's kv head). Progress and cancel as attentionPositionSeries.
Expected<AttentionPositionSeries> kvHeadPositionSeries(const AttentionInput& oneHead, int64_t kvHead,
                                                       int64_t kvHeads, const Progress& progress = {});

/// The tensor step 5 sees for heads [first, first + count) of `source` under `spec`: quantized
/// tokens [S, T−R) only, rotated when D is a power of two, outliers of each head zeroed. Reuses
/// `out`; `firstToken` receives S. Pass the pre-RoPE keys as `source` for a prerope spec. Errors:
/// a non-finite value in the heads (then `out` is incomplete), as the pipeline's step 2 refuses it.
[[nodiscard]] Status formatInputInto(const Tensor3& source, int64_t first, int64_t count, const QuantSpec& spec,
                                     Tensor3& out, int64_t* firstToken);

/// The histogram's slice of one kv head in the space step 5 works in (after the rotation of step
/// 3 and the outliers of step 4), for a rotated spec: its input and its output, with the levels
/// of the selected group. tq/tqp are shown normalized, per token u = v/‖v‖ and û = v̂/meta(‖v‖),
/// so that every vector shares one grid, the codebook's centroids, and the density it assumes.
struct FormatSpaceData {
  bool normalized = false;      ///< tq/tqp: each token divided by its norm (see above)
  int64_t firstToken = 0;       ///< S: token 0 of `input` is the layer's token S
  Tensor3 input;                ///< the head's format input (quantized tokens), normalized for tq/tqp
  Tensor3 output;               ///< step 5's output of `input`, same shape and scaling
  HistogramData histogram;      ///< of the scope's slice of input (original) and output (reconstructed)
  std::vector<double> density;  ///< tq/tqp: expected count per bin under f(t) ∝ (1 − t²)^((D−3)/2)
  std::optional<GroupDetail> group;  ///< the selected group in this space (tq/tqp: levels = centroids)
  std::string note;             ///< why the histogram or the group is missing (a kept token)
};

/// Fills `out` for head `head` of `formatInput` (formatInputInto's output for `spec`, whose token
/// 0 is the layer's token `firstToken`): step 5 applied to a copy, the histogram of `scope` at
/// `index` (a layer token for HistogramScope::Token, a rotated channel for Channel) with `bins`
/// bins, and the group of (layer token `groupToken`, `groupChannel`). Errors name what is wrong.
Status computeFormatSpaceInto(const Tensor3& formatInput, int64_t head, int64_t firstToken, const QuantSpec& spec,
                              HistogramScope scope, int64_t index, int bins, int64_t groupToken,
                              int64_t groupChannel, HistogramWorkspace& workspace, FormatSpaceData& out);

/// The originals of one layer, as the views see them (pointers stay owned by the caller).
struct LayerViewInput {
  const Tensor3* key = nullptr;
  const Tensor3* value = nullptr;
  const Tensor3* query = nullptr;       ///< may be null (no attention row then)
  const Tensor3* keyPreRope = nullptr;  ///< may be null
  RopeParams rope;
  double softmaxScale = 0;              ///< 0 = 1/sqrt(D)
};

/// What the visible views ask for. A part is skipped when its size is 0 or its flag is off.
struct ViewRequest {
  int64_t kvHead = 0;
  bool wholeLayer = false;    ///< quantize every kv head even where one head would do
  bool keyPreRopeHat = false; ///< also K̂ with RoPE undone (when the layer has pre-RoPE keys)
  TensorKind heatmapTensor = TensorKind::Key;  ///< Key, KeyPreRope or Value
  HeatmapValue heatmapValue = HeatmapValue::Magnitude;
  int heatmapColumns = 0;     ///< 0 = no heat map
  TensorKind histogramTensor = TensorKind::Key;
  HistogramScope histogramScope = HistogramScope::Head;
  int64_t histogramIndex = 0;
  int histogramBins = 0;      ///< 0 = no histogram
  bool formatSpace = false;   ///< also the histogram in the format's input space (rotated specs)
  bool group = false;         ///< describe the scale group of the histogram's tensor at:
  int64_t groupToken = 0;     ///< a token of the layer (must be a quantized one)
  int64_t groupChannel = 0;
  int queryHead = -1;         ///< attention row of this query head (-1 = none) …
  int queryIndex = 0;         ///< … and this query row
};

/// Time of one named step of computeViewData.
struct ViewStep {
  std::string name;
  double seconds = 0;     ///< wall clock
  double cpuSeconds = 0;  ///< process CPU time, all threads
};

/// The views' data of one (layer, kv head) under one (K spec, V spec).
struct ViewData {
  ViewRequest request;
  bool wholeLayer = false;  ///< keyHat/valueHat hold every kv head; else only request.kvHead
  Tensor3 keyHat;           ///< reconstruction of K (one head, or the whole layer)
  Tensor3 valueHat;
  std::optional<Tensor3> keyPreRopeHat;  ///< keyHat with RoPE undone, when asked and available
  StorageCount keyStorage;   ///< of the whole layer tensor
  StorageCount valueStorage;
  HeatmapData heatmap;
  HistogramData histogram;
  std::optional<GroupDetail> group;
  std::string groupError;    ///< why describeGroup failed, when it did
  std::optional<FormatSpaceData> formatSpace;  ///< when asked and the histogram's spec rotates
  std::optional<AttentionRowDetail> row;  ///< layer indices in queryHead and kvHead
  std::vector<ViewStep> steps;

  /// Index in keyHat/valueHat of layer kv head `head`; -1 when that head was not quantized.
  [[nodiscard]] int64_t hatHead(int64_t head) const {
    if (wholeLayer) return head >= 0 && head < keyHat.heads ? head : -1;
    return head == request.kvHead ? 0 : -1;
  }
};

/// Reused memory of computeViewData: the visible head's original slices (rebuilt only when the
/// layer or head changes), the format input and the histogram's scratch.
struct ViewWorkspace {
  /// Identifies the layer the slices came from; the caller keeps it alive while it is cached,
  /// so its address cannot be reused by another layer.
  std::shared_ptr<const void> sliceOwner;
  int64_t slicedHead = -1;
  Tensor3 key, value, keyPreRope, query;  ///< head slices (query: the head's query group)
  Tensor3 formatInput;
  HistogramWorkspace histogram;
};

/// Computes everything `request` asks for into `out`, reusing `out`'s and `workspace`'s buffers.
/// Quantizes only the requested kv head when quantizesPerHead holds for both specs, else the
/// whole layer. `owner` identifies `layer` for the workspace's slice cache (see ViewWorkspace).
/// Cancels between steps when `progress` returns false.
Status computeViewData(const LayerViewInput& layer, std::shared_ptr<const void> owner,
                       const QuantSpec& keySpec, const QuantSpec& valueSpec, const ViewRequest& request,
                       ViewWorkspace& workspace, ViewData& out, const Progress& progress = {});

}  // namespace kvscope
