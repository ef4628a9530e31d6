// SPDX-License-Identifier: GPL-3.0-or-later
// Attention drift: for the selected layer, query head and query position, the original vs
// reconstructed scores and probabilities over key positions (key_only / value_only / joint), or
// their differences s′ − s and P′ − P, with the row's top keys beside them; below, KL and output
// error along query positions.
#pragma once

#include <QStringList>
#include <QWidget>

#include <memory>

#include "core/attention/detail.h"
#include "core/inspect/drift_data.h"
#include "ui/views/view.h"

class QChart;
class QChartView;
class QCheckBox;
class QComboBox;
class QLabel;
class QLineSeries;
class QLogValueAxis;
class QSpinBox;
class QTableWidget;
class QValueAxis;

namespace kvscope::ui {

class InteractiveChartView;

class DriftView : public QWidget, public View {
  Q_OBJECT

 public:
  explicit DriftView(QWidget* parent = nullptr);

  /// Shows `data`; when its row is the one shown already (the series arrives after the row),
  /// only the position chart is rebuilt.
  void setData(DriftDataPtr data, QStringList tokenText);
  /// Shows a message instead of charts (no queries, a failed computation).
  void setMessage(const QString& message);
  /// The query head and row controls; they show the session's Selection (takeSelection) and
  /// send the user's changes to the session.
  QSpinBox* queryHeadBox() { return head_; }
  QSpinBox* queryRowBox() { return query_; }
  [[nodiscard]] const DriftData* data() const { return data_.get(); }
  [[nodiscard]] const DriftData* comparison() const { return compare_.get(); }
  QLineSeries* scoreCaseA() { return flushed(scoreCaseA_); }
  QLineSeries* probabilityCaseA() { return flushed(probCaseA_); }
  QLineSeries* klSeriesA() { return flushed(klA_); }
  QLineSeries* relSeriesA() { return flushed(relA_); }
  // The charts' series, brought up to date first (a hidden view defers its rebuilds).
  QLineSeries* scoreOriginal() { return flushed(scoreOriginal_); }
  QLineSeries* probabilityOriginal() { return flushed(probOriginal_); }
  /// s′ (P′), or s′ − s (P′ − P) while the difference box is checked.
  QLineSeries* scoreCase() { return flushed(scoreCase_); }
  QLineSeries* probabilityCase() { return flushed(probCase_); }
  QLineSeries* klSeries() { return flushed(kl_); }
  QLineSeries* relSeries() { return flushed(rel_); }
  /// The charts as shown (score, probability, drift along queries), for tests.
  InteractiveChartView* scoreChartView() { return scoreView_; }
  InteractiveChartView* probabilityChartView() { return probView_; }
  InteractiveChartView* positionChartView() { return posView_; }
  QComboBox* caseBox() { return case_; }
  /// Log probability axis (checked by default; off while the difference is shown).
  QCheckBox* logProbabilityBox() { return logP_; }
  /// The row charts show s′ − s and P′ − P instead of the values.
  QCheckBox* differenceBox() { return diff_; }
  /// Zooming or panning the key axis of the score or probability chart moves the other's too.
  QCheckBox* linkKeysBox() { return linkX_; }
  /// The row's kTopKeys keys of largest P: key, token, P, P′, P′ − P (and P′ of A when pinned).
  QTableWidget* topKeysTable() {
    flush();
    return top_;
  }
  static constexpr int kTopKeys = 10;

  static constexpr const char* kName = "drift";
  [[nodiscard]] QString exportName() const override { return QString::fromLatin1(kName); }
  QWidget* widget() override { return this; }
  [[nodiscard]] QString tabTitle() const override;
  [[nodiscard]] nlohmann::json saveState() const override;
  void loadState(const nlohmann::json& state) override;
  /// The attention row of the selected query head and row, when that head is in the kv head shown.
  void takeDump(const std::shared_ptr<const Dump>& dump, const ViewContext& context) override;
  void clearResults(const QString& reason) override { setMessage(reason); }
  void fillRequest(ViewRequest& request, const ViewContext& context) const override;
  void takeDrift(const DriftDataPtr& drift, const QString& message) override;
  /// A/B comparison: the lines are named A and B; A's row and series (null while computed, or
  /// without queries) are drawn where A's layer and row are the ones shown.
  void takeComparison(const ComparisonData& a) override;
  void takeSelection(const Selection& selection) override;
  void renderTo(QPainter& painter, const QRectF& target) override;
  [[nodiscard]] QString toCsv() const override;
  [[nodiscard]] QStringList csvTableNames() const override { return {QStringLiteral("queries")}; }
  [[nodiscard]] bool hasContent() const override { return data_ != nullptr; }

 protected:
  void showEvent(QShowEvent* event) override;

 private:
  /// Rebuilds now when visible; a hidden view (another tab) rebuilds when shown, so that a
  /// spec change does not make the GUI thread lay out charts nobody sees.
  void requestRebuild(bool rowToo);
  /// Runs the deferred rebuilds.
  void flush();
  QLineSeries* flushed(QLineSeries* s) {
    flush();
    return s;
  }
  void rebuild();
  /// The score and probability charts (the row), at most 2048 points per line.
  void rebuildRow();
  /// The KL / error chart along query positions.
  void rebuildSeries();
  [[nodiscard]] const AttentionRowCase& currentCase() const;
  [[nodiscard]] const std::vector<std::vector<double>>& currentRel() const;
  /// A click on the position chart: show the query row nearest to that position.
  void selectQueryAt(double position);

  DriftDataPtr data_;
  QStringList tokenText_;
  QSpinBox* head_;
  QSpinBox* query_;
  QComboBox* case_;
  QCheckBox* logP_;
  QCheckBox* diff_;
  QCheckBox* linkX_;
  QTableWidget* top_;
  QLabel* info_;
  QChart* scoreChart_;
  QChart* probChart_;
  QChart* posChart_;
  InteractiveChartView* scoreView_;
  InteractiveChartView* probView_;
  InteractiveChartView* posView_;
  QValueAxis* scoreX_;
  QValueAxis* scoreY_;
  QValueAxis* probX_;
  QValueAxis* probY_;
  QLogValueAxis* probLogY_;  ///< swapped in for probY_ while logP_ applies
  QValueAxis* posX_;
  QValueAxis* klY_;
  QValueAxis* relY_;
  QLineSeries* scoreOriginal_;
  QLineSeries* scoreCase_;
  QLineSeries* probOriginal_;
  QLineSeries* probCase_;
  QLineSeries* kl_;
  QLineSeries* rel_;
  QLineSeries* marker_;
  QLineSeries* scoreCaseA_;
  QLineSeries* probCaseA_;
  QLineSeries* klA_;
  QLineSeries* relA_;
  DriftDataPtr compare_;
  bool pinned_ = false;
  bool otherDump_ = false;  ///< A is on a dump of its own (ComparisonData::otherDump)
  QString aNote_;           ///< why A shows nothing here (ComparisonData::note)
  /// compare_ is for the layer and row shown.
  [[nodiscard]] bool compareShown() const;
  /// Thins the log P axis's labels to the probability chart's plot height (fitLogDecades).
  void fitLogLabels();
  /// A's row is of the same layer and query head as B's (its figures are shown; on another dump
  /// its length may differ, and then it is not drawn over B's row).
  [[nodiscard]] bool compareRow() const;
  /// A's series is drawn (same dump: the same query positions; A's own dump: its own positions).
  [[nodiscard]] bool compareSeries() const;
  [[nodiscard]] const AttentionRowCase& caseOf(const AttentionRowDetail& row) const;
  [[nodiscard]] const std::vector<std::vector<double>>& relOf(const AttentionPositionSeries& series) const;
  /// Puts `axis` (the linear or the log one) on the probability chart's left.
  void useProbabilityAxis(bool log);
  /// Fills the top keys table from the row shown (empty without one).
  void fillTopKeys();
  bool rowPending_ = false;
  bool seriesPending_ = false;
};

}  // namespace kvscope::ui
