// SPDX-License-Identifier: GPL-3.0-or-later
// What every view of the window's tabs is: an exportable widget with a stable name (its tab,
// `--views`, its export file stem and its key in sessions), its tab title, its state saved and
// loaded by name, and how it takes the selection and the layer's data. The window iterates the
// views of ui/views/view_registry.h through this interface only.
#pragma once

#include <QString>
#include <QStringList>
#include <QVariant>

#include <nlohmann/json.hpp>

#include "core/io/dump.h"
#include "core/metrics/view_data.h"
#include "core/quant/spec.h"
#include "ui/export/exportable.h"
#include "ui/model/layer_data.h"
#include "ui/model/selection.h"

class QComboBox;
class QWidget;

namespace kvscope::ui {

/// What a view may read when it fills its part of the layer request or takes the layer's result.
struct ViewContext {
  const DumpInfo* info = nullptr;  ///< the open dump (never null when the window calls a view)
  Selection selection;
  QuantSpec key;    ///< the selected layer's specs under the plans in force
  QuantSpec value;
  QStringList tokenText;  ///< the dump's token text (may be empty)
};

class View : public ExportableView {
 public:
  /// The widget shown in the view's tab (the view itself).
  virtual QWidget* widget() = 0;
  /// The tab's title.
  [[nodiscard]] virtual QString tabTitle() const = 0;
  /// The view's settings for a session, by name: a combo box is saved as its entry's name
  /// (addNamedItem), never as an index. An empty object: nothing to save.
  [[nodiscard]] virtual nlohmann::json saveState() const { return nlohmann::json::object(); }
  /// Restores what saveState wrote. Sessions written before names hold combo indexes; a view
  /// reads a number through the order its entries had then (loadNamedChoice).
  virtual void loadState(const nlohmann::json& state) { (void)state; }
  /// Adds what the view needs from the layer worker to `request` (core's computeViewData).
  virtual void fillRequest(ViewRequest& request, const ViewContext& context) const {
    (void)request;
    (void)context;
  }
  /// The selected layer's result reached the GUI thread.
  virtual void takeLayer(const LayerQuantPtr& layer, const ViewContext& context) {
    (void)layer;
    (void)context;
  }
  /// The selection changed (layer, kv head, query head and row, channel, token).
  virtual void takeSelection(const Selection& selection) { (void)selection; }
};

/// Adds an entry to `box` with a stable `name` (what sessions store) beside its shown `text`.
void addNamedItem(QComboBox* box, const QString& name, const QString& text, const QVariant& data = {});
/// The name of `box`'s current entry (empty when it has none).
[[nodiscard]] QString currentItemName(const QComboBox* box);
/// Selects the entry named `name`; false (and nothing changes) when there is none.
bool selectItemName(QComboBox* box, const QString& name);
/// Restores `box` from a session value: a string is an entry's name; a number (a session written
/// before names) is an index into `legacyOrder`, the names in the order the entries had then.
/// A missing value selects `fallback`; unknown names and indexes change nothing.
void loadNamedChoice(QComboBox* box, const nlohmann::json& state, const char* key, const QStringList& legacyOrder,
                     const QString& fallback);

}  // namespace kvscope::ui
