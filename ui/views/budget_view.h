// SPDX-License-Identifier: GPL-3.0-or-later
// Budget and capacity: the budget search's Pareto charts (core/search) over a splitter whose lower
// part holds four tabs: the search's candidates, the plan search (core/sensitivity/plan_search.h),
// the capacity calculator (core/capacity) for the current K and V specs, and the end-to-end check.
#pragma once

#include <QElapsedTimer>
#include <QWidget>

#include <memory>
#include <optional>
#include <utility>

#include "core/capacity/capacity.h"
#include "core/io/dump.h"
#include "core/model/e2e.h"
#include "core/quant/spec.h"
#include "core/sensitivity/plan_search.h"
#include "core/search/search.h"
#include "ui/views/view.h"

class QChart;
class QChartView;
class QComboBox;
class QGraphicsSimpleTextItem;
class QScatterSeries;
class QSplitter;
class QTabWidget;
class QPushButton;
class QDoubleSpinBox;
class QProgressBar;
class QGroupBox;
class QLabel;
class QSpinBox;
class QTableWidget;

namespace kvscope::ui {

class InteractiveChartView;
class JobRunner;

/// "about 12 s left" from the time a job has run and the fraction it has done (a straight-line
/// estimate: elapsed × (1 − f) / f); empty until the fraction says anything.
QString timeLeftText(double elapsedSeconds, double fraction);

class BudgetView : public QWidget, public View {
  Q_OBJECT

 public:
  explicit BudgetView(QWidget* parent = nullptr);
  ~BudgetView() override;

  /// Runs the budget search for the open dump in the background (its own lane); the charts show
  /// the result, searchFinished() follows.
  void runSearch(const SearchOptions& options);
  /// Runs the plan search (sensitivity map, per-layer choice, joint eval) the same way.
  void runPlanSearch(const PlanSearchOptions& options);
  /// Runs the end-to-end check (core/model/e2e.h) for the setting in force; needs a dump written
  /// by `kvscope-cli record` whose model file exists.
  void runE2eCheck();
  /// Empty when the open dump can drive the end-to-end check, else what it lacks.
  [[nodiscard]] QString e2eUnavailableReason() const;
  JobRunner* searchRunner() { return searchRunner_; }
  JobRunner* planRunner() { return planRunner_; }
  JobRunner* e2eRunner() { return e2eRunner_; }

  /// The dump's shape and the current specs; recomputes the plan.
  void setInputs(const DumpInfo& info, const Plan& key, const Plan& value);
  [[nodiscard]] const std::optional<CapacityReport>& plan() const { return plan_; }
  QDoubleSpinBox* memoryBox() { return memory_; }
  QDoubleSpinBox* weightsBox() { return weights_; }
  QSpinBox* contextBox() { return context_; }
  QSpinBox* batchBox() { return batch_; }
  QComboBox* deviceBox() { return device_; }
  QComboBox* keyFieldBox() { return keyField_; }
  QDoubleSpinBox* keyBoundBox() { return keyBound_; }
  QComboBox* valueFieldBox() { return valueField_; }
  QDoubleSpinBox* valueBoundBox() { return valueBound_; }
  QTableWidget* capacityTable() { return table_; }

  /// The search's result (Pareto fronts); nullptr clears the charts.
  void setSearchResult(std::shared_ptr<const SearchResult> result);
  /// Shows why there is no search result (running, failed, cancelled).
  void setSearchMessage(const QString& message);
  [[nodiscard]] const SearchResult* searchResult() const { return search_.get(); }
  /// The budgets the next search uses.
  [[nodiscard]] SearchOptions searchOptions() const;
  /// Follows the summary's budgets (output_rel_error bounds) unless the user picked another field.
  void setBudgetBounds(double key, double value);
  QPushButton* searchButton() { return run_; }
  /// The search is running (progress bar and Cancel shown) or not.
  void setSearchRunning(bool running);
  /// The running search's progress: fraction done and the estimated time left.
  void setSearchProgress(double fraction, const QString& what);
  QPushButton* cancelSearchButton() { return cancelSearch_; }
  QProgressBar* searchProgressBar() { return searchProgress_; }

  // The Pareto charts: hover a candidate for its spec, bits per element and metric; click it
  // to apply that spec (to K on the K chart, to V on the V chart).
  InteractiveChartView* keyChartView();
  InteractiveChartView* valueChartView();
  /// The candidate (index into the result's candidates) drawn within a few pixels of a
  /// position of that chart's view, or -1.
  [[nodiscard]] int candidateAt(bool key, const QPoint& viewPos) const;
  /// Where candidate `index` is drawn, in that chart view's coordinates.
  [[nodiscard]] QPoint candidatePosition(bool key, int index) const;
  /// "K q4_0 · 4.500 bits/element · worst output_rel_error 0.0123 (Pareto, meets the budget)".
  [[nodiscard]] QString candidateText(bool key, int index) const;
  /// The readout under the Pareto charts (the hovered candidate, or how to use them).
  QLabel* paretoReadout() { return paretoReadout_; }
  /// The labels drawn beside the K (`key`) or V chart's Pareto-optimal points (the spec, shown
  /// where it overlaps no other label and stays inside the plot).
  [[nodiscard]] QStringList paretoLabels(bool key) const;
  /// Every candidate of the search, one row each (K then V; sortable by any column).
  QTableWidget* candidatesTable() { return candidatesTable_; }
  /// Selects candidate `index` of the K (`key`) or V chart: its row in the table and a ring on
  /// its point. -1 clears the selection.
  void selectCandidate(bool key, int index);
  /// The selected candidate as (key, index); index -1 when none is selected.
  [[nodiscard]] std::pair<bool, int> selectedCandidate() const;
  /// The tabs under the charts: candidates, plan search, capacity, end-to-end check.
  QTabWidget* lowerTabs() { return lowerTabs_; }
  /// The splitter between the charts and the tabs.
  QSplitter* splitter() { return splitter_; }

  /// Enables the end-to-end check; when `available` is false, `why` says what it needs.
  void setE2eAvailable(bool available, const QString& why);
  /// The end-to-end check's result for the current specs; nullptr clears it.
  void setE2eResult(std::shared_ptr<const E2eResult> result);
  /// Shows why there is no end-to-end result (running, failed, specs changed).
  void setE2eMessage(const QString& message);
  [[nodiscard]] const E2eResult* e2eResult() const { return e2e_.get(); }
  QGroupBox* e2eGroup() { return e2eGroup_; }
  QPushButton* e2eButton() { return e2eRun_; }
  /// The figures as shown: "kl_mean", "kl_max", "top1", "ppl_ratio" (each label's text).
  [[nodiscard]] QString e2eFigure(const QString& name) const;
  /// The per-layer table `kvscope-cli e2e` prints (one row per layer).
  QTableWidget* e2eTable() { return e2eTable_; }
  /// That table as CSV (one header line, one row per layer); empty without a result.
  [[nodiscard]] QString e2eCsv() const;
  QPushButton* e2eExportButton() { return e2eExport_; }

  /// The plan search's result (a K and a V spec per layer); nullptr clears the plan table.
  void setPlanResult(std::shared_ptr<const PlanSearchResult> result);
  /// Shows why there is no plan (running, failed, cancelled).
  void setPlanMessage(const QString& message);
  [[nodiscard]] const PlanSearchResult* planResult() const { return planResult_.get(); }
  /// The budgets of the search row and the engine of the plan group.
  [[nodiscard]] PlanSearchOptions planSearchOptions() const;
  QComboBox* planEngineBox() { return planEngine_; }
  QPushButton* planSearchButton() { return planRun_; }
  QPushButton* applyPlanButton() { return planApply_; }
  QTableWidget* planTable() { return planTable_; }
  QLabel* planSummaryLabel() { return planSummary_; }
  QGroupBox* planGroup() { return planGroup_; }

  static constexpr const char* kName = "budget";
  [[nodiscard]] QString exportName() const override { return QString::fromLatin1(kName); }
  QWidget* widget() override { return this; }
  [[nodiscard]] QString tabTitle() const override;
  [[nodiscard]] nlohmann::json saveState() const override;
  void loadState(const nlohmann::json& state) override;
  void renderTo(QPainter& painter, const QRectF& target) override;
  /// The capacity table, then the search's candidates ("search") and the end-to-end check's
  /// per-layer table ("e2e") when there are results.
  [[nodiscard]] QString toCsv() const override;
  [[nodiscard]] QStringList csvTableNames() const override;
  [[nodiscard]] bool hasContent() const override { return plan_.has_value(); }
  void takeDump(const std::shared_ptr<const Dump>& dump, const ViewContext& context) override;
  /// The plans in force: the capacity table and a stale end-to-end result follow them.
  void takeSetting(const ViewContext& context) override;
  [[nodiscard]] QList<JobRunner*> lanes() const override { return {searchRunner_, planRunner_, e2eRunner_}; }
  /// The export shows the Pareto fronts: runs the search (default candidates) once when none is shown.
  bool prepareExport() override;

 signals:
  /// The budget search delivered its result.
  void searchFinished();
  /// A plan search finished and the view shows its plan.
  void planSearchFinished();
  /// The end-to-end check delivered its result.
  void e2eFinished();
  /// The user clicked a candidate of the K (`key`) or V chart (its spec is applied to that side).
  void candidateChosen(bool key, const QString& spec);

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;
  void attached() override;

 private:
  /// Puts the chart's candidate `spec` on the K (`key`) or V side as that side's whole plan.
  void applyCandidate(bool key, const QString& spec);
  /// Asks where, then writes the end-to-end table as CSV with the metadata header.
  void exportE2eTable();
  [[nodiscard]] const TensorChoice* choiceOf(bool key) const;
  [[nodiscard]] QString paretoHint() const;
  void rebuildPareto();
  void fillChart(bool key);
  void fillCandidates();
  /// Places the Pareto labels of one chart for its plot area and ranges now.
  void placeParetoLabels(bool key);
  /// Draws the ring on the selected candidate's point (the table's selection).
  void showSelected();
  /// The capacity table (and, with `withNotes`, the notes and the search's result under it).
  void renderCapacity(QPainter& painter, const QRectF& target, bool withNotes = true);
  void recompute();
  [[nodiscard]] QStringList rowLabels() const;
  /// One column of the capacity table; `grouped`: large integers with digit groups (the screen), else plain (CSV).
  [[nodiscard]] QStringList column(const CapacityEntry& e, bool grouped) const;

  std::optional<ModelShape> shape_;
  Plan key_, value_;  ///< specs or plans (§12): each layer costs what its spec stores
  std::optional<CapacityReport> plan_;
  QString error_;
  QDoubleSpinBox* memory_;
  QDoubleSpinBox* weights_;
  QSpinBox* context_;
  QSpinBox* batch_;
  QComboBox* device_;
  QTableWidget* table_;
  QLabel* notes_;
  QLabel* searchInfo_;
  QComboBox* keyField_;
  QDoubleSpinBox* keyBound_;
  QComboBox* valueField_;
  QDoubleSpinBox* valueBound_;
  QPushButton* run_;
  QPushButton* cancelSearch_;
  QProgressBar* searchProgress_;
  QElapsedTimer searchClock_;
  QLabel* paretoReadout_;
  QPoint pressPos_;
  double keyFloor_ = 0, valueFloor_ = 0;  ///< where each chart draws a zero metric
  QChart* keyChart_;
  QChart* valueChart_;
  QChartView* keyView_;
  QChartView* valueView_;
  QScatterSeries* keySelected_ = nullptr;  ///< the ring on the selected candidate (owned by its chart)
  QScatterSeries* valueSelected_ = nullptr;
  QList<QGraphicsSimpleTextItem*> keyLabels_, valueLabels_;  ///< beside the Pareto points (owned by the charts)
  QTableWidget* candidatesTable_;
  QTabWidget* lowerTabs_;
  QSplitter* splitter_;
  std::shared_ptr<const SearchResult> search_;
  QGroupBox* e2eGroup_;
  QPushButton* e2eRun_;
  QLabel* e2eInfo_;
  QLabel* e2eKlMean_;
  QLabel* e2eKlMax_;
  QLabel* e2eTop1_;
  QLabel* e2ePpl_;
  QLabel* e2eNotes_;
  QTableWidget* e2eTable_;
  QPushButton* e2eExport_;
  std::shared_ptr<const E2eResult> e2e_;

  // Plan search (a plan per layer, "Apply plan").
  QGroupBox* buildPlanGroup();
  void showPlan();
  QGroupBox* planGroup_ = nullptr;
  QComboBox* planEngine_ = nullptr;
  QPushButton* planRun_ = nullptr;
  QPushButton* planApply_ = nullptr;
  QLabel* planSummary_ = nullptr;
  QTableWidget* planTable_ = nullptr;
  QString planCandidatesNote_;  ///< which candidates the shown (or running) plan search chose from
  std::shared_ptr<const PlanSearchResult> planResult_;

  std::shared_ptr<const Dump> dump_;
  JobRunner* searchRunner_;
  JobRunner* planRunner_;
  JobRunner* e2eRunner_;
  /// The plans of the end-to-end result shown (or running); other plans make it stale.
  std::optional<std::pair<Plan, Plan>> e2ePlans_;
};

}  // namespace kvscope::ui
