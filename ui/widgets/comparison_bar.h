// SPDX-License-Identifier: GPL-3.0-or-later
// The A/B bar above the views: "Pin as A" while nothing is pinned; then which setting is A (pinned)
// and which is B (the controls), with Swap and Unpin.
#pragma once

#include <QFrame>

class QLabel;
class QPushButton;

namespace kvscope::ui {

class ComparisonBar : public QFrame {
  Q_OBJECT

 public:
  explicit ComparisonBar(QWidget* parent = nullptr);

  /// Not pinned: `a` empty. Texts as describeSetting gives them.
  void setSettings(const QString& a, const QString& b);
  QPushButton* pinButton() { return pin_; }
  QPushButton* swapButton() { return swap_; }
  QPushButton* unpinButton() { return unpin_; }
  QLabel* aLabel() { return a_; }
  QLabel* bLabel() { return b_; }

 signals:
  void pinRequested();
  void swapRequested();
  void unpinRequested();

 private:
  QPushButton* pin_;
  QPushButton* swap_;
  QPushButton* unpin_;
  QLabel* a_;
  QLabel* b_;
};

}  // namespace kvscope::ui
