// SPDX-License-Identifier: GPL-3.0-or-later
// Draws a QChart at an arbitrary size (for exports), independent of its view's size.
#pragma once

#include <QChart>
#include <QPainter>
#include <QRectF>

namespace kvscope::ui {

/// Picks the light or dark chart theme to match the application palette (which follows the
/// system), keeping the chart's series colours readable on either.
void applyPaletteTheme(QChart* chart);

/// Lays `chart` out for `target`'s size, renders it there and restores its previous size.
void renderChart(QChart* chart, QPainter& painter, const QRectF& target);

}  // namespace kvscope::ui
