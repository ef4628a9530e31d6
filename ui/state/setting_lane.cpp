// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/state/setting_lane.h"

#include <algorithm>

#include "ui/workers/job_runner.h"

namespace kvscope::ui {

namespace {

bool sameRequest(const ViewRequest& a, const ViewRequest& b) {
  return a.kvHead == b.kvHead && a.wholeLayer == b.wholeLayer && a.keyPreRopeHat == b.keyPreRopeHat &&
         a.heatmapTensor == b.heatmapTensor && a.heatmapValue == b.heatmapValue && a.heatmapColumns == b.heatmapColumns &&
         a.histogramTensor == b.histogramTensor && a.histogramScope == b.histogramScope &&
         a.histogramIndex == b.histogramIndex && a.histogramBins == b.histogramBins && a.formatSpace == b.formatSpace &&
         a.group == b.group && a.groupToken == b.groupToken && a.groupChannel == b.groupChannel &&
         a.queryHead == b.queryHead && a.queryIndex == b.queryIndex;
}

}  // namespace

SettingLane::SettingLane(const QString& label, QObject* parent) : QObject(parent) {
  const auto name = [&label](const QString& what) { return label.isEmpty() ? what : what + QStringLiteral(" of ") + label; };
  layerRunner_ = new JobRunner(label.isEmpty() ? tr("quantizing layer") : tr("setting %1").arg(label), this);
  driftRunner_ = new JobRunner(name(tr("attention drift")), this);
  summaryRunner_ = new JobRunner(name(tr("layer summary")), this);
  // A failed request may be asked again (after the cause is fixed).
  connect(layerRunner_, &JobRunner::failed, this, [this] { asked_.reset(); });
  connect(driftRunner_, &JobRunner::failed, this, [this] { driftAsked_ = {-1, -1}; });
}

SettingLane::~SettingLane() {
  cancel();
  for (JobRunner* r : runners()) r->waitForIdle();
}

void SettingLane::cancelLayer() {
  layerRunner_->cancel();
  driftRunner_->cancel();
  asked_.reset();
  driftAsked_ = {-1, -1};
}

void SettingLane::cancel() {
  cancelLayer();
  summaryRunner_->cancel();
}

void SettingLane::reset(std::shared_ptr<const Dump> dump, std::optional<PlanPair> plans) {
  cancel();
  dump_ = std::move(dump);
  plans_ = std::move(plans);
  layer_.reset();
  drift_.reset();
  summary_.clear();
  report_.reset();
}

void SettingLane::setPlans(std::optional<PlanPair> plans) {
  if (plans == plans_) return;
  summaryRunner_->cancel();
  plans_ = std::move(plans);
  summary_.clear();
  report_.reset();
  if (!plans_) {
    cancelLayer();
    layer_.reset();
    drift_.reset();
  }
}

LayerSpecs SettingLane::specsOf(int layer) const {
  const int layers = dump_ ? dump_->info().layers : layer + 1;
  return LayerSpecs{specForLayer(plans_->key, layer, layers), specForLayer(plans_->value, layer, layers)};
}

bool SettingLane::computeLayer(LayerJob job) {
  if (!active()) return false;
  const int layer = job.tensors ? job.tensors->layer : job.layer;
  const LayerSpecs specs = specsOf(layer);
  if (job.tensors && asked_ && asked_->tensors == job.tensors && sameRequest(asked_->request, job.request) &&
      asked_->specs.key == specs.key && asked_->specs.value == specs.value) {
    return layerRunner_->busy();  // being computed, or shown already
  }
  asked_ = job.tensors ? std::optional<Asked>(Asked{job.tensors, job.request, specs}) : std::nullopt;
  auto dump = dump_;
  auto pool = pool_;
  layerRunner_->start<LayerQuantPtr>(
      [dump, job = std::move(job), specs, pool](const Progress& progress) -> Expected<LayerQuantPtr> {
        LayerTensorsPtr tensors = job.tensors;
        if (!tensors) {
          auto read = job.read(progress);
          if (!read) return read.status();
          tensors = *read;
        }
        return pool->compute(dump->info(), tensors, specs.key, specs.value, job.request, progress);
      },
      [this](LayerQuantPtr result) {
        layer_ = result;
        driftAsked_ = {-1, -1};
        emit layerComputed(std::move(result));
      });
  return true;
}

void SettingLane::computeDrift(int queryHead, int queryIndex) {
  if (!layer_ || !layer_->tensors->query || !dump_) return;
  if (driftAsked_ == std::make_pair(queryHead, queryIndex)) return;
  // A query head of a kv head this result lacks: the layer lane is computing it and calls again.
  const LayerTensors& t = *layer_->tensors;
  const int64_t group = t.key.heads > 0 ? t.query->heads / t.key.heads : 0;
  const int64_t kvHead = group > 0 ? queryHead / group : -1;
  if (kvHead < 0 || layer_->hatHead(kvHead) < 0 || t.headIndex(kvHead) < 0) return;
  driftAsked_ = {queryHead, queryIndex};
  auto layer = layer_;
  // The row the layer worker computed shows at once; the series along query positions (one kv
  // head's attention over every query, much longer) follows from the drift lane.
  DriftDataPtr previous = drift_;
  if (DriftDataPtr rowOnly = rowOnlyDrift(layer, queryHead, queryIndex)) {
    drift_ = rowOnly;
    emit driftChanged();
  }
  const double scale = dump_->info().softmaxScale;
  auto slices = slices_;
  driftRunner_->start<DriftDataPtr>(
      [layer, queryHead, queryIndex, scale, previous, slices](const Progress& progress) {
        return computeDriftData(layer, queryHead, queryIndex, scale, previous, *slices, progress);
      },
      [this, layer](DriftDataPtr drift) {
        if (layer != layer_) return;
        drift_ = std::move(drift);
        emit driftChanged();
      });
}

void SettingLane::computeSummary(int first) {
  if (!active()) return;
  summary_.clear();
  report_.reset();
  const DumpInfo& info = dump_->info();
  EvalOptions options;
  options.key = plans_->key;
  options.value = plans_->value;
  // The selected layer first, so that its row appears before the rest.
  std::vector<int> order{std::clamp(first, 0, info.layers - 1)};
  for (int l = 0; l < info.layers; ++l) {
    if (l != order.front()) order.push_back(l);
  }
  options.layers = order;
  options.keepLayerOrder = true;
  auto dump = dump_;
  auto finished = std::make_shared<std::optional<EvalReport>>();
  // eval's own loop (core/report/eval.h), each layer's row posted as soon as it is done.
  summaryRunner_->startStreaming(
      [this, dump, options, finished](const Progress& progress, const JobRunner::Post& post) -> Status {
        EvalOptions streamed = options;
        streamed.onLayer = [this, &post](const LayerResult& result) {
          post([this, result] {
            const auto at = std::lower_bound(summary_.begin(), summary_.end(), result.layer,
                                             [](const LayerResult& r, int layer) { return r.layer < layer; });
            if (at != summary_.end() && at->layer == result.layer) *at = result;
            else summary_.insert(at, result);
            emit summaryChanged();
          });
        };
        auto evaluated = evaluate(*dump, streamed, progress);
        if (!evaluated) return evaluated.status();
        std::sort(evaluated->layers.begin(), evaluated->layers.end(),
                  [](const LayerResult& a, const LayerResult& b) { return a.layer < b.layer; });
        *finished = std::move(evaluated).value();
        return Status::ok();
      },
      [this, finished] {
        report_ = std::move(*finished);
        emit summaryFinished();
      });
}

bool SettingLane::summaryComplete() const {
  return active() && report_.has_value() && static_cast<int>(summary_.size()) == dump_->info().layers &&
         !summaryRunner_->busy();
}

Expected<EvalReport> SettingLane::report() const {
  if (!summaryComplete()) return Status::invalidArgument("the layer summary is not complete yet");
  return *report_;
}

}  // namespace kvscope::ui
