// SPDX-License-Identifier: GPL-3.0-or-later
// Budget and capacity: the capacity calculator (core/capacity) for the current K and V specs,
// and the budget search's Pareto fronts once core/search is available.
#pragma once

#include <QWidget>

#include <optional>

#include "core/capacity/capacity.h"
#include "core/io/dump.h"
#include "core/quant/spec.h"
#include "ui/export/exportable.h"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QSpinBox;
class QTableWidget;

namespace kvscope::ui {

class BudgetView : public QWidget, public ExportableView {
  Q_OBJECT

 public:
  explicit BudgetView(QWidget* parent = nullptr);

  /// The dump's shape and the current specs; recomputes the plan.
  void setInputs(const DumpInfo& info, const QuantSpec& key, const QuantSpec& value);
  [[nodiscard]] const std::optional<CapacityReport>& plan() const { return plan_; }
  QDoubleSpinBox* memoryBox() { return memory_; }

  [[nodiscard]] QString exportName() const override { return QStringLiteral("budget"); }
  void renderTo(QPainter& painter, const QRectF& target) override;
  [[nodiscard]] QString toCsv() const override;
  [[nodiscard]] bool hasContent() const override { return plan_.has_value(); }

 private:
  void recompute();
  [[nodiscard]] QStringList rowLabels() const;
  [[nodiscard]] QStringList column(const CapacityEntry& e) const;

  std::optional<ModelShape> shape_;
  QuantSpec key_, value_;
  std::optional<CapacityReport> plan_;
  QString error_;
  QDoubleSpinBox* memory_;
  QDoubleSpinBox* weights_;
  QSpinBox* context_;
  QSpinBox* batch_;
  QComboBox* device_;
  QTableWidget* table_;
  QLabel* notes_;
  QLabel* search_;
};

}  // namespace kvscope::ui
