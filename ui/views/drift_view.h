// SPDX-License-Identifier: GPL-3.0-or-later
// Attention drift: for the selected layer, query head and query position, the original vs
// reconstructed scores and probabilities over key positions (key_only / value_only / joint),
// and below them KL and output error along query positions.
#pragma once

#include <QStringList>
#include <QWidget>

#include <memory>

#include "core/attention/detail.h"
#include "ui/export/exportable.h"

class QChart;
class QChartView;
class QComboBox;
class QLabel;
class QLineSeries;
class QSpinBox;

namespace kvscope::ui {

/// What the drift view shows, computed off the GUI thread.
struct DriftData {
  int layer = 0;
  AttentionRowDetail row;
  AttentionPositionSeries series;  ///< grouped by kv head
};
using DriftDataPtr = std::shared_ptr<const DriftData>;

class DriftView : public QWidget, public ExportableView {
  Q_OBJECT

 public:
  explicit DriftView(QWidget* parent = nullptr);

  /// Limits of the query selectors for the open dump (heads = 0: the dump has no queries).
  void setShape(int heads, int queries, int tokens);
  void setData(DriftDataPtr data, QStringList tokenText);
  /// Shows a message instead of charts (no queries, a failed computation).
  void setMessage(const QString& message);
  [[nodiscard]] int queryHead() const;
  [[nodiscard]] int queryIndex() const;
  void setQuery(int queryHead, int queryIndex);
  [[nodiscard]] const DriftData* data() const { return data_.get(); }
  QLineSeries* scoreOriginal() { return scoreOriginal_; }
  QLineSeries* scoreCase() { return scoreCase_; }
  QLineSeries* probabilityCase() { return probCase_; }
  QLineSeries* klSeries() { return kl_; }
  QComboBox* caseBox() { return case_; }

  [[nodiscard]] QString exportName() const override { return QStringLiteral("drift"); }
  void renderTo(QPainter& painter, const QRectF& target) override;
  [[nodiscard]] QString toCsv() const override;
  [[nodiscard]] bool hasContent() const override { return data_ != nullptr; }

 signals:
  /// The user picked another query head or query row.
  void queryChanged(int queryHead, int queryIndex);

 private:
  void rebuild();
  [[nodiscard]] const AttentionRowCase& currentCase() const;
  [[nodiscard]] const std::vector<std::vector<double>>& currentRel() const;
  void hover(const QPointF& point, bool state, const QString& what);

  DriftDataPtr data_;
  QStringList tokenText_;
  QSpinBox* head_;
  QSpinBox* query_;
  QComboBox* case_;
  QLabel* info_;
  QChart* scoreChart_;
  QChart* probChart_;
  QChart* posChart_;
  QChartView* scoreView_;
  QChartView* probView_;
  QChartView* posView_;
  QLineSeries* scoreOriginal_;
  QLineSeries* scoreCase_;
  QLineSeries* probOriginal_;
  QLineSeries* probCase_;
  QLineSeries* kl_;
  QLineSeries* rel_;
  QLineSeries* marker_;
};

}  // namespace kvscope::ui
