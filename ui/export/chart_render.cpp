// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/export/chart_render.h"

#include <QCoreApplication>
#include <QEvent>
#include <QGraphicsItem>
#include <QGraphicsLayout>
#include <QGraphicsScene>
#include <QGuiApplication>
#include <QPalette>

#include <QFontMetricsF>
#include <QLogValueAxis>
#include <QValueAxis>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "ui/export/chart_ticks.h"

namespace kvscope::ui {

namespace {
// The property keepNiceTicks stores an axis's tick limit in (ui/export/chart_ticks.cpp).
constexpr const char* kMaxTicksProperty = "kvscopeMaxTicks";
}  // namespace

void applyPaletteTheme(QChart* chart) {
  const bool dark = QGuiApplication::palette().color(QPalette::Window).lightness() < 128;
  chart->setTheme(dark ? QChart::ChartThemeDark : QChart::ChartThemeLight);
}

void renderChart(QChart* chart, QPainter& painter, const QRectF& target) {
  const QRectF previous = chart->geometry();
  // A figure has no room to spare: the chart's outer margins (20 px a side on screen) shrink
  // with small targets, so that a column-wide export keeps its plot and labels.
  const QMargins margins = chart->margins();
  const int margin = std::min(margins.top(), std::max(2, static_cast<int>(std::min(target.width(), target.height()) / 40)));
  chart->setMargins(QMargins(margin, margin, margin, margin));
  // Fewer ticks on a short chart: Qt Charts elides every label ("…") of a value axis whose ticks
  // are closer than a label's height. The estimate leaves the title, the x axis and the legend
  // about seven label heights; each tick wants 2.2.
  std::vector<std::pair<QValueAxis*, QVariant>> retick;
  for (QAbstractAxis* a : chart->axes(Qt::Vertical)) {
    auto* axis = qobject_cast<QValueAxis*>(a);
    const QVariant maxTicks = axis ? axis->property(kMaxTicksProperty) : QVariant();
    if (!maxTicks.isValid()) continue;
    const double label = QFontMetricsF(axis->labelsFont()).height();
    const int fit = std::max(2, static_cast<int>((target.height() - 7 * label) / (2.2 * label)));
    if (fit >= maxTicks.toInt()) continue;
    retick.emplace_back(axis, maxTicks);
    axis->setProperty(kMaxTicksProperty, fit);
    setAxisRange(axis, axis->min(), axis->max());
  }
  // A log axis labels every power of its base: on a short chart, every k-th decade (base 10^k),
  // without minor ticks, so that its labels fit the same way.
  struct Rebased {
    QLogValueAxis* axis;
    double base;
    int minor;
  };
  std::vector<Rebased> rebased;
  for (QAbstractAxis* a : chart->axes(Qt::Vertical)) {
    auto* axis = qobject_cast<QLogValueAxis*>(a);
    if (!axis || !axis->isVisible() || !(axis->min() > 0) || !(axis->max() > axis->min()) || !(axis->base() > 1)) continue;
    const double label = QFontMetricsF(axis->labelsFont()).height();
    const int fit = std::max(2, static_cast<int>((target.height() - 7 * label) / (2.2 * label)));
    const double steps = std::log(axis->max() / axis->min()) / std::log(axis->base());
    int k = 1;
    while (steps / k + 1 > fit && k < 64) ++k;
    if (k == 1) continue;
    rebased.push_back({axis, axis->base(), axis->minorTickCount()});
    axis->setBase(std::pow(axis->base(), k));
    axis->setMinorTickCount(0);
  }
  chart->setGeometry(QRectF(previous.topLeft(), target.size()));
  // The chart lays itself out on a posted LayoutRequest; run it now so the export sees it.
  if (QGraphicsLayout* layout = chart->layout()) layout->activate();
  QCoreApplication::sendPostedEvents(chart, QEvent::LayoutRequest);
  // The crosshair and its readout (ui/widgets/chart_view.h) belong to the screen, not the figure.
  QList<QGraphicsItem*> hidden;
  for (QGraphicsItem* item : chart->childItems()) {
    if (item->data(0).toString() == QLatin1String("kvscopeOverlay") && item->isVisible()) {
      item->hide();
      hidden << item;
    }
  }
  chart->scene()->render(&painter, target, QRectF(previous.topLeft(), target.size()));
  for (QGraphicsItem* item : hidden) item->show();
  chart->setMargins(margins);
  for (const auto& [axis, maxTicks] : retick) {
    axis->setProperty(kMaxTicksProperty, maxTicks);
    setAxisRange(axis, axis->min(), axis->max());
  }
  for (const Rebased& r : rebased) {
    r.axis->setBase(r.base);
    r.axis->setMinorTickCount(r.minor);
  }
  chart->setGeometry(previous);
  if (QGraphicsLayout* layout = chart->layout()) layout->activate();
}

}  // namespace kvscope::ui
