// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/export/chart_render.h"

#include <QCoreApplication>
#include <QEvent>
#include <QGraphicsLayout>
#include <QGraphicsScene>
#include <QGuiApplication>
#include <QPalette>

namespace kvscope::ui {

void applyPaletteTheme(QChart* chart) {
  const bool dark = QGuiApplication::palette().color(QPalette::Window).lightness() < 128;
  chart->setTheme(dark ? QChart::ChartThemeDark : QChart::ChartThemeLight);
}

void renderChart(QChart* chart, QPainter& painter, const QRectF& target) {
  const QRectF previous = chart->geometry();
  chart->setGeometry(QRectF(previous.topLeft(), target.size()));
  // The chart lays itself out on a posted LayoutRequest; run it now so the export sees it.
  if (QGraphicsLayout* layout = chart->layout()) layout->activate();
  QCoreApplication::sendPostedEvents(chart, QEvent::LayoutRequest);
  chart->scene()->render(&painter, target, QRectF(previous.topLeft(), target.size()));
  chart->setGeometry(previous);
  if (QGraphicsLayout* layout = chart->layout()) layout->activate();
}

}  // namespace kvscope::ui
