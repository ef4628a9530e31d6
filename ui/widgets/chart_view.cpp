// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/widgets/chart_view.h"

#include "ui/export/chart_ticks.h"

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QBrush>
#include <QChart>
#include <QGraphicsLineItem>
#include <QGraphicsRectItem>
#include <QGraphicsScene>
#include <QGraphicsSimpleTextItem>
#include <QKeyEvent>
#include <QLogValueAxis>
#include <QMouseEvent>
#include <QPen>
#include <QRubberBand>
#include <QTimer>
#include <QValueAxis>
#include <QWheelEvent>
#include <QXYSeries>

#include <algorithm>
#include <cmath>

namespace kvscope::ui {

namespace {

QString number(double v) { return QString::number(v, 'g', 5); }

// The point of a series nearest to x: binary search when the points run left to right (every
// line here does), a scan otherwise.
const QPointF* nearestByX(const QList<QPointF>& points, double x) {
  if (points.isEmpty()) return nullptr;
  const bool sorted = points.front().x() <= points.back().x() &&
                      std::is_sorted(points.begin(), points.end(),
                                     [](const QPointF& a, const QPointF& b) { return a.x() < b.x(); });
  if (sorted) {
    auto it = std::lower_bound(points.begin(), points.end(), x, [](const QPointF& p, double v) { return p.x() < v; });
    if (it == points.end()) return &points.back();
    if (it != points.begin() && std::abs((it - 1)->x() - x) <= std::abs(it->x() - x)) --it;
    return &*it;
  }
  const QPointF* best = &points.front();
  for (const QPointF& p : points) {
    if (std::abs(p.x() - x) < std::abs(best->x() - x)) best = &p;
  }
  return best;
}

}  // namespace

InteractiveChartView::InteractiveChartView(QChart* chart, QWidget* parent) : QChartView(chart, parent) {
  setRenderHint(QPainter::Antialiasing);
  setMouseTracking(true);
  setFocusPolicy(Qt::ClickFocus);
  setRubberBand(QChartView::NoRubberBand);  // ours: Qt's right click would zoom out past the data
  // A plot area that moves under a still cursor (a y axis switched between log and linear takes
  // another label width) puts other values under it: read them again.
  connect(chart, &QChart::plotAreaChanged, this, &InteractiveChartView::refreshReadout);
  // No widget tooltip: it would pop up over the plot while the crosshair is read. The hint sits
  // in the readout box instead.
}

bool InteractiveChartView::rangeOf(const QAbstractAxis* axis, double* lo, double* hi, bool* log) const {
  if (const auto* v = qobject_cast<const QValueAxis*>(axis)) {
    *lo = v->min();
    *hi = v->max();
    *log = false;
    return true;
  }
  if (const auto* l = qobject_cast<const QLogValueAxis*>(axis)) {
    *lo = l->min();
    *hi = l->max();
    *log = true;
    return *lo > 0 && *hi > 0;
  }
  return false;  // category axes: not zoomed
}

void InteractiveChartView::trackAxes() {
  const QList<QAbstractAxis*> current = chart()->axes();
  std::erase_if(axes_, [&](const AxisState& a) { return !current.contains(a.axis); });
  for (QAbstractAxis* axis : current) {
    if (std::any_of(axes_.begin(), axes_.end(), [axis](const AxisState& a) { return a.axis == axis; })) continue;
    double lo = 0, hi = 0;
    bool log = false;
    if (!rangeOf(axis, &lo, &hi, &log)) continue;
    axes_.push_back({axis, axis->orientation() == Qt::Horizontal, lo, hi});
    // A range the view sets from its data becomes the new home; ours (zoom, pan) do not.
    const auto rehome = [this, axis] {
      if (internal_) return;
      for (AxisState& a : axes_) {
        bool isLog = false;
        if (a.axis != axis) continue;
        (void)rangeOf(axis, &a.homeMin, &a.homeMax, &isLog);
        // New data (another query row, a spec change) keeps the user's x zoom when it still lies
        // inside the data; y follows the data. Re-applied once the view has set all its ranges.
        const double slack = 1e-9 * std::max(1.0, std::abs(a.homeMax - a.homeMin));
        if (a.kept && a.keptMin >= a.homeMin - slack && a.keptMax <= a.homeMax + slack) {
          QTimer::singleShot(0, this, [this, axis] {
            for (AxisState& s : axes_) {
              if (s.axis == axis && s.kept) {
                setRangeQuietly(s, s.keptMin, s.keptMax);
                zoomed_ = true;
                if (s.horizontal) announceX();  // a histogram counts its bins again over it
              }
            }
          });
        } else {
          a.kept = false;
        }
      }
      updateZoomed();
    };
    if (auto* v = qobject_cast<QValueAxis*>(axis)) connect(v, &QValueAxis::rangeChanged, this, rehome);
    if (auto* l = qobject_cast<QLogValueAxis*>(axis)) connect(l, &QLogValueAxis::rangeChanged, this, rehome);
  }
}

void InteractiveChartView::updateZoomed() {
  zoomed_ = std::any_of(axes_.begin(), axes_.end(), [this](const AxisState& a) {
    double l = 0, h = 0;
    bool g = false;
    return rangeOf(a.axis, &l, &h, &g) && (l != a.homeMin || h != a.homeMax);
  });
}

void InteractiveChartView::announceX() {
  if (muted_) return;
  for (const AxisState& a : axes_) {
    double lo = 0, hi = 0;
    bool log = false;
    if (a.horizontal && rangeOf(a.axis, &lo, &hi, &log)) {
      emit xRangeChanged(lo, hi);
      return;
    }
  }
}

void InteractiveChartView::showXRange(double lo, double hi) {
  trackAxes();
  for (AxisState& a : axes_) {
    if (a.horizontal) setRangeQuietly(a, lo, hi);
  }
  updateZoomed();
}

std::pair<double, double> InteractiveChartView::homeXRange() const {
  for (const AxisState& a : axes_) {
    if (a.horizontal) return {a.homeMin, a.homeMax};
  }
  return {0.0, 0.0};
}

void InteractiveChartView::setRangeQuietly(AxisState& a, double lo, double hi) {
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi)) return;
  internal_ = true;
  if (a.horizontal) {
    a.kept = lo != a.homeMin || hi != a.homeMax;
    a.keptMin = lo;
    a.keptMax = hi;
  }
  if (auto* v = qobject_cast<QValueAxis*>(a.axis)) setAxisRange(v, lo, hi);
  else if (auto* l = qobject_cast<QLogValueAxis*>(a.axis)) l->setRange(lo, hi);
  internal_ = false;
}

void InteractiveChartView::zoomAt(const QPoint& viewPos, double factor, bool bothAxes) {
  trackAxes();
  const QRectF plot = chart()->plotArea();
  const QPointF p = chart()->mapFromScene(mapToScene(viewPos));
  if (!plot.contains(p) || factor <= 0) return;
  for (AxisState& a : axes_) {
    if (!a.horizontal && !bothAxes) continue;
    double lo = 0, hi = 0;
    bool log = false;
    if (!rangeOf(a.axis, &lo, &hi, &log)) continue;
    const double f = a.horizontal ? (p.x() - plot.left()) / plot.width() : (plot.bottom() - p.y()) / plot.height();
    const double l0 = log ? std::log(lo) : lo, h0 = log ? std::log(hi) : hi;
    const double c = l0 + f * (h0 - l0), span = (h0 - l0) / factor;
    const double nl = c - f * span, nh = nl + span;
    setRangeQuietly(a, log ? std::exp(nl) : nl, log ? std::exp(nh) : nh);
  }
  zoomed_ = true;
  announceX();
  updateCrosshair(viewPos);
}

void InteractiveChartView::zoomToRect(const QPoint& a, const QPoint& b) {
  trackAxes();
  const QRectF plot = chart()->plotArea();
  const QRectF r = QRectF(chart()->mapFromScene(mapToScene(a)), chart()->mapFromScene(mapToScene(b))).normalized() & plot;
  if (r.width() < 2 || r.height() < 2) return;
  for (AxisState& s : axes_) {
    if (!s.horizontal && xOnly_) continue;
    double lo = 0, hi = 0;
    bool log = false;
    if (!rangeOf(s.axis, &lo, &hi, &log)) continue;
    const double f0 = s.horizontal ? (r.left() - plot.left()) / plot.width() : (plot.bottom() - r.bottom()) / plot.height();
    const double f1 = s.horizontal ? (r.right() - plot.left()) / plot.width() : (plot.bottom() - r.top()) / plot.height();
    const double l0 = log ? std::log(lo) : lo, h0 = log ? std::log(hi) : hi;
    const double nl = l0 + f0 * (h0 - l0), nh = l0 + f1 * (h0 - l0);
    setRangeQuietly(s, log ? std::exp(nl) : nl, log ? std::exp(nh) : nh);
  }
  zoomed_ = true;
  announceX();
}

void InteractiveChartView::panBy(const QPointF& pixels) {
  trackAxes();
  const QRectF plot = chart()->plotArea();
  if (plot.width() <= 0 || plot.height() <= 0) return;
  for (AxisState& a : axes_) {
    if (!a.horizontal && xOnly_) continue;
    double lo = 0, hi = 0;
    bool log = false;
    if (!rangeOf(a.axis, &lo, &hi, &log)) continue;
    // Dragging right shows what was left of the view; dragging up shows what was below.
    const double f = a.horizontal ? -pixels.x() / plot.width() : pixels.y() / plot.height();
    const double l0 = log ? std::log(lo) : lo, h0 = log ? std::log(hi) : hi;
    const double shift = f * (h0 - l0);
    setRangeQuietly(a, log ? std::exp(l0 + shift) : l0 + shift, log ? std::exp(h0 + shift) : h0 + shift);
  }
  zoomed_ = true;
  announceX();
}

void InteractiveChartView::resetZoom() {
  trackAxes();
  for (AxisState& a : axes_) {
    setRangeQuietly(a, a.homeMin, a.homeMax);
    a.kept = false;
  }
  zoomed_ = false;
  announceX();
}

QPointF InteractiveChartView::valueAt(const QPoint& viewPos) const {
  const QList<QAbstractSeries*> series = chart()->series();
  return chart()->mapToValue(chart()->mapFromScene(mapToScene(viewPos)), series.isEmpty() ? nullptr : series.front());
}

QString InteractiveChartView::readoutAt(const QPoint& viewPos) const {
  const QPointF p = chart()->mapFromScene(mapToScene(viewPos));
  if (!chart()->plotArea().contains(p)) return {};
  QStringList lines;
  bool xNamed = false;
  for (QAbstractSeries* s : chart()->series()) {
    if (!s->isVisible() || s->property("kvscopeNoReadout").toBool()) continue;
    const QPointF v = chart()->mapToValue(p, s);
    if (auto* xy = qobject_cast<QXYSeries*>(s)) {
      const QList<QPointF> points = xy->points();
      const QPointF* n = nearestByX(points, v.x());
      if (!n) continue;
      if (!xNamed) {
        const QList<QAbstractAxis*> xs = s->attachedAxes();
        QString xTitle;
        for (QAbstractAxis* axis : xs) {
          if (axis->orientation() == Qt::Horizontal) xTitle = axis->titleText();
        }
        lines << (xLabeler_ ? xLabeler_(n->x())
                            : (xTitle.isEmpty() ? QStringLiteral("x") : xTitle) + QStringLiteral(" = ") + number(n->x()));
        xNamed = true;
      }
      lines << s->name() + QStringLiteral(": ") + number(n->y());
    } else if (auto* bars = qobject_cast<QBarSeries*>(s)) {
      const int i = static_cast<int>(std::lround(v.x()));
      if (i < 0) continue;
      if (!xNamed) {
        QString category = QString::number(i);
        QString title;
        for (QAbstractAxis* axis : s->attachedAxes()) {
          if (auto* c = qobject_cast<QBarCategoryAxis*>(axis)) {
            if (i < c->count()) category = c->at(i);
            title = c->titleText();
          }
        }
        lines << (xLabeler_ ? xLabeler_(i) : (title.isEmpty() ? QString() : title + QStringLiteral(" ")) + category);
        xNamed = true;
      }
      for (QBarSet* set : bars->barSets()) {
        if (i < set->count()) lines << set->label() + QStringLiteral(": ") + number(set->at(i));
      }
    }
  }
  return xNamed ? lines.join(QLatin1Char('\n')) : QString();
}

void InteractiveChartView::trackSeries() {
  // New values under a still cursor (another channel, layer or spec) refresh the readout, so that
  // it never shows the values of data that is gone.
  for (QAbstractSeries* s : chart()->series()) {
    auto* xy = qobject_cast<QXYSeries*>(s);
    // A mark on the series itself: its address may be a new series' once it is deleted.
    if (!xy || xy->property("kvscopeReadoutTracked").toBool()) continue;
    xy->setProperty("kvscopeReadoutTracked", true);
    connect(xy, &QXYSeries::pointsReplaced, this, &InteractiveChartView::refreshReadout);
  }
}

void InteractiveChartView::refreshReadout() {
  if (readout_.isEmpty() || refreshPending_) return;
  refreshPending_ = true;
  // Once the view has replaced all its series and set its ranges.
  QTimer::singleShot(0, this, [this] {
    refreshPending_ = false;
    if (!readout_.isEmpty()) updateCrosshair(hoverPos_);
  });
}

void InteractiveChartView::updateCrosshair(const QPoint& viewPos) {
  trackSeries();
  hoverPos_ = viewPos;
  const QRectF plot = chart()->plotArea();
  const QPointF p = chart()->mapFromScene(mapToScene(viewPos));
  readout_ = readoutAt(viewPos);
  if (readout_.isEmpty() || !plot.contains(p)) {
    hideCrosshair();
    return;
  }
  if (!line_) {
    // Children of the chart: they move and scale with it and die with it.
    line_ = new QGraphicsLineItem(chart());
    QPen pen(palette().color(QPalette::Text));
    pen.setStyle(Qt::DotLine);
    pen.setCosmetic(true);
    line_->setPen(pen);
    box_ = new QGraphicsRectItem(chart());
    QColor back = palette().color(QPalette::Base);
    back.setAlpha(225);
    box_->setBrush(back);
    box_->setPen(QPen(palette().color(QPalette::Mid)));
    text_ = new QGraphicsSimpleTextItem(box_);
    text_->setBrush(palette().color(QPalette::Text));
    for (QGraphicsItem* item : std::initializer_list<QGraphicsItem*>{line_, box_}) {
      item->setZValue(1000);
      item->setData(0, QStringLiteral("kvscopeOverlay"));  // renderChart leaves these out of exports
    }
  }
  line_->setLine(p.x(), plot.top(), p.x(), plot.bottom());
  // The readout, then how to zoom (dimmer, in the same box).
  text_->setText(readout_ + QStringLiteral("\n\n") +
                 tr("wheel: zoom · drag: box zoom · right drag: pan · double-click: reset") +
                 (hint_.isEmpty() ? QString() : QStringLiteral("\n") + hint_));
  const QRectF textRect = text_->boundingRect();
  // The box sits in the plot's upper corner away from the cursor, so it never hides what is read.
  const double x = p.x() < plot.center().x() ? plot.right() - textRect.width() - 12 : plot.left() + 4;
  box_->setRect(0, 0, textRect.width() + 8, textRect.height() + 6);
  box_->setPos(x, plot.top() + 4);
  text_->setPos(4, 3);
  line_->show();
  box_->show();
}

void InteractiveChartView::hideCrosshair() {
  readout_.clear();
  if (line_) line_->hide();
  if (box_) box_->hide();
}

void InteractiveChartView::wheelEvent(QWheelEvent* event) {
  const double steps = event->angleDelta().y() / 120.0;
  if (steps == 0) return;
  const double factor = std::pow(1.25, steps);
  const Qt::KeyboardModifiers m = event->modifiers();
  const QPoint pos = event->position().toPoint();
  if (m & Qt::ShiftModifier) {
    // y only: zoom both, then put x back.
    trackAxes();
    std::vector<std::pair<double, double>> xs;
    for (AxisState& a : axes_) {
      double lo = 0, hi = 0;
      bool log = false;
      (void)rangeOf(a.axis, &lo, &hi, &log);
      xs.emplace_back(lo, hi);
    }
    muted_ = true;
    zoomAt(pos, factor, true);
    muted_ = false;
    for (size_t i = 0; i < axes_.size(); ++i) {
      if (axes_[i].horizontal) setRangeQuietly(axes_[i], xs[i].first, xs[i].second);
    }
  } else {
    zoomAt(pos, factor, (m & Qt::ControlModifier) && !xOnly_);
  }
  event->accept();
}

void InteractiveChartView::mousePressEvent(QMouseEvent* event) {
  pressPos_ = lastPos_ = event->position().toPoint();
  moved_ = false;
  drag_ = pointerDragFor(*event);
  if (drag_ == PointerDrag::Pan) setCursor(Qt::ClosedHandCursor);
  event->accept();
}

void InteractiveChartView::mouseMoveEvent(QMouseEvent* event) {
  const QPoint pos = event->position().toPoint();
  if (drag_ != PointerDrag::None && (pos - pressPos_).manhattanLength() > kClickSlop) moved_ = true;
  if (drag_ == PointerDrag::Pan && moved_) {
    panBy(QPointF(pos - lastPos_));
  } else if (drag_ == PointerDrag::Band && moved_) {
    if (!band_) band_ = new QRubberBand(QRubberBand::Rectangle, viewport());
    QRect r = QRect(pressPos_, pos).normalized();
    if (xOnly_) {
      const QRect plot = mapFromScene(chart()->mapToScene(chart()->plotArea())).boundingRect();
      r.setTop(plot.top());
      r.setBottom(plot.bottom());
    }
    band_->setGeometry(r);
    band_->show();
  }
  lastPos_ = pos;
  updateCrosshair(pos);
  QGraphicsView::mouseMoveEvent(event);  // keeps the series' hover signals
}

void InteractiveChartView::mouseReleaseEvent(QMouseEvent* event) {
  const QPoint pos = event->position().toPoint();
  if (drag_ == PointerDrag::Band) {
    if (band_) band_->hide();
    if (moved_) {
      QPoint a = pressPos_, b = pos;
      if (xOnly_) {
        const QRectF plot = chart()->plotArea();
        const QPoint top = mapFromScene(chart()->mapToScene(plot.topLeft()));
        const QPoint bottom = mapFromScene(chart()->mapToScene(plot.bottomRight()));
        a.setY(top.y() + 1);
        b.setY(bottom.y() - 1);
      }
      zoomToRect(a, b);
    } else if (chart()->plotArea().contains(chart()->mapFromScene(mapToScene(pos)))) {
      emit clicked(valueAt(pos));
    }
  }
  if (drag_ == PointerDrag::Pan) unsetCursor();
  drag_ = PointerDrag::None;
  event->accept();
}

void InteractiveChartView::mouseDoubleClickEvent(QMouseEvent* event) {
  resetZoom();
  event->accept();
}

void InteractiveChartView::keyPressEvent(QKeyEvent* event) {
  if (event->key() == Qt::Key_Escape && zoomed_) {
    resetZoom();
    event->accept();
    return;
  }
  QChartView::keyPressEvent(event);
}

void InteractiveChartView::leaveEvent(QEvent* event) {
  hideCrosshair();
  QChartView::leaveEvent(event);
}

}  // namespace kvscope::ui
