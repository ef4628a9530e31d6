// SPDX-License-Identifier: GPL-3.0-or-later
// A/B comparison: a K/V setting (two plans, quantization.md §12) pinned as A while the controls
// go on editing B. A is computed once when pinned and again only when the layer, kv head or
// query row in view changes (never on a slider move): its reconstruction of the head in view
// and its attention drift on one lane, its layer summary (every layer) on another. The views
// draw A beside the B they already show; the window owns this object and feeds it the layer in view.
#pragma once

#include <QObject>
#include <QString>

#include <memory>
#include <optional>
#include <vector>

#include "core/io/dump.h"
#include "core/quant/plan.h"
#include "core/report/eval.h"
#include "ui/model/layer_data.h"
#include "ui/views/drift_view.h"

namespace kvscope::ui {

class JobRunner;

/// The setting pinned as A.
struct PinnedSetting {
  Plan key;
  Plan value;
  bool operator==(const PinnedSetting& o) const { return key == o.key && value == o.value; }
};

/// "K q8_0 · V q4_0" (plan strings, §12).
QString describeSetting(const Plan& key, const Plan& value);

/// An EvalReport of `layers` as kvscope-cli eval reports it for these plans (§8, §12): plan
/// storage, bytes per token over the layers, the summary.
Expected<EvalReport> reportOf(const DumpInfo& info, const Plan& key, const Plan& value, std::vector<LayerResult> layers);

class Comparison : public QObject {
  Q_OBJECT

 public:
  explicit Comparison(QObject* parent = nullptr);
  ~Comparison() override;

  /// A new dump: A's results are dropped and recomputed for it (when pinned).
  void setDump(std::shared_ptr<const Dump> dump);
  /// Pins `setting` as A (replacing any A) and starts its summary; nullopt unpins.
  void setPinned(std::optional<PinnedSetting> setting);
  [[nodiscard]] const std::optional<PinnedSetting>& pinned() const { return pinned_; }
  /// The layer in view (B's result) and the drift view's query: computes A for that layer, kv
  /// head and query row unless A has them already.
  void follow(const LayerQuantPtr& shown, int queryHead, int queryIndex);

  /// A's reconstruction of the head in view (nullptr until computed or when not pinned). It
  /// shares B's layer tensors (LayerQuant::tensors), by which the views tell that it is A of the
  /// very layer they show.
  [[nodiscard]] const LayerQuantPtr& layer() const { return layer_; }
  /// A's attention row and drift series for the head and row in view (nullptr without queries).
  [[nodiscard]] const DriftDataPtr& drift() const { return drift_; }
  /// A's evaluated layers, ascending (fills in as layers finish).
  [[nodiscard]] const std::vector<LayerResult>& summary() const { return summary_; }
  /// Every layer of A's summary is evaluated.
  [[nodiscard]] bool summaryComplete() const;
  /// A's layer result is for (layer, kv head) of `shown`.
  [[nodiscard]] bool matches(const LayerQuantPtr& shown) const;

  JobRunner* layerRunner() { return layerRunner_; }
  JobRunner* summaryRunner() { return summaryRunner_; }

 signals:
  /// A was pinned, replaced or unpinned.
  void pinnedChanged();
  /// A's layer (and drift) for the view arrived, or was dropped with the dump.
  void layerReady();
  /// One more layer of A's summary arrived.
  void summaryChanged();
  /// A's summary is complete.
  void summaryFinished();

 private:
  void startSummary();

  std::shared_ptr<const Dump> dump_;
  std::optional<PinnedSetting> pinned_;
  LayerQuantPtr layer_;
  DriftDataPtr drift_;
  std::vector<LayerResult> summary_;
  /// What the running or last A layer job computes: (layer tensors, kv head, query head, row).
  LayerTensorsPtr wantTensors_;
  int wantHead_ = -1, wantQueryHead = -1, wantQueryIndex = -1;
  std::shared_ptr<LayerQuantPool> pool_ = std::make_shared<LayerQuantPool>();
  JobRunner* layerRunner_;
  JobRunner* summaryRunner_;
};

}  // namespace kvscope::ui
