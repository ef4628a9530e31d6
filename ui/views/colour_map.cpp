// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/views/colour_map.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace kvscope::ui {

QRgb colourAt(double t) {
  // Nine samples of viridis, interpolated linearly; enough for a smooth ramp.
  static constexpr std::array<std::array<double, 3>, 9> stops{{
      {0.267, 0.005, 0.329}, {0.283, 0.141, 0.458}, {0.254, 0.265, 0.530},
      {0.207, 0.372, 0.553}, {0.164, 0.471, 0.558}, {0.128, 0.567, 0.551},
      {0.135, 0.659, 0.518}, {0.478, 0.821, 0.318}, {0.993, 0.906, 0.144},
  }};
  if (!std::isfinite(t)) return qRgb(255, 0, 255);  // NaN stands out in magenta
  t = std::clamp(t, 0.0, 1.0) * static_cast<double>(stops.size() - 1);
  const auto i = std::min(static_cast<size_t>(t), stops.size() - 2);
  const double f = t - static_cast<double>(i);
  const auto mix = [&](int k) {
    return static_cast<int>(std::lround(255.0 * (stops[i][k] * (1 - f) + stops[i + 1][k] * f)));
  };
  return qRgb(mix(0), mix(1), mix(2));
}

QRgb divergingColourAt(double t) {
  // Blue (59, 76, 192) → near-white (242, 242, 242) → red (180, 4, 38), linear in each half.
  if (!std::isfinite(t)) return qRgb(255, 0, 255);
  t = std::clamp(t, -1.0, 1.0);
  const std::array<double, 3> mid{242, 242, 242};
  const std::array<double, 3> end = t < 0 ? std::array<double, 3>{59, 76, 192} : std::array<double, 3>{180, 4, 38};
  const double f = std::fabs(t);
  const auto mix = [&](int k) { return static_cast<int>(std::lround(mid[k] * (1 - f) + end[k] * f)); };
  return qRgb(mix(0), mix(1), mix(2));
}

}  // namespace kvscope::ui
