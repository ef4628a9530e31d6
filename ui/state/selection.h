// SPDX-License-Identifier: GPL-3.0-or-later
// What is selected. The window (the controller) owns the one Selection; views get it through
// View::takeSelection and report their controls' changes back by signals, so that no view keeps
// a copy of its own.
#pragma once

#include <algorithm>

namespace kvscope::ui {

/// What is selected; every view follows it.
struct Selection {
  int layer = 0;
  int kvHead = 0;
  int queryHead = 0;
  int queryIndex = -1;  ///< -1 = the last query row
  int channel = 0;
  int token = 0;

  /// The query row for a layer of `queries` rows: -1 and rows past the end are the last one.
  [[nodiscard]] int queryRow(int queries) const {
    return queryIndex < 0 ? std::max(0, queries - 1) : std::clamp(queryIndex, 0, std::max(0, queries - 1));
  }
};

}  // namespace kvscope::ui
