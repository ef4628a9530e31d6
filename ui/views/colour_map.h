// SPDX-License-Identifier: GPL-3.0-or-later
// A perceptually uniform colour map (viridis-like) for heat maps and their colour bars.
#pragma once

#include <QColor>

namespace kvscope::ui {

/// The colour of `t` in [0, 1] (clamped).
QRgb colourAt(double t);

/// A diverging colour for `t` in [−1, 1] (clamped): blue below 0, white at 0, red above, for
/// signed differences such as the A/B heat map's change in error.
QRgb divergingColourAt(double t);

}  // namespace kvscope::ui
