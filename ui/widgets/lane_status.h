// SPDX-License-Identifier: GPL-3.0-or-later
// The status bar's right side: the progress of whichever background lane reported last, and one
// Cancel button for all of them; and its left side, one line of status text.
#pragma once

#include <QList>
#include <QObject>

class QLabel;
class QProgressBar;
class QStatusBar;
class QToolButton;

namespace kvscope::ui {

class JobRunner;

class LaneStatus : public QObject {
  Q_OBJECT

 public:
  /// Adds the text, the progress bar and Cancel to `bar`.
  explicit LaneStatus(QStatusBar* bar);
  /// Shows `runner`'s progress while it runs; its failures are announced by failed().
  void track(JobRunner* runner);
  [[nodiscard]] bool busy() const;
  [[nodiscard]] const QList<JobRunner*>& lanes() const { return lanes_; }
  /// One line (a message over several lines is joined with " · "); the whole text in the tooltip.
  void showText(const QString& message);
  QLabel* textLabel() { return text_; }

 signals:
  /// A tracked lane failed (not cancelled): `lane` is its name.
  void failed(const QString& lane, const QString& message);
  /// Cancel was pressed (every lane is cancelled).
  void cancelled();

 private:
  QList<JobRunner*> lanes_;
  QLabel* text_;
  QProgressBar* progress_;
  QToolButton* cancel_;
};

}  // namespace kvscope::ui
