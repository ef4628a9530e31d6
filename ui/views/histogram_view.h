// SPDX-License-Identifier: GPL-3.0-or-later
// Histogram of the selected tensor slice, original and reconstruction overlaid, with the
// quantization levels of the selected group drawn over it (core's describeGroup). Zooming the x
// axis counts the values again on as many bins over the visible range (core's rebinHistogramInto).
#pragma once

#include <QWidget>

#include <memory>
#include <optional>
#include <utility>

#include "core/quant/formats.h"
#include "core/inspect/view_data.h"
#include "ui/views/view.h"
#include "core/inspect/layer_data.h"

class QChart;
class QValueAxis;
class QLogValueAxis;
class QChartView;
class QComboBox;
class QLabel;
class QLineSeries;
class QSpinBox;

namespace kvscope::ui {

class InteractiveChartView;
class JobRunner;

class HistogramView : public QWidget, public View {
  Q_OBJECT

 public:
  explicit HistogramView(QWidget* parent = nullptr);

  /// Shows kv head `kvHead` of `layer`; `channel` and `token` pick the group whose levels are drawn.
  /// Uses the histogram and group the layer worker computed when they match the view's settings.
  void setLayer(LayerQuantPtr layer, int kvHead, int channel, int token);
  /// Asks the layer worker for what this view shows (tensor, scope, bins, the group under the
  /// selection) so that a spec change finds the data ready. `tokens` is the dump's T.
  void fillRequest(ViewRequest& request, const QuantSpec& keySpec, const QuantSpec& valueSpec,
                   int64_t tokens) const;
  /// The tensor whose histogram is shown.
  [[nodiscard]] ViewTensor tensor() const;
  /// A's counts per bin (empty when nothing is pinned or A does not apply to what is shown).
  [[nodiscard]] const std::vector<double>& comparisonCounts() const { return compareCounts_; }
  QLineSeries* comparisonSeries() { return flushed(reconstructedA_); }

  [[nodiscard]] const HistogramData& data() const { return data_; }
  [[nodiscard]] const std::optional<GroupDetail>& group() const { return group_; }
  [[nodiscard]] QString statsText() const;
  /// The line of statsText() with count, range, kurtosis and max/median (and the zoomed count).
  [[nodiscard]] QString countsText() const;
  // The chart's series, brought up to date first (a hidden view defers its rebuilds).
  QLineSeries* originalSeries() { return flushed(original_); }
  QLineSeries* reconstructedSeries() { return flushed(reconstructed_); }
  QLineSeries* levelSeries() { return flushed(levels_); }
  /// tq/tqp in the format's space: the expected counts under the codebook's density.
  QLineSeries* densitySeries() { return flushed(density_); }
  /// "original" or "rotated (format input)": where the histogram of a rotated spec is counted.
  QComboBox* spaceBox() { return space_; }
  /// The format-space data shown, when the histogram shows a rotated spec's format space.
  [[nodiscard]] const std::optional<FormatSpaceData>& formatSpace() const { return formatSpace_; }
  QComboBox* tensorBox() { return tensor_; }
  QComboBox* scopeBox() { return scope_; }
  /// Count axis: "auto" (log when core's prefersLogCounts holds for the whole range), "linear" or "log".
  QComboBox* countsBox() { return counts_; }
  /// Whether the count axis is logarithmic now (the user's choice, or the rule under "auto").
  [[nodiscard]] bool logCounts() const;
  /// The bins drawn: over the zoomed x range once it is counted, else the whole range (data()).
  [[nodiscard]] const HistogramData& shown() const { return zoom_ ? zoomed_ : data_; }
  /// The zoomed x range the bins were counted over (none: the whole range).
  [[nodiscard]] const std::optional<std::pair<double, double>>& zoomRange() const { return zoom_; }
  /// Counts the bins over [lo, hi] (the chart's zoom does this); the whole range clears the zoom.
  void zoomTo(double lo, double hi);
  /// Whether a recount over a zoomed range is still running off the GUI thread.
  [[nodiscard]] bool rebinning() const;
  QSpinBox* binsBox() { return bins_; }
  InteractiveChartView* chartView() { return view_; }
  QChart* chart() {
    flush();
    return chart_;
  }

  static constexpr const char* kName = "histogram";
  [[nodiscard]] QString exportName() const override { return QString::fromLatin1(kName); }
  QWidget* widget() override { return this; }
  [[nodiscard]] QString tabTitle() const override;
  [[nodiscard]] nlohmann::json saveState() const override;
  void loadState(const nlohmann::json& state) override;
  void takeDump(const std::shared_ptr<const Dump>& dump, const ViewContext& context) override;
  void clearResults(const QString& reason) override;
  void fillRequest(ViewRequest& request, const ViewContext& context) const override;
  [[nodiscard]] bool showsPreRope() const override { return tensor() == ViewTensor::KeyPreRope; }
  void takeLayer(const LayerQuantPtr& layer, const ViewContext& context) override;
  /// A/B comparison: A's counts on the bins of the histogram shown are drawn as a third line
  /// ("reconstructed A").
  void takeComparison(const ComparisonData& a) override;
  void takeSelection(const Selection& selection) override;
  /// Switches to the evidence's tensor and to its channel (or token) in the dump's values.
  void takeFocus(const Evidence& evidence, bool hasKeyPreRope) override;
  void renderTo(QPainter& painter, const QRectF& target) override;
  [[nodiscard]] QString toCsv() const override;
  [[nodiscard]] QStringList csvTableNames() const override { return {QStringLiteral("levels")}; }
  [[nodiscard]] bool hasContent() const override { return layer_ != nullptr && data_.count > 0; }

 protected:
  void showEvent(QShowEvent* event) override;

 private:
  /// Rebuilds the chart now when visible, else when shown (see DriftView::requestRebuild).
  void requestRebuild();
  void flush();
  QLineSeries* flushed(QLineSeries* s) {
    flush();
    return s;
  }
  void refresh() { recompute(); }
  void setHasPreRope(bool has);
  /// The channel and token spin boxes show `channel_` and `token_` (without signals).
  void showPoint();
  /// Recomputes the data, taking what the layer worker computed where it matches the settings.
  void recompute();
  void rebuildChart();
  /// Why the levels of the group at token_ cannot be drawn for `t` under `spec` (empty: they can).
  [[nodiscard]] QString groupNote(ViewTensor t, const QuantSpec& spec, int64_t tokens) const;
  /// Whether the histogram of `t` under `spec` is counted in the format's (rotated) space.
  [[nodiscard]] bool showsFormatSpace(ViewTensor t, const QuantSpec& spec) const;

  QChart* chart_;
  InteractiveChartView* view_;
  QLineSeries* original_;
  QLineSeries* reconstructed_;
  QLineSeries* levels_;
  QLineSeries* density_;
  QLineSeries* reconstructedA_;
  QValueAxis* xAxis_;
  QValueAxis* linearAxis_;
  QLogValueAxis* logAxis_;
  QComboBox* tensor_;
  QComboBox* scope_;
  QComboBox* space_;
  QSpinBox* bins_;
  QComboBox* counts_;
  QLabel* stats_;

  LayerQuantPtr layer_;
  int kvHead_ = 0, channel_ = 0, token_ = 0;
  HistogramData data_;
  std::optional<GroupDetail> group_;
  QString groupNote_;
  HistogramWorkspace workspace_;  ///< reused by recomputations on the GUI thread (settings changes)
  Tensor3 formatInput_;
  std::optional<FormatSpaceData> formatSpace_;
  bool chartPending_ = false;
  LayerQuantPtr compare_;
  bool pinned_ = false;  ///< a setting is pinned (A is drawn once its data arrives)
  bool otherDump_ = false;  ///< A is on a dump of its own (its layer has other tensors)
  QString feedNote_;        ///< why A shows nothing of the selection (ComparisonData::note)
  std::vector<double> compareCounts_;
  QString compareNote_;  ///< why A is not drawn, when pinned
  /// Counts A's reconstruction on data_'s bins (called by recompute).
  void countComparison();
  /// Counts zoom_'s range on the GUI thread (small slices) or on rebin_'s thread.
  void rebin();

  std::optional<std::pair<double, double>> zoom_;  ///< set once zoomed_ holds its counts
  std::optional<std::pair<double, double>> pendingZoom_;  ///< a range being counted
  HistogramData zoomed_;                ///< the bins over zoom_ (original, reconstructed)
  std::vector<double> zoomedCompare_;   ///< A's counts over zoom_
  std::vector<double> zoomedDensity_;   ///< tq/tqp's expected counts over zoom_
  uint64_t generation_ = 0;             ///< bumped by recompute: a recount of older data is dropped
  JobRunner* rebin_;
  /// formatSpace_ shared with a recount off the GUI thread (made when first needed).
  std::shared_ptr<const FormatSpaceData> formatSpaceShared_;
};

}  // namespace kvscope::ui
