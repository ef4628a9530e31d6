// SPDX-License-Identifier: GPL-3.0-or-later
// Sensitivity map: core's sensitivityMap (docs/sensitivity.md) as one layer × kv head grid per
// side (K judged by key_only, V by value_only), coloured by a chosen metric at a chosen
// candidate on a log scale. Computed on its own background lane when the dump or the candidate
// list changes (never on a spec change: the map does not depend on the K/V settings).
#pragma once

#include <QWidget>

#include <memory>
#include <vector>

#include "core/io/dump.h"
#include "core/search/search.h"
#include "core/sensitivity/sensitivity.h"
#include "ui/views/view.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;

namespace kvscope::ui {

class JobRunner;

using SensitivityMapPtr = std::shared_ptr<const SensitivityMap>;

/// What one grid cell shows.
struct SensitivityCell {
  bool valid = false;  ///< false: no cell (the candidate was skipped for that side)
  bool isKey = true;
  int layer = 0;        ///< the dump's layer index
  int kvHead = 0;
  double value = 0;     ///< the metric as coloured (top1_agreement: 1 − agreement)
  const AttentionMetrics* metrics = nullptr;
};

/// The drawing surface: both grids, their colour bars, the selection outline.
class SensitivityCanvas : public QWidget {
  Q_OBJECT

 public:
  explicit SensitivityCanvas(QWidget* parent = nullptr);

  void setMap(SensitivityMapPtr map, int candidate, AttentionField field);
  void setSelection(int layer, int kvHead);
  /// What the figure says while there is no map (computing, no queries, cancelled).
  void setPlaceholder(const QString& text);
  /// Draws the whole figure into `target` (exports; the widget paints the same figure).
  void paintFigure(QPainter& painter, const QRectF& target);
  /// The cell under a widget point, as last painted on screen.
  [[nodiscard]] SensitivityCell cellAt(const QPointF& pos) const;
  /// The cell of (side, layer index, kv head) at the current candidate and metric.
  [[nodiscard]] SensitivityCell cell(bool isKey, size_t layerIndex, int kvHead) const;
  /// The hover text of a cell (layer, head, candidate, the metric, the other metrics).
  [[nodiscard]] QString describe(const SensitivityCell& cell) const;
  /// A cell's rectangle in widget coordinates, as last painted on screen (tests, xdotool).
  [[nodiscard]] QRectF cellRect(bool isKey, size_t layerIndex, int kvHead) const;
  /// The colour scale's range [lo, hi] of a side, as last drawn (log scale, lo > 0).
  [[nodiscard]] std::pair<double, double> scaleRange(bool isKey) const;
  /// The field a side shows: V always shows output_rel_error (its scores do not change).
  [[nodiscard]] AttentionField sideField(bool isKey) const;

 signals:
  void cellClicked(int layer, int kvHead);

 protected:
  void paintEvent(QPaintEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;

 private:
  struct Grid {
    QRectF plot;
    double lo = 0, hi = 0;
  };
  void computeRanges();
  /// Draws the figure; `screen`: this is the widget's own paint, whose cell rects hit-testing uses.
  void draw(QPainter& painter, const QRectF& target, bool screen);

  SensitivityMapPtr map_;
  int candidate_ = 0;
  AttentionField field_ = AttentionField::OutputRelError;
  int selLayer_ = -1, selHead_ = -1;
  QString placeholder_;
  Grid grids_[2];  ///< 0 = K, 1 = V
};

/// The map with its controls: candidate list, metric, candidate shown, and a status line.
class SensitivityView : public QWidget, public View {
  Q_OBJECT

 public:
  explicit SensitivityView(QWidget* parent = nullptr);
  ~SensitivityView() override;

  /// A new dump: the map is stale and is computed when the view is shown (or compute()).
  void setDump(std::shared_ptr<const Dump> dump);
  void setSelection(int layer, int kvHead);
  /// Starts the computation now unless the map is current or already being computed.
  void compute();
  /// True when the shown map belongs to the open dump and the current candidate list.
  [[nodiscard]] bool upToDate() const;
  /// The background lane (the window shows its progress and cancels it).
  JobRunner* runner() { return runner_; }
  [[nodiscard]] const SensitivityMapPtr& map() const { return map_; }
  SensitivityCanvas* canvas() { return canvas_; }
  QComboBox* metricBox() { return metric_; }
  QComboBox* candidateBox() { return candidate_; }
  QLineEdit* candidatesField() { return candidates_; }
  QLabel* statusLabel() { return status_; }
  /// The candidate shown (canonical spec; the one asked for while no map has it yet).
  [[nodiscard]] QString shownCandidate() const { return preferredCandidate_; }
  /// Restores the view's settings (sessions): candidate list, metric name, candidate shown.
  void restore(const QString& candidates, const QString& metric, const QString& candidate);

  static constexpr const char* kName = "sensitivity";
  [[nodiscard]] QString exportName() const override { return QString::fromLatin1(kName); }
  QWidget* widget() override { return this; }
  [[nodiscard]] QString tabTitle() const override;
  [[nodiscard]] nlohmann::json saveState() const override;
  void loadState(const nlohmann::json& state) override;
  void takeDump(const std::shared_ptr<const Dump>& dump, const ViewContext& context) override {
    setDump(dump);
    setSelection(context.selection.layer, context.selection.kvHead);
  }
  [[nodiscard]] QList<JobRunner*> lanes() const override { return {runner_}; }
  /// The map needs queries; without them the view only says so.
  bool prepareExport() override {
    if (!dump_ || !dump_->info().hasQuery || upToDate()) return true;
    compute();
    return false;
  }
  void takeSelection(const Selection& selection) override { setSelection(selection.layer, selection.kvHead); }
  void renderTo(QPainter& painter, const QRectF& target) override;
  /// core's sensitivityToCsv: one row per (side, layer, kv head, candidate), every metric.
  [[nodiscard]] QString toCsv() const override;
  [[nodiscard]] bool hasContent() const override { return map_ != nullptr; }

 signals:
  /// A cell was clicked: select this layer and kv head everywhere.
  void selected(int layer, int kvHead);
  /// A map reached the view.
  void computed();

 protected:
  void showEvent(QShowEvent* event) override;

 private:
  void refresh();
  void fillCandidates();
  /// Sets the status line, and the figure's placeholder while there is no map.
  void setStatus(const QString& text);

  JobRunner* runner_;
  SensitivityCanvas* canvas_;
  QLineEdit* candidates_;
  QComboBox* metric_;
  QComboBox* candidate_;
  QLabel* status_;
  std::shared_ptr<const Dump> dump_;
  SensitivityMapPtr map_;
  /// What map_ (or the running job) was computed for.
  std::shared_ptr<const Dump> mapDump_, runningDump_;
  std::vector<std::string> mapCandidates_, runningCandidates_;
  bool running_ = false;
  /// The candidate the user chose (kept across maps whose lists contain it).
  QString preferredCandidate_;
};

/// The candidates field, as `kvscope-cli sensitivity --candidates` reads it (without files):
/// "default" (or empty) = sensitivityCandidates(), "search" = the budget search's whole set for
/// the dump's shape, else specs joined by ';' (each checked with parseSpec). Errors name the
/// spec and what is allowed.
Expected<std::vector<std::string>> sensitivityCandidateList(const QString& text, const DumpInfo& info);

}  // namespace kvscope::ui
