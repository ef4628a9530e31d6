// SPDX-License-Identifier: GPL-3.0-or-later
// The chart view every kvscope chart uses: wheel and rubber-band zoom, drag to pan, double-click
// or Esc to reset, a crosshair with a readout of the series' values under the cursor, and a
// click signal in data coordinates. Written once here so every view behaves the same.
#pragma once

#include <QChartView>
#include <QPointF>
#include <QString>

#include <functional>
#include <utility>
#include <vector>

#include "ui/widgets/pointer_drag.h"

class QAbstractAxis;
class QGraphicsLineItem;
class QGraphicsRectItem;
class QGraphicsSimpleTextItem;
class QRubberBand;

namespace kvscope::ui {

class InteractiveChartView : public QChartView {
  Q_OBJECT

 public:
  explicit InteractiveChartView(QChart* chart, QWidget* parent = nullptr);

  /// How the readout names the x value under the cursor (default "x = …"); e.g. a key position
  /// with its token text.
  void setXLabeler(std::function<QString(double x)> labeler) { xLabeler_ = std::move(labeler); }
  /// An extra line for the hint under the readout (e.g. what a click does).
  void setHint(const QString& hint) { hint_ = hint; }
  /// Restricts zoom and pan to the x axis (a bar chart's categories stay whole).
  void setZoomXOnly(bool on) { xOnly_ = on; }

  /// The readout the crosshair shows at a view position (empty outside the plot).
  [[nodiscard]] QString readoutAt(const QPoint& viewPos) const;
  /// The readout shown now (empty when the cursor is outside the plot).
  [[nodiscard]] QString readout() const { return readout_; }
  /// True while the axes show less (or other) than the data's own ranges.
  [[nodiscard]] bool zoomed() const { return zoomed_; }
  /// Zooms by `factor` (> 1 magnifies) about a view position, x only unless `bothAxes`.
  void zoomAt(const QPoint& viewPos, double factor, bool bothAxes = false);
  /// Zooms to the rectangle between two view positions.
  void zoomToRect(const QPoint& a, const QPoint& b);
  /// Moves the visible ranges by a view-pixel offset (a drag).
  void panBy(const QPointF& pixels);
  /// Back to the ranges the view last set from its data.
  void resetZoom();
  /// The data-space point under a view position, on the axes of the chart's first series.
  [[nodiscard]] QPointF valueAt(const QPoint& viewPos) const;
  /// Shows [lo, hi] on the x axes as a user's zoom would (kept across new data while it fits),
  /// without emitting xRangeChanged: how a linked chart follows another. The data's own range
  /// (the home) resets the zoom.
  void showXRange(double lo, double hi);
  /// The x range the view last set from its data (the range a reset goes back to).
  [[nodiscard]] std::pair<double, double> homeXRange() const;

 signals:
  /// A click without a drag, in data coordinates of the first series' axes.
  void clicked(QPointF value);
  /// The x range changed by the user (zoom, pan, reset) or by a kept zoom put back over new
  /// data; not for ranges the view sets from its data, nor for showXRange.
  void xRangeChanged(double lo, double hi);

 protected:
  void wheelEvent(QWheelEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void keyPressEvent(QKeyEvent* event) override;
  void leaveEvent(QEvent* event) override;

 private:
  struct AxisState {
    QAbstractAxis* axis;
    bool horizontal;
    double homeMin, homeMax;
    /// The user's x range, kept across new data while it lies inside the data's range.
    bool kept = false;
    double keptMin = 0, keptMax = 0;
  };
  void trackAxes();
  /// Emits xRangeChanged with the first x axis's range (unless muted).
  void announceX();
  /// zoomed_ from the axes' ranges against their homes.
  void updateZoomed();
  void setRangeQuietly(AxisState& a, double lo, double hi);
  [[nodiscard]] bool rangeOf(const QAbstractAxis* axis, double* lo, double* hi, bool* log) const;
  void updateCrosshair(const QPoint& viewPos);
  void hideCrosshair();
  /// Connects the series added since to refreshReadout.
  void trackSeries();
  /// The crosshair's readout again at the same place, for the series' new values.
  void refreshReadout();

  std::function<QString(double)> xLabeler_;
  bool xOnly_ = false;
  std::vector<AxisState> axes_;
  bool internal_ = false;  ///< the range change comes from zoom/pan, not from the view's data
  bool zoomed_ = false;
  bool muted_ = false;  ///< a Shift+wheel (y only) puts x back: no xRangeChanged
  PointerDrag drag_ = PointerDrag::None;
  QPoint pressPos_;
  QPoint lastPos_;
  bool moved_ = false;
  QRubberBand* band_ = nullptr;
  QGraphicsLineItem* line_ = nullptr;
  QGraphicsRectItem* box_ = nullptr;
  QGraphicsSimpleTextItem* text_ = nullptr;
  QString readout_;
  QString hint_;
  QPoint hoverPos_;  ///< where the crosshair was drawn last
  bool refreshPending_ = false;
};

}  // namespace kvscope::ui
