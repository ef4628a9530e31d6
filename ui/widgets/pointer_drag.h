// SPDX-License-Identifier: GPL-3.0-or-later
// The mouse gestures every zoomable view shares (the charts' InteractiveChartView and the heat
// map; docs/gui.md): which drag a press starts, and how far it may move and still be a click.
#pragma once

#include <QMouseEvent>

namespace kvscope::ui {

/// What a held button does while the mouse moves.
enum class PointerDrag { None, Band, Pan };

/// Pixels a press may move and still count as a click.
inline constexpr int kClickSlop = 4;

/// Right or middle button, or Shift with the left, pans; the left button alone draws a zoom box.
inline PointerDrag pointerDragFor(const QMouseEvent& press) {
  const Qt::MouseButton b = press.button();
  if (b == Qt::RightButton || b == Qt::MiddleButton ||
      (b == Qt::LeftButton && (press.modifiers() & Qt::ShiftModifier))) {
    return PointerDrag::Pan;
  }
  return b == Qt::LeftButton ? PointerDrag::Band : PointerDrag::None;
}

}  // namespace kvscope::ui
