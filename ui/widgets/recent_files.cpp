// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/widgets/recent_files.h"

#include <QFileInfo>
#include <QSettings>

namespace kvscope::ui {

namespace {
constexpr int kMaxRecent = 8;
}  // namespace

RecentFilesMenu::RecentFilesMenu(QWidget* parent) : QMenu(tr("Open &Recent"), parent) { rebuild(); }

void RecentFilesMenu::add(const QString& path) {
  QSettings settings;
  QStringList recent = settings.value(QStringLiteral("recentFiles")).toStringList();
  recent.removeAll(path);
  recent.prepend(path);
  while (recent.size() > kMaxRecent) recent.removeLast();
  settings.setValue(QStringLiteral("recentFiles"), recent);
  rebuild();
}

QStringList RecentFilesMenu::files() {
  // Files that were moved or deleted (a test's temporary folder) leave the list.
  QSettings settings;
  const QStringList stored = settings.value(QStringLiteral("recentFiles")).toStringList();
  QStringList kept;
  for (const QString& path : stored) {
    if (QFileInfo::exists(path)) kept << path;
  }
  if (kept != stored) settings.setValue(QStringLiteral("recentFiles"), kept);
  return kept;
}

void RecentFilesMenu::rebuild() {
  clear();
  const QStringList recent = files();
  for (const QString& path : recent) addAction(path, this, [this, path] { emit fileChosen(path); });
  setEnabled(!recent.isEmpty());
}

}  // namespace kvscope::ui
