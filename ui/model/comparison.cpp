// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/model/comparison.h"

#include <algorithm>

#include "core/attention/detail.h"
#include "core/metrics/drift.h"
#include "core/quant/plan.h"
#include "ui/workers/job_runner.h"

namespace kvscope::ui {

namespace {
QString q(const std::string& s) { return QString::fromStdString(s); }
}  // namespace

QString describeSetting(const Plan& key, const Plan& value) {
  return QStringLiteral("K %1 · V %2").arg(q(toString(key)), q(toString(value)));
}

Expected<EvalReport> reportOf(const DumpInfo& info, const Plan& key, const Plan& value, std::vector<LayerResult> layers) {
  EvalReport report;
  report.dump = info;
  report.key = key;
  report.value = value;
  // As kvscope-cli eval reports a plan (§8, §12): planStorage, and bytes per token over the layers.
  report.keyStorage = planStorage(key, info.layers, info.kvHeads, info.tokens, info.headDim);
  report.valueStorage = planStorage(value, info.layers, info.kvHeads, info.tokens, info.headDim);
  report.bytesPerTokenBaseline = static_cast<double>(info.bytesPerTokenFp16());
  auto keyLayers = planLayerStorage(key, info.layers, info.kvHeads, info.tokens, info.headDim);
  if (!keyLayers) return keyLayers.status();
  auto valueLayers = planLayerStorage(value, info.layers, info.kvHeads, info.tokens, info.headDim);
  if (!valueLayers) return valueLayers.status();
  report.bytesPerTokenQuantized = bytesPerToken(*keyLayers, *valueLayers, info.tokens);
  report.layers = std::move(layers);
  report.summary = summarize(report.layers);
  return report;
}

Comparison::Comparison(QObject* parent) : QObject(parent) {
  layerRunner_ = new JobRunner(tr("setting A"), this);
  summaryRunner_ = new JobRunner(tr("layer summary of A"), this);
}

Comparison::~Comparison() {
  for (JobRunner* r : {layerRunner_, summaryRunner_}) r->cancel();
  for (JobRunner* r : {layerRunner_, summaryRunner_}) r->waitForIdle();
}

void Comparison::setDump(std::shared_ptr<const Dump> dump) {
  layerRunner_->cancel();
  summaryRunner_->cancel();
  dump_ = std::move(dump);
  layer_.reset();
  drift_.reset();
  summary_.clear();
  wantTensors_.reset();
  wantHead_ = -1;
  emit layerReady();  // the views drop A of the previous dump
  if (pinned_) startSummary();
}

void Comparison::setPinned(std::optional<PinnedSetting> setting) {
  if (setting == pinned_) return;
  layerRunner_->cancel();
  summaryRunner_->cancel();
  pinned_ = std::move(setting);
  layer_.reset();
  drift_.reset();
  summary_.clear();
  wantTensors_.reset();
  wantHead_ = -1;
  emit pinnedChanged();
  if (pinned_) startSummary();
}

bool Comparison::summaryComplete() const {
  return pinned_ && dump_ && static_cast<int>(summary_.size()) == dump_->info().layers && !summaryRunner_->busy();
}

bool Comparison::matches(const LayerQuantPtr& shown) const {
  return layer_ && shown && layer_->tensors == shown->tensors && layer_->hatHead(shown->request.kvHead) >= 0;
}

void Comparison::follow(const LayerQuantPtr& shown, int queryHead, int queryIndex) {
  if (!pinned_ || !dump_ || !shown) return;
  const DumpInfo& info = dump_->info();
  const int layerIndex = shown->tensors->layer;
  const QuantSpec key = specForLayer(pinned_->key, layerIndex, info.layers);
  const QuantSpec value = specForLayer(pinned_->value, layerIndex, info.layers);
  // The kv head in view read alone serves A only when A quantizes per head; else the window reads
  // the whole layer (MainWindow::recomputeLayer checks A's specs too) and calls again with it.
  if (!shown->tensors->whole() &&
      !(quantizesPerHead(key, info.headDim) && quantizesPerHead(value, info.headDim))) {
    return;
  }
  const int kvHead = static_cast<int>(shown->request.kvHead);
  int qh = -1, qi = 0;
  if (info.hasQuery && shown->tensors->query && info.groupSize() > 0) {
    qh = std::clamp(queryHead, 0, info.heads - 1);
    qi = std::clamp(queryIndex, 0, info.queries - 1);
    if (qh / info.groupSize() != kvHead) qh = -1;  // the window is moving to that head; it calls again
  }
  if (wantTensors_ == shown->tensors && wantHead_ == kvHead && wantQueryHead == qh && wantQueryIndex == qi) return;
  // The series along queries does not depend on the row: kept when only the row changes.
  DriftDataPtr previous;
  if (drift_ && layer_ && layer_->tensors == shown->tensors && layer_->request.kvHead == kvHead) previous = drift_;
  wantTensors_ = shown->tensors;
  wantHead_ = kvHead;
  wantQueryHead = qh;
  wantQueryIndex = qi;
  ViewRequest request;
  request.kvHead = kvHead;
  request.keyPreRopeHat = shown->tensors->keyPreRope.has_value();
  request.queryHead = qh;
  request.queryIndex = qi;
  auto dump = dump_;
  auto tensors = shown->tensors;
  auto pool = pool_;
  using Result = std::pair<LayerQuantPtr, DriftDataPtr>;
  layerRunner_->start<Result>(
      [dump, tensors, key, value, request, pool, previous](const Progress& progress) -> Expected<Result> {
        const DumpInfo& di = dump->info();
        auto a = pool->compute(di, tensors, key, value, request, progress);
        if (!a) return a.status();
        LayerQuantPtr layer = *a;
        if (request.queryHead < 0 || !layer->row || !tensors->query) return Result{layer, nullptr};
        auto drift = std::make_shared<DriftData>();
        drift->layer = tensors->layer;
        drift->row = std::shared_ptr<const AttentionRowDetail>(layer, &*layer->row);
        if (previous) {
          drift->series = previous->series;
          return Result{layer, drift};
        }
        // A's attention along query positions for the kv head in view (core's computeDrift, as
        // the window's drift lane computes B's); the row is the layer worker's.
        DriftInput input;
        input.key = &tensors->key;
        input.value = &tensors->value;
        input.query = &*tensors->query;
        input.keyHat = &layer->keyHat;
        input.valueHat = &layer->valueHat;
        input.hatHead = layer->hatHead(request.kvHead);
        input.queryHead = request.queryHead;
        input.queryIndex = request.queryIndex;
        input.softmaxScale = di.softmaxScale;
        input.row = false;
        input.firstHead = tensors->firstHead;  // a partial read holds that head only
        input.kvHeads = tensors->kvHeads;
        DriftWorkspace slices;
        auto computed = computeDrift(input, slices, progress);
        if (!computed) return computed.status();
        drift->series = std::move(computed->series);
        return Result{layer, drift};
      },
      [this](Result result) {
        layer_ = std::move(result.first);
        drift_ = std::move(result.second);
        emit layerReady();
      });
}

void Comparison::startSummary() {
  if (!dump_ || !pinned_) return;
  auto dump = dump_;
  EvalOptions options;
  options.key = pinned_->key;
  options.value = pinned_->value;
  summary_.clear();
  summaryRunner_->startStreaming(
      [this, dump, options](const Progress& progress, const JobRunner::Post& post) -> Status {
        // eval's own loop (core/report/eval.h), each layer posted as soon as it is done.
        EvalOptions streamed = options;
        streamed.onLayer = [this, &post](const LayerResult& result) {
          post([this, result] {
            summary_.push_back(result);
            emit summaryChanged();
          });
        };
        auto evaluated = evaluate(*dump, streamed, progress);
        return evaluated ? Status::ok() : evaluated.status();
      },
      [this] { emit summaryFinished(); });
}

}  // namespace kvscope::ui
