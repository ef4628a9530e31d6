// SPDX-License-Identifier: GPL-3.0-or-later
// Draws a QChart at an arbitrary size (for exports), independent of its view's size.
#pragma once

#include <QChart>
#include <QPainter>
#include <QRectF>
#include <QStringList>

namespace kvscope::ui {

/// Picks the light or dark chart theme to match the application palette (which follows the
/// system), keeping the chart's series colours readable on either.
void applyPaletteTheme(QChart* chart);

/// The texts Qt Charts drew shortened ("...") in `chart` as laid out now.
[[nodiscard]] QStringList elidedTexts(const QChart* chart);
/// Lays `chart` out for `target`'s size, renders it there and restores its previous size and
/// texts. Nothing is drawn cut: what Qt Charts would shorten is fitted by a rule (chart_render.cpp,
/// docs/gui.md § Export): short titles, legend below, fewer ticks, smaller fonts.
void renderChart(QChart* chart, QPainter& painter, const QRectF& target);

}  // namespace kvscope::ui
