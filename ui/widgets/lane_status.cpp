// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/widgets/lane_status.h"

#include <QLabel>
#include <QProgressBar>
#include <QStatusBar>
#include <QToolButton>

#include <algorithm>

#include "ui/workers/job_runner.h"

namespace kvscope::ui {

LaneStatus::LaneStatus(QStatusBar* bar) : QObject(bar) {
  text_ = new QLabel(bar);
  progress_ = new QProgressBar(bar);
  progress_->setRange(0, 1000);
  // Wide enough for the longest lane's "name: 100%" on one line.
  progress_->setMinimumWidth(progress_->fontMetrics().horizontalAdvance(tr("end-to-end check: 100%")) + 40);
  progress_->setMaximumWidth(progress_->minimumWidth() + 60);
  progress_->setVisible(false);
  cancel_ = new QToolButton(bar);
  cancel_->setText(tr("Cancel"));
  cancel_->setToolTip(tr("Stop the background computations; views keep their last results."));
  cancel_->setVisible(false);
  // One line that never widens the window: long messages are cut at the right, whole in the tooltip.
  text_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  text_->setObjectName(QStringLiteral("statusText"));
  bar->addWidget(text_, 1);
  bar->addPermanentWidget(progress_);
  bar->addPermanentWidget(cancel_);
  connect(cancel_, &QToolButton::clicked, this, [this] {
    for (JobRunner* r : lanes_) r->cancel();
    emit cancelled();
  });
}

void LaneStatus::track(JobRunner* runner) {
  lanes_.append(runner);
  connect(runner, &JobRunner::progressed, this, [this, runner](double fraction, const QString& what) {
    progress_->setValue(static_cast<int>(fraction * 1000));
    progress_->setFormat(runner->name() + QStringLiteral(": %p%"));
    progress_->setToolTip(what);
  });
  connect(runner, &JobRunner::busyChanged, this, [this] {
    const bool any = busy();
    progress_->setVisible(any);
    cancel_->setVisible(any);
    if (!any) progress_->setValue(0);
  });
  connect(runner, &JobRunner::failed, this,
          [this, runner](const QString& message) { emit failed(runner->name(), message); });
}

bool LaneStatus::busy() const {
  return std::any_of(lanes_.begin(), lanes_.end(), [](const JobRunner* r) { return r->busy(); });
}

void LaneStatus::showText(const QString& message) {
  // Core's messages may span lines; the status bar has one.
  QString line = message;
  line.replace(QLatin1Char('\n'), QStringLiteral(" · "));
  text_->setText(line);
  text_->setToolTip(message);
}

}  // namespace kvscope::ui
