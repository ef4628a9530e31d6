// SPDX-License-Identifier: GPL-3.0-or-later
// File ▸ Open Recent: the last dumps opened (QSettings "recentFiles"), without those that were
// moved or deleted.
#pragma once

#include <QMenu>
#include <QStringList>

namespace kvscope::ui {

class RecentFilesMenu : public QMenu {
  Q_OBJECT

 public:
  explicit RecentFilesMenu(QWidget* parent = nullptr);
  /// Puts `path` first (at most 8 are kept).
  void add(const QString& path);
  /// The files, without those that no longer exist (they are dropped from the settings).
  static QStringList files();

 signals:
  void fileChosen(const QString& path);

 private:
  void rebuild();
};

}  // namespace kvscope::ui
