// SPDX-License-Identifier: GPL-3.0-or-later
// Bounds on what a mapping file may declare, shared by its parser (mapping.cpp) and the dump
// reader that applies it (dump.cpp).
#pragma once

namespace kvscope {

/// The most layers a mapping's `layers` (or a stacked 'layer' axis) may declare: more than any
/// model has, and well inside an int (a larger count is refused, not wrapped).
inline constexpr int kMaxMappingLayers = 1'000'000;

}  // namespace kvscope
