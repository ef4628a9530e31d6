// SPDX-License-Identifier: GPL-3.0-or-later
// Layer summary: per-(layer, kv head) metrics for key_only / value_only / joint in a sortable
// table and a bar chart, coloured against the user's K and V budgets. Fills in as layers finish.
#pragma once

#include <QWidget>

#include <optional>
#include <vector>

#include "core/report/eval.h"
#include "ui/views/view.h"

class QBarSeries;
class QCheckBox;
class QComboBox;
class QLogValueAxis;
class QChart;
class QBarCategoryAxis;
class QValueAxis;
class QChartView;
class QDoubleSpinBox;
class QLabel;
class QLineSeries;
class QSortFilterProxyModel;
class QStandardItemModel;
class QTableView;

namespace kvscope::ui {

class InteractiveChartView;

class SummaryView : public QWidget, public View {
  Q_OBJECT

 public:
  explicit SummaryView(QWidget* parent = nullptr);

  /// Empties the table for a dump of `layers` layers.
  void reset(int layers);
  /// Adds (or replaces) one evaluated layer.
  void addLayer(const LayerResult& layer);
  [[nodiscard]] const std::vector<LayerResult>& layers() const { return layers_; }
  [[nodiscard]] int expectedLayers() const { return expected_; }
  /// Budgets on output_rel_error: key_only against K, value_only against V.
  void setBudgets(double key, double value);
  [[nodiscard]] double keyBudget() const;
  [[nodiscard]] double valueBudget() const;
  /// Highlights the row of (layer, kv head), whatever the sort order.
  void setSelection(int layer, int kvHead);
  /// The highlighted row of the table as shown (sorted), -1 when none.
  [[nodiscard]] int highlightedRow() const;
  QCheckBox* logScaleBox() { return logScale_; }
  [[nodiscard]] const std::vector<LayerResult>& comparisonLayers() const { return compare_; }
  QComboBox* comparisonMetricBox() { return compareMetric_; }
  /// The metric names comparisonMetricBox() lists, as in the CSV (e.g. "joint_output_rel_error").
  [[nodiscard]] static QStringList metricNames();
  /// Metric `name` (metricNames()) of one head; empty when the head lacks it.
  [[nodiscard]] static std::optional<double> metricOf(const HeadResult& head, const QString& name);
  InteractiveChartView* chartView() { return chartView_; }
  QTableView* table() { return table_; }
  QStandardItemModel* model() { return model_; }

  static constexpr const char* kName = "summary";
  [[nodiscard]] QString exportName() const override { return QString::fromLatin1(kName); }
  QWidget* widget() override { return this; }
  [[nodiscard]] QString tabTitle() const override;
  [[nodiscard]] nlohmann::json saveState() const override;
  void loadState(const nlohmann::json& state) override;
  void takeDump(const std::shared_ptr<const Dump>& dump, const ViewContext& context) override;
  void clearResults(const QString& reason) override;
  void takeSummary(const std::vector<LayerResult>& rows, int layers) override;
  /// A/B comparison: the columns A, B and B − A of the metric chosen in comparisonMetricBox()
  /// after the kv head (sortable like the others), and that metric for A and B per layer; A's
  /// evaluated layers fill in as they finish.
  void takeComparison(const ComparisonData& a) override;
  void takeSelection(const Selection& selection) override { setSelection(selection.layer, selection.kvHead); }
  void renderTo(QPainter& painter, const QRectF& target) override;
  [[nodiscard]] QString toCsv() const override;
  [[nodiscard]] bool hasContent() const override { return !layers_.empty(); }

 signals:
  /// A row was clicked: select this layer and kv head everywhere.
  void selected(int layer, int kvHead);
  /// The budgets changed (the budget view draws them too).
  void budgetsChanged(double key, double value);

 private:
  void rebuildTable();
  /// Measures what each column's header and figures need (columnNeeds_), after a rebuild.
  void measureColumns();
  /// Stretches the metric columns over the table's width when everything fits, else sizes each
  /// to its header and figures (the table then scrolls sideways).
  void fitColumns();
  /// The layer and kv head columns' total need, the widest metric column's need and their count.
  struct ColumnNeeds {
    int fixed = 0;
    int widestStretched = 0;
    int stretched = 0;
  };
  ColumnNeeds columnNeeds_;
  void resizeEvent(QResizeEvent* event) override;
  void rebuildChart();
  void highlightSelection();
  void setComparison(bool pinned, std::vector<LayerResult> a);
  [[nodiscard]] bool hasAttention() const;

  std::vector<LayerResult> layers_;
  int aLayers_ = -1, aKvHeads_ = -1;  ///< A's own dump's shape (-1: A is on the open dump)
  QString aName_;  ///< A's own dump's file name (empty: A is on the open dump)
  std::vector<LayerResult> compare_;
  bool pinned_ = false;
  QComboBox* compareMetric_;
  /// A's result for (layer, kv head), or nullptr.
  [[nodiscard]] const HeadResult* comparisonHead(int layer, int kvHead) const;
  int expected_ = 0;
  QStandardItemModel* model_;
  QSortFilterProxyModel* proxy_;
  QTableView* table_;
  QChart* chart_;
  InteractiveChartView* chartView_;
  QBarCategoryAxis* xAxis_;
  QValueAxis* yAxis_;
  QLogValueAxis* yLog_;
  QCheckBox* logScale_;
  bool logChosen_ = false;  ///< the user set the log box; no more automatic choice
  int selectedLayer_ = 0;
  int selectedHead_ = 0;
  QDoubleSpinBox* keyBudget_;
  QDoubleSpinBox* valueBudget_;
  QLabel* status_;
};

}  // namespace kvscope::ui
