// SPDX-License-Identifier: GPL-3.0-or-later
// A perceptually uniform colour map (viridis-like) for heat maps and their colour bars.
#pragma once

#include <QColor>

namespace kvscope::ui {

/// The colour of `t` in [0, 1] (clamped).
QRgb colourAt(double t);

}  // namespace kvscope::ui
