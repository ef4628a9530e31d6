// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/widgets/steady_tab_widget.h"

#include <QEvent>
#include <QTabBar>

namespace kvscope::ui {

SteadyTabWidget::SteadyTabWidget(QWidget* parent) : QTabWidget(parent) {}

SteadyTabWidget::Hints SteadyTabWidget::hints() const { return {sizeHint(), minimumSizeHint(), tabBar()->sizeHint()}; }

bool SteadyTabWidget::event(QEvent* event) {
  if (event->type() == QEvent::LayoutRequest) {
    const Hints now = hints();
    if (laidOut_ && now == laidOutFor_) {
      ++layoutsSkipped_;
      return true;
    }
    laidOut_ = true;
    laidOutFor_ = now;
  }
  return QTabWidget::event(event);
}

}  // namespace kvscope::ui
