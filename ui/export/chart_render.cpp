// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/export/chart_render.h"

#include <QCoreApplication>
#include <QEvent>
#include <QGraphicsItem>
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
  chart->setGeometry(previous);
  if (QGraphicsLayout* layout = chart->layout()) layout->activate();
}

}  // namespace kvscope::ui
