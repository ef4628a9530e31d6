// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/state/view_feed.h"

#include <algorithm>

#include "ui/state/session.h"
#include "ui/workers/job_runner.h"

namespace kvscope::ui {

ViewFeed::ViewFeed(Session* session, std::function<Needs()> viewNeeds, QObject* parent)
    : QObject(parent), session_(session), viewNeeds_(std::move(viewNeeds)) {
  b_ = new SettingLane(QString(), this);
  a_ = new SettingLane(QStringLiteral("A"), this);
  fillRunner_ = new JobRunner(tr("reading layer"), this);
  fillRunner_->setNice(19);
  recomputeTimer_.setSingleShot(true);
  recomputeTimer_.setInterval(40);
  connect(&recomputeTimer_, &QTimer::timeout, this, [this] {
    // The summary (every layer) waits until the visible views have their data, and stops meanwhile.
    b_->summaryRunner()->cancel();
    summaryPending_ = true;
    recomputeLayer();
  });
  connect(session_, &Session::dumpChanged, this, &ViewFeed::onDumpChanged);
  connect(session_, &Session::settingChanged, this, &ViewFeed::onSettingChanged);
  connect(session_, &Session::pinnedChanged, this, &ViewFeed::onPinnedChanged);
  connect(session_, &Session::selectionChanged, this, &ViewFeed::onSelectionChanged);

  connect(b_, &SettingLane::layerComputed, this, &ViewFeed::onLayerComputed);
  connect(b_, &SettingLane::driftChanged, this, [this] {
    emit driftShown(b_->drift(), QString());
    if (b_->drift() && b_->drift()->hasSeries) emit driftReady();
  });
  connect(b_, &SettingLane::summaryChanged, this, &ViewFeed::summaryChanged);
  connect(b_, &SettingLane::summaryFinished, this, [this] {
    emit summaryChanged();
    emit summaryFinished();
  });
  connect(a_, &SettingLane::layerComputed, this, [this](const LayerQuantPtr& result) {
    if (session_->pinnedOnOtherDump()) aCache_.put(result->tensors, session_->selection().layer);
    if (!comparisonMatches()) return;
    const auto [queryHead, row] = queryOfA();
    if (queryHead >= 0) a_->computeDrift(queryHead, row);
    emit comparisonChanged();
    emit comparisonReady();
  });
  connect(a_, &SettingLane::driftChanged, this, [this] {
    emit comparisonChanged();
    if (a_->drift() && a_->drift()->hasSeries) emit comparisonReady();
  });
  connect(a_, &SettingLane::summaryChanged, this, &ViewFeed::comparisonChanged);
  connect(a_, &SettingLane::summaryFinished, this, [this] {
    emit comparisonChanged();
    emit comparisonReady();
  });
}

ViewFeed::~ViewFeed() {
  fillRunner_->cancel();
  fillRunner_->waitForIdle();
}

QList<JobRunner*> ViewFeed::runners() const { return b_->runners() + a_->runners() + QList<JobRunner*>{fillRunner_}; }

bool ViewFeed::busy() const {
  const QList<JobRunner*> all = runners();
  return std::any_of(all.begin(), all.end(), [](const JobRunner* r) { return r->busy(); });
}

std::optional<PlanPair> ViewFeed::plansB() const {
  if (!session_->usable()) return std::nullopt;
  return PlanPair{session_->keyPlan(), session_->valuePlan()};
}

// ---- Session changes ---------------------------------------------------------------------------

void ViewFeed::onDumpChanged() {
  // One transaction: nothing of the old dump survives, then the new one is computed.
  recomputeTimer_.stop();
  fillRunner_->cancel();
  fillingLayer_ = -1;
  cache_.clear();
  shown_.reset();
  summaryPending_ = false;
  const auto& pin = session_->pinned();
  b_->reset(session_->dump(), plansB());
  aNote_.clear();
  if (!session_->pinnedOnOtherDump()) {
    // A on the open dump follows it; A on a dump of its own keeps its results.
    aCache_.clear();
    a_->reset(session_->pinnedDump(), pin ? std::optional<PlanPair>(PlanPair{pin->key, pin->value}) : std::nullopt);
  }
  emit cleared(session_->settingProblem());
  emit comparisonChanged();
  if (!session_->usable()) return;
  recomputeLayer();
  recomputeSummary();
  if (a_->active() && !a_->summaryComplete()) a_->computeSummary(session_->selection().layer);
}

void ViewFeed::onSettingChanged() {
  if (!session_->dump()) return;
  if (!session_->usable()) {
    // The views show no result of a setting that does not fit the dump.
    recomputeTimer_.stop();
    const bool had = shown_ != nullptr || b_->plans().has_value();
    b_->setPlans(std::nullopt);
    shown_.reset();
    if (had) emit cleared(session_->settingProblem());
    return;
  }
  const bool wasCleared = !b_->plans().has_value();
  b_->setPlans(plansB());
  if (wasCleared) {
    recomputeTimer_.stop();
    recomputeLayer();
    recomputeSummary();
    return;
  }
  recomputeTimer_.start();
}

void ViewFeed::onPinnedChanged() {
  const auto& pin = session_->pinned();
  aCache_.clear();
  aNote_.clear();
  a_->reset(session_->pinnedDump(), pin ? std::optional<PlanPair>(PlanPair{pin->key, pin->value}) : std::nullopt);
  emit comparisonChanged();
  if (!a_->active()) return;
  a_->computeSummary(session_->selection().layer);
  if (!shown_) return;
  if (session_->pinnedOnOtherDump()) {
    followA();  // A reads its own dump; B's layer serves as it is
    return;
  }
  // A layer read head first serves A only when A quantizes per head (and reads pre-RoPE K when
  // A's K is prerope); else it is read again for what is needed now.
  const Needs views = viewNeeds_();
  if (!needsOf(views.request, views.showsPreRope).metBy(*shown_->tensors, shown_->request.kvHead)) {
    recomputeLayer();
    return;
  }
  followA();
}

void ViewFeed::onSelectionChanged(int what) {
  if (!session_->usable()) return;
  const Selection& sel = session_->selection();
  if (what & kLayerChanged) {
    recomputeLayer();
    return;
  }
  if (what & kKvHeadChanged) {
    if (!shown_ || shown_->hatHead(sel.kvHead) < 0) {
      recomputeLayer();  // only the old head was quantized; the drift row follows the result
      return;
    }
    emit layerShown(shown_);
    emit layerReady();
    recomputeDrift();
    followA();
    return;
  }
  if (what & kQueryChanged) {
    recomputeDrift();
    followA();
  }
}

void ViewFeed::viewsChanged() {
  if (!shown_ || shown_->keyPreRopeHat || !session_->usable()) return;
  if (!shown_->tensors->keyPreRope && !shown_->tensors->keyPreRopeSkipped) return;
  if (viewNeeds_().showsPreRope) recomputeLayer();
}

// ---- The layer in view -------------------------------------------------------------------------

LayerNeeds ViewFeed::needsOf(const ViewRequest& request, bool showsPreRope) const {
  const DumpInfo& info = session_->dump()->info();
  std::vector<LayerSpecs> settings{b_->specsOf(session_->selection().layer)};
  // A on the open dump is computed from the same read (A on its own dump reads that dump).
  if (a_->active() && !session_->pinnedOnOtherDump()) settings.push_back(a_->specsOf(session_->selection().layer));
  return layerNeeds(info, request, settings, showsPreRope);
}

void ViewFeed::recomputeLayer() {
  if (!session_->usable() || !b_->plans()) return;
  const auto dump = session_->dump();
  const DumpInfo& info = dump->info();
  const int layer = session_->selection().layer;
  // Everything the visible views show is computed in the worker, for the selected kv head only
  // where the specs allow (core's computeViewData); the GUI thread then only draws.
  const Needs views = viewNeeds_();
  const ViewRequest& request = views.request;
  // A layer not read yet, or read only for another head: when the views of one kv head need only
  // that head (every spec in force quantizes per head), read that head first (K, V, its queries,
  // pre-RoPE K when a view or a K spec uses it), show it, and read the rest of the layer afterwards
  // on the fill lane; else read the whole layer.
  const LayerNeeds needs = needsOf(request, views.showsPreRope);
  LayerTensorsPtr cached = cache_.find(layer);
  if (cached && !cached->whole() && !needs.metBy(*cached, request.kvHead)) cached.reset();
  const int64_t keyBytes = int64_t{info.kvHeads} * info.tokens * info.headDim * int64_t{sizeof(float)};
  const bool headFirst = !cached && needs.perHead && info.kvHeads > 1 && keyBytes >= headFirstBytes_;
  if (!cached) {
    fillRunner_->cancel();  // this read outranks the rest of another layer
    fillingLayer_ = -1;
  }
  LayerJob job;
  job.tensors = cached;
  job.layer = layer;
  job.request = request;
  if (!cached) {
    job.read = [dump, layer, headFirst, kvHead = request.kvHead, preRope = needs.preRope](const Progress& progress) {
      return headFirst ? readLayerHead(*dump, layer, kvHead, preRope, progress) : readLayer(*dump, layer, progress);
    };
  }
  if (!b_->computeLayer(std::move(job)) && b_->layer() && b_->layer() == shown_) {
    // What is asked is shown already: a slider dragged back to where it started (the recompute
    // timer fires once, after the drag). The views are current; the summary, which the drag
    // stopped and dropped, starts again.
    emit layerReady();
    if (shown_->tensors->query && b_->drift() && b_->drift()->hasSeries) emit driftReady();
    if (summaryPending_) {
      summaryPending_ = false;
      recomputeSummary();
    }
  }
}

void ViewFeed::onLayerComputed(const LayerQuantPtr& result) {
  const Selection& sel = session_->selection();
  cache_.put(result->tensors, sel.layer);
  if (result->tensors->layer != sel.layer || result->hatHead(sel.kvHead) < 0) return;
  shown_ = result;
  emit layerShown(shown_);
  recomputeDrift();
  followA();
  if (!shown_->tensors->whole()) {
    // What was read for one head may no longer be enough: while it was read, a setting that needs
    // the whole layer was pinned again (undo), or a view switched to pre-RoPE K. Then read again
    // for what is asked now (a layer in the cache that falls short is dropped).
    const Needs views = viewNeeds_();
    if (!needsOf(views.request, views.showsPreRope).metBy(*shown_->tensors, views.request.kvHead)) {
      recomputeLayer();
      return;
    }
    // The views have their data; the rest of the layer follows on the fill lane (nice 19, so their
    // paint gets the CPU first), so that other heads and specs of it read nothing. A fill of this
    // layer already under way goes on (a new one would start again at head 0).
    auto part = shown_->tensors;
    auto source = session_->dump();
    const bool filling = fillRunner_->busy() && fillingLayer_ == part->layer;
    const LayerTensorsPtr have = cache_.find(part->layer);
    if (!filling && (!have || !have->whole())) {
      fillingLayer_ = part->layer;
      fillRunner_->start<LayerTensorsPtr>(
          [source, part](const Progress& progress) { return completeLayer(*source, *part, progress); },
          [this](LayerTensorsPtr whole) {
            fillingLayer_ = -1;
            cache_.put(whole, session_->selection().layer);
          });
    }
  }
  emit layerReady();
  if (summaryPending_) {
    summaryPending_ = false;
    recomputeSummary();
  }
}

void ViewFeed::recomputeDrift() {
  if (!shown_ || !session_->usable()) return;
  const DumpInfo& info = session_->dump()->info();
  if (!info.hasQuery || !shown_->tensors->query) {
    emit driftShown(nullptr, tr("This dump has no queries, so attention cannot be reconstructed."));
    emit driftReady();
    return;
  }
  const Selection& sel = session_->selection();
  b_->computeDrift(std::clamp(sel.queryHead, 0, info.heads - 1), sel.queryRow(info.queries));
}

void ViewFeed::recomputeSummary() {
  if (!session_->usable()) return;
  b_->computeSummary(session_->selection().layer);
  emit summaryChanged();  // the views drop the rows of the setting before
}

// ---- A -----------------------------------------------------------------------------------------

bool ViewFeed::comparisonMatches() const {
  const LayerQuantPtr& a = a_->layer();
  if (!a || !shown_) return false;
  if (session_->pinnedOnOtherDump()) {
    // The same layer number and kv head, read from A's dump.
    return a->tensors->layer == shown_->tensors->layer && a->request.kvHead == shown_->request.kvHead &&
           a->hatHead(shown_->request.kvHead) >= 0;
  }
  return a->tensors == shown_->tensors && a->hatHead(shown_->request.kvHead) >= 0;
}

ComparisonData ViewFeed::comparison() const {
  ComparisonData c;
  c.pinned = a_->active();
  c.otherDump = c.pinned && session_->pinnedOnOtherDump() ? &session_->pinned()->dump->info() : nullptr;
  // On another dump a result of another layer or head is never handed out as this one's.
  c.layer = c.pinned && (!c.otherDump || comparisonMatches()) ? a_->layer() : nullptr;
  c.drift = c.pinned && (!c.otherDump || comparisonMatches()) ? a_->drift() : nullptr;
  c.summary = &a_->summary();
  c.note = c.pinned ? aNote_ : QString();
  return c;
}

bool ViewFeed::comparisonComplete() const {
  if (!a_->active()) return true;
  if (!a_->summaryComplete()) return false;
  if (!aNote_.isEmpty()) return true;  // A's dump lacks the layer or head in view: nothing to wait for
  if (!comparisonMatches()) return false;
  // The drift view draws A's row once its lane has delivered it (dumps with queries only).
  if (queryOfA().first < 0 || !a_->layer()->tensors->query) return true;
  return a_->drift() && a_->drift()->hasSeries;
}

std::pair<int, int> ViewFeed::queryOfA() const {
  const auto aDump = session_->pinnedDump();
  if (!aDump || !session_->dump()) return {-1, -1};
  const DumpInfo& b = session_->dump()->info();
  const DumpInfo& a = aDump->info();
  if (!a.hasQuery || !b.hasQuery || a.groupSize() <= 0) return {-1, -1};
  const Selection& sel = session_->selection();
  const int queryHead = std::clamp(sel.queryHead, 0, std::max(0, b.heads - 1));
  const int row = sel.queryRow(b.queries);
  if (!session_->pinnedOnOtherDump()) return {queryHead, row};
  // The same query head when A's dump has it in the same kv head; the row counted from the end.
  if (queryHead >= a.heads || queryHead / a.groupSize() != sel.kvHead) return {-1, -1};
  const int aRow = a.queries - (b.queries - row);
  if (aRow < 0) return {-1, -1};
  return {queryHead, aRow};
}

void ViewFeed::followOtherDump() {
  const DumpInfo& a = session_->pinned()->dump->info();
  const int layer = shown_->tensors->layer;
  const int kvHead = shown_->request.kvHead;
  QString note;
  if (layer >= a.layers) {
    note = (a.layers == 1 ? tr("A's dump has 1 layer; layer %1 is not in it.")
                          : tr("A's dump has %1 layers; layer %2 is not in it.").arg(a.layers))
               .arg(layer);
  } else if (kvHead >= a.kvHeads) {
    note = (a.kvHeads == 1 ? tr("A's dump has 1 kv head; kv head %1 is not in it.")
                           : tr("A's dump has %1 kv heads; kv head %2 is not in it.").arg(a.kvHeads))
               .arg(kvHead);
  }
  if (note != aNote_) {
    aNote_ = note;
    emit comparisonChanged();
  }
  if (!note.isEmpty()) {
    a_->cancelLayer();
    emit comparisonReady();
    return;
  }
  const auto [queryHead, row] = queryOfA();
  ViewRequest request;
  request.kvHead = kvHead;
  request.keyPreRopeHat = shown_->tensors->keyPreRope.has_value() && a.hasKeyPreRope;
  request.queryHead = queryHead;
  request.queryIndex = row;
  if (comparisonMatches()) {
    // Only the row may have changed: A's drift computes it (and keeps its series).
    if (queryHead >= 0) a_->computeDrift(queryHead, row);
    return;
  }
  LayerJob job;
  job.tensors = aCache_.find(layer);
  job.layer = layer;
  job.request = request;
  if (!job.tensors) {
    job.read = [dump = session_->pinned()->dump, layer](const Progress& progress) { return readLayer(*dump, layer, progress); };
  }
  a_->computeLayer(std::move(job));
}

void ViewFeed::followA() {
  if (!a_->active() || !shown_) return;
  if (session_->pinnedOnOtherDump()) {
    followOtherDump();
    return;
  }
  const DumpInfo& info = session_->dump()->info();
  const int layer = shown_->tensors->layer;
  const LayerSpecs a = a_->specsOf(layer);
  // The kv head in view read alone serves A only when A quantizes per head; else the layer is
  // being read whole for both (needsOf counts A's specs) and this is called again with it.
  if (!shown_->tensors->whole() && !(quantizesPerHead(a.key, info.headDim) && quantizesPerHead(a.value, info.headDim)))
    return;
  const Selection& sel = session_->selection();
  ViewRequest request;
  request.kvHead = shown_->request.kvHead;
  request.keyPreRopeHat = shown_->tensors->keyPreRope.has_value();
  if (info.hasQuery && shown_->tensors->query && info.groupSize() > 0) {
    const int qh = std::clamp(sel.queryHead, 0, info.heads - 1);
    if (qh / info.groupSize() == request.kvHead) {
      request.queryHead = qh;
      request.queryIndex = sel.queryRow(info.queries);
    }
  }
  if (comparisonMatches() && a_->layer()->request.kvHead == request.kvHead) {
    // Only the row may have changed: A's drift computes it (and keeps its series).
    if (request.queryHead >= 0) a_->computeDrift(request.queryHead, request.queryIndex);
    return;
  }
  a_->computeLayer(LayerJob{shown_->tensors, {}, layer, request});
}

}  // namespace kvscope::ui
