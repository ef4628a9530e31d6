// SPDX-License-Identifier: GPL-3.0-or-later
// Budget and capacity: the capacity calculator (core/capacity) for the current K and V specs,
// and the budget search's Pareto fronts once core/search is available.
#pragma once

#include <QWidget>

#include <memory>
#include <optional>

#include "core/capacity/capacity.h"
#include "core/io/dump.h"
#include "core/model/e2e.h"
#include "core/quant/spec.h"
#include "core/search/plan_search.h"
#include "core/search/search.h"
#include "ui/export/exportable.h"

class QChart;
class QChartView;
class QComboBox;
class QPushButton;
class QDoubleSpinBox;
class QGroupBox;
class QLabel;
class QSpinBox;
class QTableWidget;

namespace kvscope::ui {

class BudgetView : public QWidget, public ExportableView {
  Q_OBJECT

 public:
  explicit BudgetView(QWidget* parent = nullptr);

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

  [[nodiscard]] QString exportName() const override { return QStringLiteral("budget"); }
  void renderTo(QPainter& painter, const QRectF& target) override;
  [[nodiscard]] QString toCsv() const override;
  [[nodiscard]] bool hasContent() const override { return plan_.has_value(); }

 signals:
  /// The user asked for a budget search with these options.
  void searchRequested(const kvscope::SearchOptions& options);
  /// The user asked for the end-to-end check with the current specs.
  void e2eRequested();
  /// The user asked for a plan search with these options.
  void planSearchRequested(const kvscope::PlanSearchOptions& options);
  /// The user asked to put the shown plan into the K and V controls.
  void planApplyRequested(const kvscope::Plan& key, const kvscope::Plan& value);

 private:
  void rebuildPareto();
  void renderCapacity(QPainter& painter, const QRectF& target);
  void recompute();
  [[nodiscard]] QStringList rowLabels() const;
  [[nodiscard]] QStringList column(const CapacityEntry& e) const;

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
  QChart* keyChart_;
  QChart* valueChart_;
  QChartView* keyView_;
  QChartView* valueView_;
  std::shared_ptr<const SearchResult> search_;
  QGroupBox* e2eGroup_;
  QPushButton* e2eRun_;
  QLabel* e2eInfo_;
  QLabel* e2eKlMean_;
  QLabel* e2eKlMax_;
  QLabel* e2eTop1_;
  QLabel* e2ePpl_;
  QLabel* e2eNotes_;
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
  std::shared_ptr<const PlanSearchResult> planResult_;
};

}  // namespace kvscope::ui
