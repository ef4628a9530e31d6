// SPDX-License-Identifier: GPL-3.0-or-later
// What every view offers to the exporter: drawing itself at any size, and its data as CSV.
#pragma once

#include <QPainter>
#include <QRectF>
#include <QString>
#include <QStringList>

namespace kvscope::ui {

/// A view that can be written to PNG/SVG/PDF and CSV.
class ExportableView {
 public:
  virtual ~ExportableView() = default;
  /// File stem, e.g. "heatmap".
  [[nodiscard]] virtual QString exportName() const = 0;
  /// Draws the view into `target` of `painter` (any size; independent of the on-screen size).
  virtual void renderTo(QPainter& painter, const QRectF& target) = 0;
  /// The numbers behind the view, with a header line. A view with several tables separates
  /// them by an empty line; the exporter writes each to a file of its own (csvTableNames).
  [[nodiscard]] virtual QString toCsv() const = 0;
  /// Names of the tables after the first in toCsv(), in order: the second is written to
  /// `<name>-<first of these>.csv`. Unnamed ones get "table2", "table3", ….
  [[nodiscard]] virtual QStringList csvTableNames() const { return {}; }
  /// False while the view has nothing to show.
  [[nodiscard]] virtual bool hasContent() const = 0;
};

}  // namespace kvscope::ui
