// SPDX-License-Identifier: GPL-3.0-or-later
// The Presets menu: one entry per §9 preset; with a dump open each entry shows what it resolves
// to for that dump's shape (as `kvscope-cli presets --dump` prints it), and those that do not
// apply are disabled with the reason in their tooltip.
#pragma once

#include <QMenu>

#include <optional>

#include "core/engine/presets.h"

namespace kvscope::ui {

class PresetMenu : public QMenu {
  Q_OBJECT

 public:
  explicit PresetMenu(QWidget* parent = nullptr);
  /// Relabels every entry for a dump of `shape` (nullopt: no dump open).
  void refresh(const std::optional<KvShape>& shape);

 signals:
  /// The user picked the preset named `name`.
  void presetChosen(const QString& name);
};

}  // namespace kvscope::ui
