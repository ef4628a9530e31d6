// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/export/chart_render.h"

#include <QAbstractAxis>
#include <QCoreApplication>
#include <QEvent>
#include <QFontMetricsF>
#include <QGraphicsItem>
#include <QGraphicsLayout>
#include <QGraphicsScene>
#include <QGraphicsSimpleTextItem>
#include <QGraphicsTextItem>
#include <QGuiApplication>
#include <QLegend>
#include <QLegendMarker>
#include <QLogValueAxis>
#include <QPalette>
#include <QRegularExpression>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "ui/export/chart_ticks.h"

namespace kvscope::ui {

namespace {

// The property keepNiceTicks stores an axis's tick limit in (ui/export/chart_ticks.cpp).
constexpr const char* kMaxTicksProperty = "kvscopeMaxTicks";

bool isElided(const QString& text) {
  return text.endsWith(QLatin1String("...")) || text.endsWith(QChar(0x2026));
}

void collectElided(const QGraphicsItem* item, QStringList& out) {
  for (const QGraphicsItem* child : item->childItems()) {
    if (!child->isVisible()) continue;
    if (const auto* text = dynamic_cast<const QGraphicsTextItem*>(child)) {
      if (isElided(text->toPlainText())) out << text->toPlainText();
    } else if (const auto* simple = dynamic_cast<const QGraphicsSimpleTextItem*>(child)) {
      if (isElided(simple->text())) out << simple->text();
    }
    collectElided(child, out);
  }
}

// Lays the chart out for `size` now (it would on a posted LayoutRequest).
void layOut(QChart* chart, const QRectF& geometry) {
  chart->setGeometry(geometry);
  if (QGraphicsLayout* layout = chart->layout()) layout->activate();
  QCoreApplication::sendPostedEvents(chart, QEvent::LayoutRequest);
}

// What an export changes on a chart to make its texts fit, undone afterwards in reverse order.
class Fitting {
 public:
  explicit Fitting(QChart* chart) : chart_(chart) {}
  Fitting(const Fitting&) = delete;
  Fitting& operator=(const Fitting&) = delete;
  ~Fitting() {
    for (auto it = undo_.rbegin(); it != undo_.rend(); ++it) (*it)();
  }

  /// Fewer ticks on a short plot: Qt Charts elides every label ("…") of a value axis whose ticks
  /// are closer than a label's height; each tick wants 1.6 label heights of the laid-out plot.
  /// True when an axis changed.
  bool fitTicks() {
    bool changed = false;
    const double height = chart_->plotArea().height();
    for (QAbstractAxis* a : chart_->axes(Qt::Vertical)) {
      auto* axis = qobject_cast<QValueAxis*>(a);
      if (!axis || !axis->property(kMaxTicksProperty).isValid()) continue;
      const double label = QFontMetricsF(axis->labelsFont()).height();
      const int fit = std::max(2, static_cast<int>(height / (1.6 * label)));
      changed |= fit < axis->property(kMaxTicksProperty).toInt();
      setMaxTicks(axis, fit);
    }
    // A log axis labels every power of its base: on a short plot, every k-th decade (base 10^k)
    // without minor ticks, so that its labels fit the same way.
    for (QAbstractAxis* a : chart_->axes(Qt::Vertical)) {
      auto* axis = qobject_cast<QLogValueAxis*>(a);
      if (!axis || !axis->isVisible() || !(axis->min() > 0) || !(axis->max() > axis->min()) || !(axis->base() > 1)) continue;
      const double steps = std::log(axis->max() / axis->min()) / std::log(axis->base());
      const int k = logLabelStep(steps, height, axis->labelsFont());
      if (k > 1) changed |= rebase(axis, k);
    }
    return changed;
  }

  /// One step of the rule for what is still shortened after a layout; false when no step is left.
  /// Titles that are wider than their room take their short form (the "kvscopeShortTitle"
  /// property), lose a trailing "(unit)", then go (the caption under the figure names layer, head
  /// and specs); a legend whose labels are cut moves below the plot, then takes a smaller font;
  /// other cut labels are tick labels: fewer ticks, down to two, then a smaller font.
  bool relieve(const QStringList& elided) {
    bool changed = false;
    const double width = chart_->size().width() - chart_->margins().left() - chart_->margins().right();
    if (!chart_->title().isEmpty() && QFontMetricsF(chart_->titleFont()).horizontalAdvance(chart_->title()) > width) {
      changed |= shortenChartTitle();
    }
    const QRectF plot = chart_->plotArea();
    for (QAbstractAxis* axis : chart_->axes()) {
      if (!axis->isTitleVisible() || axis->titleText().isEmpty()) continue;
      const double room = axis->orientation() == Qt::Vertical ? plot.height() : plot.width();
      if (QFontMetricsF(axis->titleFont()).horizontalAdvance(axis->titleText()) > room) changed |= shortenAxisTitle(axis);
    }
    bool legendCut = false, ticksCut = false;
    for (const QString& text : elided) {
      const QString prefix = text.endsWith(QChar(0x2026)) ? text.chopped(1) : text.chopped(3);
      bool legend = false;
      if (!prefix.isEmpty() && chart_->legend()->isVisible()) {
        for (QLegendMarker* m : chart_->legend()->markers()) legend |= m->label().startsWith(prefix);
      }
      (legend ? legendCut : ticksCut) = true;
    }
    if (legendCut) changed |= relieveLegend();
    if (ticksCut && !changed) changed |= relieveTicks();
    if (!elided.isEmpty() && !changed) changed |= giveUpRoom();
    return changed;
  }

 private:
  template <class F>
  void remember(F undo) {
    undo_.emplace_back(std::move(undo));
  }

  // A vertical axis is widened to the new interval's multiples (as the views range it), so that
  // a coarser interval still labels both ends, not only the 0 between them.
  void setMaxTicks(QValueAxis* axis, int ticks) {
    const QVariant before = axis->property(kMaxTicksProperty);
    if (!before.isValid() || ticks >= before.toInt()) return;
    const double lo = axis->min(), hi = axis->max();
    remember([axis, before, lo, hi] {
      axis->setProperty(kMaxTicksProperty, before);
      setAxisRange(axis, lo, hi);
    });
    axis->setProperty(kMaxTicksProperty, ticks);
    if (axis->orientation() == Qt::Vertical) {
      const NiceRange r = niceRange(lo, hi, ticks);
      setAxisRange(axis, r.lo, r.hi);
    } else {
      setAxisRange(axis, lo, hi);
    }
  }

  // Labels every k-th power of the axis's base, without minor ticks.
  bool rebase(QLogValueAxis* axis, int k) {
    const double base = axis->base();
    const int minor = axis->minorTickCount();
    remember([axis, base, minor] {
      axis->setBase(base);
      axis->setMinorTickCount(minor);
    });
    axis->setBase(std::pow(base, k));
    axis->setMinorTickCount(0);
    return true;
  }

  bool shortenChartTitle() {
    const QString title = chart_->title();
    const QString shorter = chart_->property("kvscopeShortTitle").toString();
    remember([this, title] { chart_->setTitle(title); });
    chart_->setTitle(!shorter.isEmpty() && shorter != title ? shorter : QString());
    return true;
  }

  bool shortenAxisTitle(QAbstractAxis* axis) {
    const QString title = axis->titleText();
    const QString shorter = axis->property("kvscopeShortTitle").toString();
    static const QRegularExpression unit(QStringLiteral("\\s*\\([^()]*\\)$"));
    QString next;
    if (!shorter.isEmpty() && title != shorter && title.size() > shorter.size()) next = shorter;
    else if (title.contains(unit)) next = QString(title).remove(unit);
    remember([axis, title] {
      axis->setTitleText(title);
      axis->setTitleVisible(true);
    });
    if (next.isEmpty()) axis->setTitleVisible(false);
    else axis->setTitleText(next);
    return true;
  }

  bool relieveLegend() {
    QLegend* legend = chart_->legend();
    const Qt::Alignment alignment = legend->alignment();
    if (alignment == Qt::AlignLeft || alignment == Qt::AlignRight) {
      remember([legend, alignment] { legend->setAlignment(alignment); });
      legend->setAlignment(Qt::AlignBottom);
      return true;
    }
    if (legendShrunk_ < 2) {
      const QFont font = legend->font();
      remember([legend, font] { legend->setFont(font); });
      QFont smaller = font;
      smaller.setPointSizeF(font.pointSizeF() * 0.85);
      legend->setFont(smaller);
      ++legendShrunk_;
      return true;
    }
    return false;
  }

  bool relieveTicks() {
    bool changed = false;
    for (QAbstractAxis* a : chart_->axes()) {
      auto* axis = qobject_cast<QValueAxis*>(a);
      if (!axis) continue;
      const QVariant now = axis->property(kMaxTicksProperty);
      if (!now.isValid() || now.toInt() <= 2) continue;
      setMaxTicks(axis, std::max(2, now.toInt() - 2));
      changed = true;
    }
    if (changed || ticksShrunk_ >= 1) return changed;
    ++ticksShrunk_;
    for (QAbstractAxis* axis : chart_->axes()) {
      const QFont font = axis->labelsFont();
      remember([axis, font] { axis->setLabelsFont(font); });
      QFont smaller = font;
      smaller.setPointSizeF(font.pointSizeF() * 0.85);
      axis->setLabelsFont(smaller);
    }
    return true;
  }

  // A plot too short for its texts (Qt Charts cuts what is taller than its room): the chart's
  // title goes first, then the horizontal axes' titles. The legend stays: it names the series.
  bool giveUpRoom() {
    if (!chart_->title().isEmpty()) return shortenChartTitle();
    for (QAbstractAxis* axis : chart_->axes(Qt::Horizontal)) {
      if (axis->isTitleVisible() && !axis->titleText().isEmpty()) {
        remember([axis] { axis->setTitleVisible(true); });
        axis->setTitleVisible(false);
        return true;
      }
    }
    return false;
  }

  QChart* chart_;
  std::vector<std::function<void()>> undo_;
  int legendShrunk_ = 0;
  int ticksShrunk_ = 0;
};

}  // namespace

void applyPaletteTheme(QChart* chart) {
  const bool dark = QGuiApplication::palette().color(QPalette::Window).lightness() < 128;
  chart->setTheme(dark ? QChart::ChartThemeDark : QChart::ChartThemeLight);
}

QStringList elidedTexts(const QChart* chart) {
  QStringList out;
  collectElided(chart, out);
  return out;
}

void renderChart(QChart* chart, QPainter& painter, const QRectF& target) {
  const QRectF previous = chart->geometry();
  // A figure has no room to spare: the chart's outer margins (20 px a side on screen) shrink
  // with small targets, so that a column-wide export keeps its plot and labels.
  const QMargins margins = chart->margins();
  const int margin = std::min(margins.top(), std::max(2, static_cast<int>(std::min(target.width(), target.height()) / 40)));
  chart->setMargins(QMargins(margin, margin, margin, margin));
  {
    Fitting fitting(chart);
    const QRectF geometry(previous.topLeft(), target.size());
    layOut(chart, geometry);
    if (fitting.fitTicks()) layOut(chart, geometry);
    // Nothing is drawn cut: each pass lays the chart out again after one step of the rule.
    for (int pass = 0; pass < 12; ++pass) {
      const QStringList elided = elidedTexts(chart);
      if (elided.isEmpty() || !fitting.relieve(elided)) break;
      layOut(chart, geometry);
    }
    // The crosshair and its readout (ui/widgets/chart_view.h) belong to the screen, not the figure.
    QList<QGraphicsItem*> hidden;
    for (QGraphicsItem* item : chart->childItems()) {
      if (item->data(0).toString() == QLatin1String("kvscopeOverlay") && item->isVisible()) {
        item->hide();
        hidden << item;
      }
    }
    chart->scene()->render(&painter, target, geometry);
    for (QGraphicsItem* item : hidden) item->show();
  }
  chart->setMargins(margins);
  layOut(chart, previous);
}

}  // namespace kvscope::ui
