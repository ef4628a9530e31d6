// SPDX-License-Identifier: GPL-3.0-or-later
// Keeps the views fed: follows the Session (dump, setting, pin, selection) and runs the work the
// visible views need on background lanes: the layer in view, read head first and completed on a
// low-priority fill lane, kept in a small cache shared by both settings; the controls' setting B
// and the pinned A, each on its own SettingLane. Results leave by signals; the window hands them to
// the views through their interface. A request supersedes the one before it (newest wins), and
// nothing computed for a dump or a setting that is gone is ever delivered.
#pragma once

#include <QObject>
#include <QTimer>

#include <functional>
#include <memory>
#include <vector>

#include "core/inspect/drift_data.h"
#include "core/inspect/layer_data.h"
#include "core/report/eval.h"
#include "ui/state/selection.h"
#include "ui/state/setting_lane.h"

namespace kvscope::ui {

class JobRunner;
class Session;

/// What the views draw of the pinned setting A.
struct ComparisonData {
  bool pinned = false;
  /// A's own dump when A is on another dump than B (two dumps side by side), else null: then A's
  /// layer shares B's tensors. On another dump A's layer is the same layer number and kv head, and
  /// its query row is matched from the end (B's last row against A's last row).
  const DumpInfo* otherDump = nullptr;
  LayerQuantPtr layer;  ///< A's data of the layer in view, or null while computed or when A's dump lacks it
  DriftDataPtr drift;   ///< A's drift of the query row in view, or null
  const std::vector<LayerResult>* summary = nullptr;  ///< A's evaluated layers, ascending (never null)
  QString note;         ///< why A shows nothing of the selection (A's dump lacks that layer, head or row)
};

class ViewFeed : public QObject {
  Q_OBJECT

 public:
  /// What the visible views ask of the layer worker for the selection now (their fillRequest),
  /// and whether one of them shows pre-RoPE K.
  struct Needs {
    ViewRequest request;
    bool showsPreRope = false;
  };
  ViewFeed(Session* session, std::function<Needs()> viewNeeds, QObject* parent = nullptr);
  ~ViewFeed() override;

  /// The controls' setting (B) and the pinned one (A).
  SettingLane* current() { return b_; }
  SettingLane* pinned() { return a_; }
  [[nodiscard]] const SettingLane* current() const { return b_; }
  [[nodiscard]] const SettingLane* pinned() const { return a_; }
  /// B's data of the layer and kv head in view (null until computed, and after a dump change).
  [[nodiscard]] const LayerQuantPtr& layer() const { return shown_; }
  [[nodiscard]] ComparisonData comparison() const;
  /// A's layer result is for (layer, kv head) of B's result shown.
  [[nodiscard]] bool comparisonMatches() const;
  /// Every layer of B's summary is evaluated.
  [[nodiscard]] bool summaryComplete() const { return b_->summaryComplete(); }
  /// Nothing pinned, or A's summary and A's data of the layer in view are computed.
  [[nodiscard]] bool comparisonComplete() const;
  [[nodiscard]] QList<JobRunner*> runners() const;
  [[nodiscard]] bool busy() const;

  /// A layer not in the cache whose K is at least `bytes` as float32 is read head first (when
  /// every spec in force quantizes per head). 16 MiB unless set; tests lower it.
  void setHeadFirstBytes(int64_t bytes) { headFirstBytes_ = bytes; }
  /// A view's settings changed what it shows: recompute when the result shown lacks it (pre-RoPE
  /// K′); the views recompute the rest from the result they hold.
  void viewsChanged();

 signals:
  /// Every result was dropped (a new dump, or a setting that does not fit it: `reason` says why).
  void cleared(const QString& reason);
  /// B's data of the layer in view arrived (the views take it).
  void layerShown(const kvscope::LayerQuantPtr& layer);
  /// ... and it is all that is needed now (no re-read follows).
  void layerReady();
  /// B's drift changed (the row, then the row with its series); `message` is set instead when the
  /// dump has no queries.
  void driftShown(const kvscope::DriftDataPtr& drift, const QString& message);
  /// B's drift series arrived, or the message that there is none.
  void driftReady();
  /// B's summary changed (a layer arrived, or it restarted empty) and when it is complete.
  void summaryChanged();
  void summaryFinished();
  /// A changed: pinned or unpinned, its layer, drift or summary.
  void comparisonChanged();
  /// A's summary is complete, or A's layer data arrived (what a headless export waits for).
  void comparisonReady();

 private:
  void onDumpChanged();
  void onSettingChanged();
  void onPinnedChanged();
  void onSelectionChanged(int what);
  void recomputeLayer();
  void onLayerComputed(const LayerQuantPtr& result);
  void recomputeDrift();
  void recomputeSummary();
  /// Asks A's lane for the layer and row B shows (nothing new when it has them).
  void followA();
  /// The same for A on a dump of its own: the same layer and kv head read from A's dump.
  void followOtherDump();
  /// A's query head and row for the selection (-1, -1: none); on A's own dump the row is matched
  /// from the end, so that the last query of B meets the last of A.
  [[nodiscard]] std::pair<int, int> queryOfA() const;
  [[nodiscard]] LayerNeeds needsOf(const ViewRequest& request, bool showsPreRope) const;
  [[nodiscard]] std::optional<PlanPair> plansB() const;

  Session* session_;
  std::function<Needs()> viewNeeds_;
  SettingLane* b_;
  SettingLane* a_;
  LayerCache cache_;
  LayerCache aCache_;  ///< layers of A's own dump (empty while A is on the open dump)
  QString aNote_;      ///< ComparisonData::note
  LayerQuantPtr shown_;
  int64_t headFirstBytes_ = int64_t{16} << 20;
  /// Reads the rest of a layer read head first, at the lowest priority; a layer read outranks it.
  JobRunner* fillRunner_;
  int fillingLayer_ = -1;  ///< the layer the fill lane is completing, -1 when none
  /// The summary waits for the visible views after a setting change, so that they get the cores first.
  bool summaryPending_ = false;
  /// Slider drags arrive in bursts; one recomputation starts 40 ms after the last change.
  QTimer recomputeTimer_;
};

}  // namespace kvscope::ui
