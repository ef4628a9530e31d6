// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/export/chart_ticks.h"

#include <QFontMetricsF>
#include <QLogValueAxis>
#include <QObject>
#include <QVariant>
#include <QValueAxis>

#include <algorithm>
#include <cmath>

namespace kvscope::ui {

double niceTickInterval(double span, int maxTicks) {
  if (!(span > 0) || !std::isfinite(span)) return 1.0;
  maxTicks = std::max(1, maxTicks);
  const double raw = span / maxTicks;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    // A small tolerance: 0.3 / 3 must give 0.1, not 0.2 because of rounding.
    if (m * magnitude >= raw * (1 - 1e-9)) return m * magnitude;
  }
  return 10 * magnitude;
}

int tickDecimals(double interval) {
  if (!(interval > 0) || !std::isfinite(interval)) return 0;
  for (int d = 0; d < 12; ++d) {
    const double scaled = interval * std::pow(10.0, d);
    if (std::abs(scaled - std::round(scaled)) < 1e-6 * std::max(1.0, scaled)) return d;
  }
  return 12;
}

NiceRange niceRange(double lo, double hi, int maxTicks) {
  NiceRange r;
  if (!std::isfinite(lo) || !std::isfinite(hi)) return r;
  if (hi < lo) std::swap(lo, hi);
  if (hi - lo <= 0) {
    if (lo == 0) return r;
    // One value: a unit of its own magnitude around it.
    const double half = std::pow(10.0, std::floor(std::log10(std::abs(lo))));
    lo -= half;
    hi += half;
  }
  r.interval = niceTickInterval(hi - lo, maxTicks);
  r.lo = std::floor(lo / r.interval + 1e-9) * r.interval;
  r.hi = std::ceil(hi / r.interval - 1e-9) * r.interval;
  if (r.hi <= r.lo) r.hi = r.lo + r.interval;
  return r;
}

namespace {

constexpr const char* kMaxTicks = "kvscopeMaxTicks";

void applyTicksFor(QValueAxis* axis, int maxTicks, double lo, double hi) {
  const double span = hi - lo;
  const double interval = niceTickInterval(span > 0 ? span : 1.0, maxTicks);
  axis->setTickType(QValueAxis::TicksDynamic);
  axis->setTickAnchor(0.0);
  axis->setTickInterval(interval);
  // Large round numbers read better without an exponent; tiny ones need it.
  const double top = std::max(std::abs(lo), std::abs(hi));
  if (top > 0 && (top >= 1e7 || top < 1e-4)) axis->setLabelFormat(QStringLiteral("%.3g"));
  else axis->setLabelFormat(QStringLiteral("%.") + QString::number(tickDecimals(interval)) + QStringLiteral("f"));
}

void applyTicks(QValueAxis* axis, int maxTicks) { applyTicksFor(axis, maxTicks, axis->min(), axis->max()); }

}  // namespace

void keepNiceTicks(QValueAxis* axis, int maxTicks) {
  axis->setProperty(kMaxTicks, maxTicks);
  applyTicks(axis, maxTicks);
  // The limit is read when the range changes: an export lowers it for a short figure (chart_render.cpp).
  QObject::connect(axis, &QValueAxis::rangeChanged, axis, [axis] { applyTicks(axis, axis->property(kMaxTicks).toInt()); });
}

void setAxisRange(QValueAxis* axis, double lo, double hi) {
  const QVariant maxTicks = axis->property(kMaxTicks);
  if (maxTicks.isValid() && hi > lo) applyTicksFor(axis, maxTicks.toInt(), lo, hi);
  axis->setRange(lo, hi);
}

QString logLabelFormat(double lo, double hi) {
  // Plain numbers while every decade prints short and plain (0.001 … 100000); else every label in
  // exponent form. "%g" alone switched within one axis (100000, then 1e+06).
  return lo >= 1e-3 * (1 - 1e-9) && hi <= 1e5 * (1 + 1e-9) ? QStringLiteral("%g") : QStringLiteral("%.0e");
}

void keepLogLabels(QLogValueAxis* axis) {
  axis->setLabelFormat(logLabelFormat(axis->min(), axis->max()));
  QObject::connect(axis, &QLogValueAxis::rangeChanged, axis,
                   [axis](qreal lo, qreal hi) { axis->setLabelFormat(logLabelFormat(lo, hi)); });
}

namespace {
// One label per decade: QLogValueAxis puts ticks at base^k, its minor ticks in between — over
// a few decades only: over many they crowd the plot into grey, and each is a scene item that
// every repaint draws (nine decades of a drift row's P made its repaint take twice as long).
int minorDecadeTicks(double decades) { return decades <= 4 + 1e-9 ? 8 : 0; }
}  // namespace

void setDecadeRange(QLogValueAxis* axis, double lo, double hi) {
  if (!(lo > 0) || !std::isfinite(lo)) lo = 1e-3;
  if (!(hi > lo) || !std::isfinite(hi)) hi = lo * 10;
  const double a = std::pow(10.0, std::floor(std::log10(lo) + 1e-9));
  double b = std::pow(10.0, std::ceil(std::log10(hi) - 1e-9));
  if (b <= a) b = a * 10;
  axis->setBase(10);
  axis->setLabelFormat(logLabelFormat(a, b));
  axis->setRange(a, b);
  axis->setMinorTickCount(minorDecadeTicks(std::log10(b / a)));
}

int logLabelStep(double steps, double height, const QFont& font) {
  const double label = QFontMetricsF(font).height();
  const int fit = std::max(2, static_cast<int>(height / (1.6 * label)));
  int k = 1;
  while (steps / k + 1 > fit && k < 64) ++k;
  return k;
}

void fitLogDecades(QLogValueAxis* axis, double height) {
  if (!(axis->min() > 0) || !(axis->max() > axis->min()) || !(height > 0)) return;
  const double decades = std::log10(axis->max() / axis->min());
  const int k = logLabelStep(decades, height, axis->labelsFont());
  axis->setBase(std::pow(10.0, k));
  axis->setMinorTickCount(k == 1 ? minorDecadeTicks(decades) : 0);
}

}  // namespace kvscope::ui
