// SPDX-License-Identifier: GPL-3.0-or-later
// A view whose core computation is not available in this build says so plainly.
#pragma once

#include <QLabel>

namespace kvscope::ui {

/// A centred message standing in for a view that cannot compute yet.
class PlaceholderView : public QLabel {
  Q_OBJECT

 public:
  explicit PlaceholderView(const QString& message, QWidget* parent = nullptr) : QLabel(message, parent) {
    setAlignment(Qt::AlignCenter);
    setWordWrap(true);
  }
};

}  // namespace kvscope::ui
