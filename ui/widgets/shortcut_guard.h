// SPDX-License-Identifier: GPL-3.0-or-later
// Keeps a window's own shortcuts working while a text field or spin box has the focus: Qt lets
// such a widget claim a key first (ShortcutOverride), and on X11 a line edit claims Ctrl+E (an
// Emacs-style "end of line"), so File ▸ Export view did nothing from a spin box. For the keys
// given, the guard refuses that claim for widgets of its window; the window's action runs.
#pragma once

#include <QKeySequence>
#include <QList>
#include <QObject>

class QWidget;

namespace kvscope::ui {

class ShortcutGuard : public QObject {
  Q_OBJECT

 public:
  /// Install on the application (qApp->installEventFilter) for `window`'s `keys`.
  ShortcutGuard(QWidget* window, QList<QKeySequence> keys, QObject* parent = nullptr);

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  QWidget* window_;
  QList<QKeySequence> keys_;
};

}  // namespace kvscope::ui
