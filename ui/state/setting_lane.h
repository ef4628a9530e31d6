// SPDX-License-Identifier: GPL-3.0-or-later
// One K/V setting's background work for the views: the views' data of the layer in view (core's
// LayerQuantPool), its attention drift (the layer worker's row at once, then the kv head's series)
// and the layer summary over every layer (core's evaluate, each row as it arrives). The controls'
// setting (B) and a pinned setting A are two instances of this type; on each of its lanes a new
// request supersedes the one before (newest wins) and a stale result is never delivered.
#pragma once

#include <QObject>
#include <QString>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "core/inspect/drift_data.h"
#include "core/inspect/layer_data.h"
#include "core/io/dump.h"
#include "core/quant/plan.h"
#include "core/report/eval.h"

namespace kvscope::ui {

class JobRunner;

/// The layer a computation starts from: read already, or read on the lane.
struct LayerJob {
  LayerTensorsPtr tensors;  ///< the layer's tensors, or null: `read` reads them on the lane
  std::function<Expected<LayerTensorsPtr>(const Progress&)> read;
  int layer = 0;            ///< the layer `read` reads (tensors->layer otherwise)
  ViewRequest request;
};

/// K and V plans.
struct PlanPair {
  Plan key;
  Plan value;
  bool operator==(const PlanPair& o) const { return key == o.key && value == o.value; }
};

class SettingLane : public QObject {
  Q_OBJECT

 public:
  /// `label` names the lanes in the status bar: empty for the controls' setting, "A" for the pinned one.
  explicit SettingLane(const QString& label, QObject* parent = nullptr);
  ~SettingLane() override;

  /// The dump and the plans this lane computes (nullopt: none). Any change drops every result and
  /// cancels the work under way.
  void reset(std::shared_ptr<const Dump> dump, std::optional<PlanPair> plans);
  /// New plans for the same dump: the summary is dropped; the layer and drift shown stay until
  /// the next computeLayer (a slider drag keeps showing the last result until the new one lands).
  void setPlans(std::optional<PlanPair> plans);
  [[nodiscard]] const std::optional<PlanPair>& plans() const { return plans_; }
  [[nodiscard]] bool active() const { return dump_ && plans_; }
  /// The specs of `layer` under the plans (the plans must be set).
  [[nodiscard]] LayerSpecs specsOf(int layer) const;

  /// Computes the views' data of `job` under the layer's specs; layerComputed() follows. Nothing
  /// new starts when the same tensors and request are being computed (true: the result will come)
  /// or were computed and are layer() (false: nothing will follow).
  bool computeLayer(LayerJob job);
  /// The drift of layer() for a query row: the layer worker's row at once when it has it, then the
  /// series (and the row, when missing) on the drift lane; driftChanged() after each.
  void computeDrift(int queryHead, int queryIndex);
  /// Evaluates every layer, `first` first; summaryChanged() per layer, summaryFinished() at the end.
  void computeSummary(int first);
  /// Cancels the layer and drift lanes (the summary goes on).
  void cancelLayer();
  /// Cancels everything.
  void cancel();

  /// The last layer result (for the layer that was asked; the caller checks it is still wanted).
  [[nodiscard]] const LayerQuantPtr& layer() const { return layer_; }
  [[nodiscard]] const DriftDataPtr& drift() const { return drift_; }
  /// The evaluated layers so far, ascending.
  [[nodiscard]] const std::vector<LayerResult>& summary() const { return summary_; }
  [[nodiscard]] bool summaryComplete() const;
  /// The summary as kvscope-cli eval reports these plans (§8, §12), once complete; else an error.
  [[nodiscard]] Expected<EvalReport> report() const;

  JobRunner* layerRunner() { return layerRunner_; }
  JobRunner* driftRunner() { return driftRunner_; }
  JobRunner* summaryRunner() { return summaryRunner_; }
  [[nodiscard]] QList<JobRunner*> runners() const { return {layerRunner_, driftRunner_, summaryRunner_}; }

 signals:
  /// A layer result arrived (layer() holds it).
  void layerComputed(kvscope::LayerQuantPtr layer);
  /// drift() changed: the row alone, or with its series.
  void driftChanged();
  void summaryChanged();
  void summaryFinished();

 private:
  std::shared_ptr<const Dump> dump_;
  std::optional<PlanPair> plans_;
  LayerQuantPtr layer_;
  DriftDataPtr drift_;
  std::vector<LayerResult> summary_;
  std::optional<EvalReport> report_;
  /// What the running or last layer job computes (for skipping a request already served).
  struct Asked {
    LayerTensorsPtr tensors;
    ViewRequest request;
    LayerSpecs specs;
  };
  std::optional<Asked> asked_;
  std::pair<int, int> driftAsked_{-1, -1};
  /// The layer lane's reused results and the drift lane's slices (each used on its lane only).
  std::shared_ptr<LayerQuantPool> pool_ = std::make_shared<LayerQuantPool>();
  std::shared_ptr<DriftWorkspace> slices_ = std::make_shared<DriftWorkspace>();
  JobRunner* layerRunner_;
  JobRunner* driftRunner_;
  JobRunner* summaryRunner_;
};

}  // namespace kvscope::ui
