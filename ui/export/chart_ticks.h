// SPDX-License-Identifier: GPL-3.0-or-later
// Round tick marks for every chart: intervals of 1, 2, 2.5 or 5 × 10^k, labels with just the
// decimals the interval needs, and a sensible axis when a chart has no data yet.
#pragma once

#include <QString>

class QValueAxis;
class QLogValueAxis;

class QFont;

namespace kvscope::ui {

/// The round interval (1, 2, 2.5 or 5 × 10^k) that splits `span` into at most `maxTicks` steps.
[[nodiscard]] double niceTickInterval(double span, int maxTicks = 6);

/// Decimals a label needs to show multiples of `interval` exactly (0 for 5, 1 for 0.5, 2 for 0.25).
[[nodiscard]] int tickDecimals(double interval);

/// `lo`, `hi` widened outward to multiples of their nice interval (an empty or degenerate range
/// becomes [0, 1], or a unit around the value).
struct NiceRange {
  double lo = 0, hi = 1, interval = 0.2;
};
[[nodiscard]] NiceRange niceRange(double lo, double hi, int maxTicks = 6);

/// Makes `axis` keep round ticks: every range change (data, zoom, pan) picks a nice interval
/// anchored at 0 and a label format with the decimals it needs. Call once per axis.
void keepNiceTicks(QValueAxis* axis, int maxTicks = 6);

/// Sets the range of an axis that keeps nice ticks, choosing the interval first: Qt lays the
/// ticks out for the new range before any slot on rangeChanged runs, and the old interval over
/// a much wider range would make it create hundreds of thousands of tick items.
void setAxisRange(QValueAxis* axis, double lo, double hi);

/// The label format of a log axis over [lo, hi]: every label in one notation ("%g" while all of
/// them print plain, 0.001 to 100000; "%.0e" otherwise).
[[nodiscard]] QString logLabelFormat(double lo, double hi);
/// Makes a log axis keep logLabelFormat for its range (data, zoom, pan). Call once per axis.
void keepLogLabels(QLogValueAxis* axis);

/// Sets a log axis to whole decades around [lo, hi] (lo > 0), so that its ticks are powers of 10.
void setDecadeRange(QLogValueAxis* axis, double lo, double hi);

/// How many powers of a log axis's base apart its labels must be to fit a plot `height` high:
/// Qt Charts elides every label ("…") of a vertical axis whose ticks are closer than a label's
/// height, so each label wants 1.6 label heights. `steps`: the powers of the base the range spans.
[[nodiscard]] int logLabelStep(double steps, double height, const QFont& font);
/// Labels every k-th decade of a vertical log axis with decade ticks (base 10^k, logLabelStep)
/// so that its labels fit a plot `height` high; minor ticks as setDecadeRange gives them at k = 1.
void fitLogDecades(QLogValueAxis* axis, double height);

}  // namespace kvscope::ui
