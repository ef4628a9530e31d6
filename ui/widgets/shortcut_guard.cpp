// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/widgets/shortcut_guard.h"

#include <QAbstractSpinBox>
#include <QKeyEvent>
#include <QLineEdit>
#include <QWidget>

namespace kvscope::ui {

ShortcutGuard::ShortcutGuard(QWidget* window, QList<QKeySequence> keys, QObject* parent)
    : QObject(parent), window_(window), keys_(std::move(keys)) {}

bool ShortcutGuard::eventFilter(QObject* watched, QEvent* event) {
  if (event->type() != QEvent::ShortcutOverride) return false;
  auto* widget = qobject_cast<QWidget*>(watched);
  if (!widget || widget->window() != window_) return false;
  if (!qobject_cast<QLineEdit*>(widget) && !qobject_cast<QAbstractSpinBox*>(widget)) return false;
  const auto* key = static_cast<QKeyEvent*>(event);
  const QKeySequence pressed(key->keyCombination());
  for (const QKeySequence& k : keys_) {
    if (k.matches(pressed) == QKeySequence::ExactMatch) {
      event->ignore();  // not claimed: the shortcut goes to the window's action
      return true;
    }
  }
  return false;
}

}  // namespace kvscope::ui
