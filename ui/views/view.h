// SPDX-License-Identifier: GPL-3.0-or-later
// What every view of the window's tabs is: an exportable widget with a stable name (its tab,
// `--views`, its export file stem and its key in sessions), its tab title, its state saved and
// loaded by name, and how it takes what the window hands it: the open dump, the setting in force,
// the selection, and the results of the background lanes (ui/state/view_feed.h). The window
// reaches the views of ui/views/view_registry.h through this interface only; a view sends the
// user's choices (a layer, a point, a plan) to the Session it is attached to.
#pragma once

#include <QList>
#include <QString>
#include <QStringList>
#include <QVariant>

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <vector>

#include "core/diagnose/diagnose.h"
#include "core/inspect/drift_data.h"
#include "core/inspect/layer_data.h"
#include "core/io/dump.h"
#include "core/quant/spec.h"
#include "core/report/eval.h"
#include "ui/export/exportable.h"
#include "ui/state/selection.h"
#include "ui/state/view_feed.h"

class QComboBox;
class QWidget;

namespace kvscope::ui {

class JobRunner;
class Session;

/// What a view may read when it fills the layer request or takes a result.
struct ViewContext {
  const DumpInfo* info = nullptr;  ///< the open dump (null only in takeDump when none is open)
  Selection selection;
  QuantSpec key;    ///< the selected layer's specs under the plans in force
  QuantSpec value;
  QStringList tokenText;  ///< the dump's token text (may be empty)
};

class View : public ExportableView {
 public:
  /// What a view calls on the window: its own settings changed what it asks of the layer lane
  /// (another tensor, bins, …), or work prepareExport started has finished.
  struct Hooks {
    std::function<void()> needsChanged;
    std::function<void()> exportReady;
  };
  /// Called once by the window: the session the view shows and edits, and the hooks.
  void attach(Session* session, Hooks hooks) {
    session_ = session;
    hooks_ = std::move(hooks);
    attached();
  }
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

  /// A dump was opened: drop every result of the previous one (data, readouts, zoom, messages)
  /// and take the new dump's shape. Called before any result of `dump` arrives.
  virtual void takeDump(const std::shared_ptr<const Dump>& dump, const ViewContext& context) = 0;
  /// Every result was dropped without a new dump (the setting does not fit it): show `reason`.
  virtual void clearResults(const QString& reason) { (void)reason; }
  /// The setting in force changed (context has its specs of the selected layer).
  virtual void takeSetting(const ViewContext& context) { (void)context; }
  /// Adds what the view needs from the layer lane to `request` (core's computeViewData).
  virtual void fillRequest(ViewRequest& request, const ViewContext& context) const {
    (void)request;
    (void)context;
  }
  /// Whether the view shows pre-RoPE K (the layer lane reads it then).
  [[nodiscard]] virtual bool showsPreRope() const { return false; }
  /// The selected layer's result reached the GUI thread.
  virtual void takeLayer(const LayerQuantPtr& layer, const ViewContext& context) {
    (void)layer;
    (void)context;
  }
  /// The drift of the query row in view (the row, then with its series), or why there is none.
  virtual void takeDrift(const DriftDataPtr& drift, const QString& message) {
    (void)drift;
    (void)message;
  }
  /// The layer summary so far (ascending; empty when it restarts) of a dump of `layers` layers.
  virtual void takeSummary(const std::vector<LayerResult>& rows, int layers) {
    (void)rows;
    (void)layers;
  }
  /// The pinned setting A and what is computed of it (pinned false: nothing pinned).
  virtual void takeComparison(const ComparisonData& a) { (void)a; }
  /// The selection changed (layer, kv head, query head and row, channel, token).
  virtual void takeSelection(const Selection& selection) { (void)selection; }
  /// A diagnosis' evidence was selected: show its tensor (and channel or token) where the view can.
  virtual void takeFocus(const Evidence& evidence, bool hasKeyPreRope) {
    (void)evidence;
    (void)hasKeyPreRope;
  }
  /// The view's own background lanes (the window shows their progress and Cancel stops them).
  [[nodiscard]] virtual QList<JobRunner*> lanes() const { return {}; }
  /// Before a headless export or a screenshot: starts what the view computes only on demand (the
  /// sensitivity map, the diagnosis, the budget search) and returns false until it is done, when
  /// the view calls exportReady(). True when there is nothing to wait for.
  virtual bool prepareExport() { return true; }

 protected:
  /// What the view was attached to (null before attach).
  [[nodiscard]] Session* session() const { return session_; }
  /// Tells the window that fillRequest or showsPreRope would now answer differently.
  void needsChanged() const {
    if (hooks_.needsChanged) hooks_.needsChanged();
  }
  /// Tells the window that what prepareExport started has finished.
  void exportReady() const {
    if (hooks_.exportReady) hooks_.exportReady();
  }
  /// Called by attach(): connect to the session here.
  virtual void attached() {}

 private:
  Session* session_ = nullptr;
  Hooks hooks_;
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
