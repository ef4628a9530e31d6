// SPDX-License-Identifier: GPL-3.0-or-later
// A QTabWidget that repaints itself whole only when its layout really changes.
#pragma once

#include <QSize>
#include <QTabWidget>

namespace kvscope::ui {

/// QTabWidget answers every layout request from a page (a label in it changing its text, say)
/// by laying out its tab bar and pages again and repainting itself whole, frame included. During
/// a slider drag in a spec panel that was a full repaint of the panel's tab widget per value, and
/// Qt's raster engine splits the fills of such a tall frame over its own thread pool and waits
/// for them: hundreds of waits per drag on the GUI thread, the longest of its stalls when kvscope's
/// workers hold the cores. This one handles a layout request only when something the layout
/// depends on changed: its own size hints (which follow its pages') or its tab bar's. A new size
/// comes as a resize event and is handled as before.
class SteadyTabWidget : public QTabWidget {
  Q_OBJECT

 public:
  explicit SteadyTabWidget(QWidget* parent = nullptr);

  /// Layout requests skipped so far (for tests).
  int layoutsSkipped() const { return layoutsSkipped_; }

 protected:
  bool event(QEvent* event) override;

 private:
  struct Hints {
    QSize size, minimum, tabBar;
    bool operator==(const Hints&) const = default;
  };
  Hints hints() const;

  Hints laidOutFor_;
  bool laidOut_ = false;
  int layoutsSkipped_ = 0;
};

}  // namespace kvscope::ui
