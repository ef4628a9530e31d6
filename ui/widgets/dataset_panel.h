// SPDX-License-Identifier: GPL-3.0-or-later
// The open dump at a glance: shape, model, fp16 KV size, and its layers ▸ kv heads tree;
// selecting a layer or head drives every view.
#pragma once

#include <QWidget>

#include "core/io/dump.h"
#include "core/quant/spec.h"

#include <vector>

class QLabel;
class QTreeWidget;
class QTreeWidgetItem;

namespace kvscope::ui {

class DatasetPanel : public QWidget {
  Q_OBJECT

 public:
  explicit DatasetPanel(QWidget* parent = nullptr);

  /// Shows `info`; an empty path clears the panel.
  void setDump(const DumpInfo& info);
  void clear();
  /// Highlights (layer, kvHead) without emitting selected().
  void setSelection(int layer, int kvHead);
  QTreeWidget* tree() { return tree_; }
  /// Each layer's K and V spec under the plans (one entry per layer): layers whose K or V spec
  /// differs from the default are shown in bold, and every layer's tooltip names its specs.
  void setLayerSpecs(const std::vector<QuantSpec>& key, const std::vector<QuantSpec>& value,
                     const QuantSpec& keyDefault, const QuantSpec& valueDefault);
  /// True when the tree marks `layer` as overridden.
  [[nodiscard]] bool layerMarked(int layer) const;

 signals:
  /// The user picked a layer (kvHead = -1 keeps the current head) or a kv head of a layer.
  void selected(int layer, int kvHead);

 private:
  QLabel* summary_;
  QTreeWidget* tree_;
  bool updating_ = false;
};

}  // namespace kvscope::ui
