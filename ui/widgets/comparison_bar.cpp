// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/widgets/comparison_bar.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>

namespace kvscope::ui {

ComparisonBar::ComparisonBar(QWidget* parent) : QFrame(parent) {
  setObjectName(QStringLiteral("comparisonBar"));
  setFrameShape(QFrame::StyledPanel);
  pin_ = new QPushButton(tr("Pin as A"), this);
  pin_->setObjectName(QStringLiteral("pinButton"));
  pin_->setToolTip(tr("Keep the current K/V setting (specs or plans) as A and compare it with what the controls set "
                      "next (B) in every view."));
  swap_ = new QPushButton(tr("Swap"), this);
  swap_->setObjectName(QStringLiteral("swapButton"));
  swap_->setToolTip(tr("Make A the current setting (the controls) and pin the current one as A."));
  unpin_ = new QPushButton(tr("Unpin"), this);
  unpin_->setObjectName(QStringLiteral("unpinButton"));
  unpin_->setToolTip(tr("Stop comparing: the views show the current setting alone."));
  a_ = new QLabel(this);
  a_->setObjectName(QStringLiteral("comparisonA"));
  b_ = new QLabel(this);
  b_->setObjectName(QStringLiteral("comparisonB"));
  for (QLabel* l : {a_, b_}) {
    l->setTextInteractionFlags(Qt::TextSelectableByMouse);
    l->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);  // long plans are cut, whole in the tooltip
  }
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(6, 2, 6, 2);
  layout->addWidget(pin_);
  layout->addWidget(a_, 1);
  layout->addWidget(b_, 1);
  layout->addWidget(swap_);
  layout->addWidget(unpin_);
  connect(pin_, &QPushButton::clicked, this, &ComparisonBar::pinRequested);
  connect(swap_, &QPushButton::clicked, this, &ComparisonBar::swapRequested);
  connect(unpin_, &QPushButton::clicked, this, &ComparisonBar::unpinRequested);
  setSettings({}, {});
}

void ComparisonBar::setSettings(const QString& a, const QString& b) {
  const bool pinned = !a.isEmpty();
  // A in the colour its series have in every view (dashed purple), B in the views' reconstruction orange.
  a_->setText(pinned ? tr("<b style='color:#9467bd'>A</b> (pinned): %1").arg(a.toHtmlEscaped()) : QString());
  b_->setText(pinned ? tr("<b style='color:#ff7f0e'>B</b> (the controls): %1").arg(b.toHtmlEscaped())
                     : tr("Pin the current setting as A to compare it with the next one (B) in every view."));
  a_->setToolTip(a);
  b_->setToolTip(b);
  a_->setVisible(pinned);
  pin_->setText(pinned ? tr("Pin current as A") : tr("Pin as A"));
  swap_->setVisible(pinned);
  unpin_->setVisible(pinned);
}

}  // namespace kvscope::ui
