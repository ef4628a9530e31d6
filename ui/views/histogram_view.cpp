// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/views/histogram_view.h"

#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QValueAxis>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include "core/inspect/view_compare.h"
#include "ui/state/session.h"
#include "ui/export/chart_render.h"
#include "ui/export/chart_ticks.h"
#include "ui/widgets/chart_view.h"
#include "ui/workers/job_runner.h"

namespace kvscope::ui {

namespace {
QString num(double v) { return QString::number(v, 'g', 5); }
constexpr double kLogFloor = 0.5;  // empty bins sit below 1 on a log count axis
constexpr int kMaxDrawnLevels = 64;
constexpr double kLevelBand = 0.08;  // the levels' ticks rise this fraction of the count axis
// A zoom recounts up to this many values (original, reconstruction and A together) on the GUI
// thread, about 2 ms (core's countInRange, one division per value); more go to a worker thread.
constexpr int64_t kRebinOnGuiThread = int64_t{1} << 20;

// What a recount over a zoomed range delivers.
struct Rebinned {
  HistogramData bins;
  std::vector<double> a;        // A's counts
  std::vector<double> density;  // tq/tqp's expected counts
};
}  // namespace

HistogramView::HistogramView(QWidget* parent) : QWidget(parent) {
  chart_ = new QChart;
  applyPaletteTheme(chart_);
  chart_->setAnimationOptions(QChart::NoAnimation);
  chart_->legend()->setAlignment(Qt::AlignBottom);
  original_ = new QLineSeries;
  original_->setName(tr("original"));
  reconstructed_ = new QLineSeries;
  reconstructed_->setName(tr("reconstructed"));
  levels_ = new QLineSeries;
  levels_->setName(tr("levels of the group"));
  QPen levelPen(QColor(96, 96, 96));
  levelPen.setWidthF(1.0);
  levels_->setPen(levelPen);
  levels_->setProperty("kvscopeNoReadout", true);  // a zig-zag through the levels, not a value per x
  QPen originalPen(QColor(31, 119, 180));
  originalPen.setWidthF(2.0);
  original_->setPen(originalPen);
  QPen reconstructedPen(QColor(255, 127, 14));
  reconstructedPen.setWidthF(1.5);
  reconstructed_->setPen(reconstructedPen);
  density_ = new QLineSeries;
  density_->setName(tr("density the codebook assumes"));
  QPen densityPen(QColor(44, 160, 44));
  densityPen.setWidthF(1.5);
  densityPen.setStyle(Qt::DashLine);
  density_->setPen(densityPen);
  chart_->addSeries(levels_);
  chart_->addSeries(original_);
  chart_->addSeries(reconstructed_);
  chart_->addSeries(density_);
  reconstructedA_ = new QLineSeries;
  reconstructedA_->setName(tr("reconstructed A"));
  QPen aPen(QColor(148, 103, 189));
  aPen.setWidthF(1.5);
  aPen.setStyle(Qt::DashLine);
  reconstructedA_->setPen(aPen);
  reconstructedA_->setVisible(false);
  chart_->addSeries(reconstructedA_);
  // Both count axes stay in the chart (removing an axis before the chart was first drawn left its
  // labels in the scene): the log/linear switch moves the series and shows the axis they are on.
  xAxis_ = new QValueAxis(this);
  xAxis_->setTitleText(tr("value"));
  keepNiceTicks(xAxis_, 8);
  linearAxis_ = new QValueAxis(this);
  linearAxis_->setTitleText(tr("count"));
  keepNiceTicks(linearAxis_);
  logAxis_ = new QLogValueAxis(this);
  logAxis_->setBase(10);
  keepLogLabels(logAxis_);
  logAxis_->setTitleText(tr("count"));
  chart_->addAxis(xAxis_, Qt::AlignBottom);
  chart_->addAxis(linearAxis_, Qt::AlignLeft);
  chart_->addAxis(logAxis_, Qt::AlignLeft);
  logAxis_->setVisible(false);
  for (QLineSeries* s : {levels_, original_, reconstructed_, density_, reconstructedA_}) {
    s->attachAxis(xAxis_);
    s->attachAxis(linearAxis_);
  }
  view_ = new InteractiveChartView(chart_, this);

  tensor_ = new QComboBox(this);
  addNamedItem(tensor_, QStringLiteral("key"), tr("K"), static_cast<int>(ViewTensor::Key));
  addNamedItem(tensor_, QStringLiteral("key_prerope"), tr("pre-RoPE K"), static_cast<int>(ViewTensor::KeyPreRope));
  addNamedItem(tensor_, QStringLiteral("value"), tr("V"), static_cast<int>(ViewTensor::Value));
  tensor_->setToolTip(tr("Which tensor of the layer to count: keys after RoPE, keys before RoPE, or values."));
  scope_ = new QComboBox(this);
  addNamedItem(scope_, QStringLiteral("head"), tr("whole head"), static_cast<int>(HistogramScope::Head));
  addNamedItem(scope_, QStringLiteral("channel"), tr("one channel"), static_cast<int>(HistogramScope::Channel));
  addNamedItem(scope_, QStringLiteral("token"), tr("one token"), static_cast<int>(HistogramScope::Token));
  scope_->setToolTip(tr("Count every value of the kv head, only the selected channel, or only the selected token."));
  space_ = new QComboBox(this);
  addNamedItem(space_, QStringLiteral("original"), tr("space: original"), 0);
  addNamedItem(space_, QStringLiteral("rotated"), tr("space: rotated"), 1);  // the format's input (tooltip)
  space_->setCurrentIndex(1);
  space_->setToolTip(tr("For a rotated spec: count the dump's values, or the values the format quantizes "
                        "(rotated, outliers zeroed; tq/tqp: each token divided by its norm), with the "
                        "group's levels and, for tq/tqp, the density its codebook assumes."));
  auto* channel = new QSpinBox(this);
  channel->setObjectName(QStringLiteral("histogramChannel"));
  channel->setToolTip(tr("The selected channel: the scope 'one channel' and the group whose levels are drawn."));
  auto* token = new QSpinBox(this);
  token->setObjectName(QStringLiteral("histogramToken"));
  token->setToolTip(tr("The selected token: the scope 'one token' and the group whose levels are drawn."));
  channel->setRange(0, 1 << 20);
  token->setRange(0, 1 << 24);
  bins_ = new QSpinBox(this);
  bins_->setRange(8, 1024);
  bins_->setValue(128);
  bins_->setToolTip(tr("Number of histogram bins across the values' range."));
  counts_ = new QComboBox(this);
  addNamedItem(counts_, QStringLiteral("auto"), tr("auto counts"));
  addNamedItem(counts_, QStringLiteral("linear"), tr("linear counts"));
  addNamedItem(counts_, QStringLiteral("log"), tr("log counts"));
  counts_->setToolTip(tr("Count axis. auto: logarithmic when the tallest bin holds more than %1 times the median "
                         "non-empty bin (heavy tails: a linear axis would show one spike), else linear.")
                          .arg(kHeavyTailRatio));
  rebin_ = new JobRunner(tr("histogram bins"), this);
  // A zoom (or pan) of the x axis counts the bins again over the visible range.
  connect(view_, &InteractiveChartView::xRangeChanged, this, &HistogramView::zoomTo);

  auto* controls = new QHBoxLayout;
  controls->addWidget(new QLabel(tr("Tensor"), this));
  controls->addWidget(tensor_);
  controls->addWidget(scope_);
  controls->addWidget(space_);
  controls->addWidget(new QLabel(tr("channel"), this));
  controls->addWidget(channel);
  controls->addWidget(new QLabel(tr("token"), this));
  controls->addWidget(token);
  controls->addWidget(new QLabel(tr("bins"), this));
  controls->addWidget(bins_);
  controls->addWidget(counts_);
  controls->addStretch(1);
  stats_ = new QLabel(this);
  stats_->setWordWrap(true);
  stats_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addLayout(controls);
  layout->addWidget(view_, 1);
  layout->addWidget(stats_);

  connect(tensor_, &QComboBox::currentIndexChanged, this, [this] {
    refresh();
    needsChanged();  // pre-RoPE K′ may have to be computed
  });
  connect(scope_, &QComboBox::currentIndexChanged, this, &HistogramView::refresh);
  connect(space_, &QComboBox::currentIndexChanged, this, &HistogramView::refresh);
  connect(bins_, &QSpinBox::valueChanged, this, &HistogramView::refresh);
  connect(counts_, &QComboBox::currentIndexChanged, this, &HistogramView::requestRebuild);
  // The channel and token are the session's selection (other views follow it, and a layer or
  // head switch keeps it): a change goes there and comes back through takeSelection.
  connect(channel, &QSpinBox::valueChanged, this, [this](int v) {
    if (v == channel_) return;
    if (session()) session()->selectPoint(v, token_);
  });
  connect(token, &QSpinBox::valueChanged, this, [this](int v) {
    if (v == token_) return;
    if (session()) session()->selectPoint(channel_, v);
  });
  rebuildChart();
}

void HistogramView::setHasPreRope(bool has) {
  if (auto* model = qobject_cast<QStandardItemModel*>(tensor_->model())) {
    if (QStandardItem* item = model->item(1)) item->setEnabled(has);
  }
  if (!has && tensor_->currentIndex() == 1) tensor_->setCurrentIndex(0);
}

void HistogramView::setLayer(LayerQuantPtr layer, int kvHead, int channel, int token) {
  layer_ = std::move(layer);
  kvHead_ = kvHead;
  channel_ = channel;
  token_ = token;
  showPoint();
  recompute();
}

void HistogramView::showPoint() {
  auto* channelBox = findChild<QSpinBox*>(QStringLiteral("histogramChannel"));
  auto* tokenBox = findChild<QSpinBox*>(QStringLiteral("histogramToken"));
  const QSignalBlocker b1(channelBox), b2(tokenBox);
  if (layer_) {
    channelBox->setRange(0, static_cast<int>(layer_->tensors->key.dim) - 1);
    tokenBox->setRange(0, static_cast<int>(layer_->tensors->key.tokens) - 1);
    channel_ = std::clamp(channel_, 0, channelBox->maximum());
    token_ = std::clamp(token_, 0, tokenBox->maximum());
  }
  channelBox->setValue(channel_);
  tokenBox->setValue(token_);
}

void HistogramView::takeDump(const std::shared_ptr<const Dump>& dump, const ViewContext& context) {
  // Nothing of the previous dump stays: its data, its group, A's counts.
  layer_.reset();
  compare_.reset();
  data_ = {};
  group_.reset();
  formatSpace_.reset();
  channel_ = context.selection.channel;
  token_ = context.selection.token;
  kvHead_ = context.selection.kvHead;
  {
    const QSignalBlocker block(tensor_);
    setHasPreRope(dump && dump->info().hasKeyPreRope);
  }
  view_->resetZoom();
  recompute();
}

void HistogramView::clearResults(const QString& reason) {
  layer_.reset();
  compare_.reset();
  recompute();
  stats_->setText(reason.isEmpty() ? tr("No data.") : reason);
}

void HistogramView::takeSelection(const Selection& selection) {
  if (selection.channel == channel_ && selection.token == token_ && selection.kvHead == kvHead_) return;
  const bool sameHead = selection.kvHead == kvHead_;
  channel_ = selection.channel;
  token_ = selection.token;
  showPoint();
  // A new head's data arrives with takeLayer; a new point is counted here from the data held.
  if (sameHead) recompute();
}

void HistogramView::takeFocus(const Evidence& e, bool hasKeyPreRope) {
  int tensor = -1;
  if (e.tensor == "key") tensor = static_cast<int>(ViewTensor::Key);
  else if (e.tensor == "key_pre_rope" && hasKeyPreRope) tensor = static_cast<int>(ViewTensor::KeyPreRope);
  else if (e.tensor == "value") tensor = static_cast<int>(ViewTensor::Value);
  if (tensor < 0) return;
  if (const int i = tensor_->findData(tensor); i >= 0) tensor_->setCurrentIndex(i);
  int scope = -1;
  if (e.channel >= 0) scope = static_cast<int>(HistogramScope::Channel);
  else if (e.token >= 0) scope = static_cast<int>(HistogramScope::Token);
  if (scope < 0) return;
  if (const int i = scope_->findData(scope); i >= 0) scope_->setCurrentIndex(i);
  // The evidence's numbers are the dump's values (a kept sink token has no format input at all).
  if (const int i = space_->findData(0); i >= 0) space_->setCurrentIndex(i);
}

ViewTensor HistogramView::tensor() const { return static_cast<ViewTensor>(tensor_->currentData().toInt()); }

bool HistogramView::showsFormatSpace(ViewTensor t, const QuantSpec& spec) const {
  const bool formatTensor = t == ViewTensor::Value || (t == ViewTensor::Key && !spec.prerope) ||
                            (t == ViewTensor::KeyPreRope && spec.prerope);
  return formatTensor && rotates(spec) && space_->currentData().toInt() == 1 &&
         (!layer_ || checkRotation(spec, layer_->tensors->key.dim).isOk());
}

QString HistogramView::groupNote(ViewTensor t, const QuantSpec& spec, int64_t tokens) const {
  const bool formatSpace = t == ViewTensor::Value || (t == ViewTensor::Key && !spec.prerope) ||
                           (t == ViewTensor::KeyPreRope && spec.prerope);
  const QuantizedTokens range = quantizedTokens(spec, tokens);
  if (formatInfo(spec.format).groupCount == nullptr) {  // fp16, bf16, fp32, none
    return tr("no scale groups: %1 rounds each element").arg(QString::fromStdString(toString(spec)));
  }
  if (!formatSpace) {
    return tr("levels not drawn: this spec quantizes %1, not this tensor")
        .arg(spec.prerope ? tr("pre-RoPE K") : tr("K after RoPE"));
  }
  if (rotates(spec) && !showsFormatSpace(t, spec)) {
    return tr("levels not drawn: they apply in the rotated space (rot=%1; choose 'space: rotated')")
        .arg(rotationName(spec.rotation));
  }
  if (token_ < range.first || token_ >= range.first + range.count) {
    return tr("token %1 is kept exactly (sink, residual window or unfilled chunk)").arg(token_);
  }
  return {};
}

void HistogramView::fillRequest(ViewRequest& request, const QuantSpec& keySpec, const QuantSpec& valueSpec,
                                int64_t tokens) const {
  const ViewTensor t = tensor();
  const auto scope = static_cast<HistogramScope>(scope_->currentData().toInt());
  request.histogramTensor = tensorKindOf(t);
  request.histogramScope = scope;
  request.histogramIndex = scope == HistogramScope::Channel ? channel_ : token_;
  request.histogramBins = bins_->value();
  const QuantSpec& spec = t == ViewTensor::Value ? valueSpec : keySpec;
  request.group = groupNote(t, spec, tokens).isEmpty();
  request.formatSpace = showsFormatSpace(t, spec);
  request.groupToken = token_;
  request.groupChannel = channel_;
  if (t == ViewTensor::KeyPreRope) request.keyPreRopeHat = true;
}

void HistogramView::recompute() {
  // A zoom is counted again over the new data once the chart puts the kept x range back.
  ++generation_;
  rebin_->cancel();
  zoom_.reset();
  pendingZoom_.reset();
  formatSpaceShared_.reset();
  data_ = {};
  group_.reset();
  groupNote_.clear();
  formatSpace_.reset();
  if (layer_) space_->setEnabled(rotates(layer_->spec(tensor())));
  // A partial read (the kv head in view only) is indexed by originalHead, not by the layer head.
  const int64_t sourceHead = layer_ ? layer_->originalHead(kvHead_) : -1;
  if (layer_ && showsFormatSpace(tensor(), layer_->spec(tensor())) && layer_->original(tensor()) && sourceHead >= 0) {
    // The format's space: what the layer worker computed when it matches, else one head here.
    const ViewTensor t = tensor();
    const auto scope = static_cast<HistogramScope>(scope_->currentData().toInt());
    const int64_t index = scope == HistogramScope::Channel ? channel_ : token_;
    const ViewRequest& r = layer_->request;
    const QuantSpec& spec = layer_->spec(t);
    if (layer_->formatSpace && r.formatSpace && r.kvHead == kvHead_ && r.histogramTensor == tensorKindOf(t) &&
        r.histogramBins == bins_->value() && r.histogramScope == scope && r.histogramIndex == index &&
        r.groupToken == token_ && r.groupChannel == channel_) {
      formatSpace_ = layer_->formatSpace;
    } else {
      const LayerTensors& tensors = *layer_->tensors;
      const Tensor3* source = t == ViewTensor::Value ? &tensors.value
                              : (spec.prerope && tensors.keyPreRope) ? &*tensors.keyPreRope
                                                                     : &tensors.key;
      const bool perHead = quantizesPerHead(spec, source->dim);
      int64_t first = 0;
      const Status input =
          formatInputInto(*source, perHead ? sourceHead : 0, perHead ? 1 : source->heads, spec, formatInput_, &first);
      formatSpace_.emplace();
      const Status s = input.isOk() ? computeFormatSpaceInto(formatInput_, perHead ? 0 : kvHead_, first, spec, scope,
                                                             index, bins_->value(), token_, channel_, workspace_,
                                                             *formatSpace_)
                                    : input;
      if (!s.isOk()) {
        formatSpace_.reset();
        groupNote_ = QString::fromStdString(s.message());
      }
    }
    if (formatSpace_) {
      data_ = formatSpace_->histogram;
      group_ = formatSpace_->group;
      groupNote_ = QString::fromStdString(formatSpace_->note);
    }
    countComparison();
    requestRebuild();
    stats_->setText(statsText());
    return;
  }
  if (layer_) {
    const ViewTensor t = tensor();
    const auto scope = static_cast<HistogramScope>(scope_->currentData().toInt());
    const Tensor3* x = sourceHead >= 0 ? layer_->original(t) : nullptr;
    if (x) {
      const int64_t index = scope == HistogramScope::Channel ? channel_ : token_;
      const ViewRequest& r = layer_->request;
      const bool sameTensor = r.kvHead == kvHead_ && r.histogramTensor == tensorKindOf(t);
      if (sameTensor && r.histogramBins == bins_->value() && r.histogramScope == scope && r.histogramIndex == index) {
        // Computed by the layer worker (also after a click that changed only the group).
        data_ = layer_->histogram;
      } else {
        const int64_t hatHead = layer_->hatHead(kvHead_);
        computeHistogramInto(*x, sourceHead, hatHead >= 0 ? layer_->reconstruction(t) : nullptr, hatHead, scope,
                             index, bins_->value(), workspace_, data_);
      }
      const QuantSpec& spec = layer_->spec(t);
      groupNote_ = groupNote(t, spec, x->tokens);
      if (!groupNote_.isEmpty()) {
        // nothing to describe
      } else if (sameTensor && r.group && r.groupToken == token_ && r.groupChannel == channel_) {
        if (layer_->group) group_ = layer_->group;
        else groupNote_ = QString::fromStdString(layer_->groupError);
      } else {
        // Another group than the worker described (a click on the heat map): one head's format
        // input, or the layer's when the spec's groups span heads.
        const LayerTensors& tensors = *layer_->tensors;
        const Tensor3* source = t == ViewTensor::Value ? &tensors.value
                                : (spec.prerope && tensors.keyPreRope) ? &*tensors.keyPreRope
                                                                       : &tensors.key;
        const bool perHead = quantizesPerHead(spec, source->dim);
        int64_t first = 0;
        const Status input =
            formatInputInto(*source, perHead ? sourceHead : 0, perHead ? 1 : source->heads, spec, formatInput_, &first);
        auto detail = input.isOk() ? describeGroup(formatInput_, spec, perHead ? 0 : kvHead_, token_ - first, channel_)
                                   : Expected<GroupDetail>(input);
        if (detail) {
          group_ = std::move(detail).value();
        } else {
          groupNote_ = QString::fromStdString(detail.status().message());
        }
      }
    } else if (layer_->tensors->keyPreRopeSkipped && t == ViewTensor::KeyPreRope) {
      groupNote_ = tr("reading %1 of this layer…").arg(QString::fromUtf8(viewTensorLabel(t)));
    } else {
      groupNote_ = tr("this dump has no %1").arg(QString::fromUtf8(viewTensorLabel(t)));
    }
  }
  countComparison();
  requestRebuild();
  stats_->setText(statsText());
}

void HistogramView::takeComparison(const ComparisonData& a) {
  LayerQuantPtr next = a.pinned ? a.layer : nullptr;
  const bool otherDump = a.otherDump != nullptr;
  if (a.pinned == pinned_ && next == compare_ && otherDump == otherDump_ && a.note == feedNote_) return;
  pinned_ = a.pinned;
  compare_ = std::move(next);
  otherDump_ = otherDump;
  feedNote_ = a.note;
  recompute();
}

void HistogramView::countComparison() {
  compareCounts_.clear();
  compareNote_.clear();
  if (pinned_ && !feedNote_.isEmpty()) {
    compareNote_ = feedNote_;  // A's dump lacks the layer or kv head in view
    return;
  }
  if (!compare_ || !layer_ || data_.edges.size() < 2) return;
  if (formatSpace_) {
    compareNote_ = tr("A is drawn in the dump's values (space: original), not in B's rotated space.");
    return;
  }
  const ViewTensor t = tensor();
  const Tensor3* aHat = compare_->reconstruction(t);
  const int64_t aHead = compare_->hatHead(kvHead_);
  // A of this very layer read (on A's own dump: the same layer number, read from that dump).
  const bool sameLayer = otherDump_ ? compare_->tensors->layer == layer_->tensors->layer : compare_->tensors == layer_->tensors;
  if (!sameLayer || !aHat || aHead < 0) {
    compareNote_ = tr("A is being computed for this layer and head…");
    return;
  }
  const auto scope = static_cast<HistogramScope>(scope_->currentData().toInt());
  const int64_t index = scope == HistogramScope::Channel ? channel_ : token_;
  if (otherDump_ && scope == HistogramScope::Channel && index >= aHat->dim) {
    compareNote_ = tr("A's dump has head dim %1; channel %2 is not in it.").arg(aHat->dim).arg(index);
    return;
  }
  if (otherDump_ && scope == HistogramScope::Token && index >= aHat->tokens) {
    compareNote_ = tr("A's dump has %1 tokens; token %2 is not in it.").arg(aHat->tokens).arg(index);
    return;
  }
  // On B's bins (they span the original and B): A's values beyond them count in the outer bins.
  countOnEdges(*aHat, aHead, scope, index, data_.edges, compareCounts_);
}

void HistogramView::requestRebuild() {
  chartPending_ = true;
  if (isVisible()) flush();
}

void HistogramView::flush() {
  if (!chartPending_) return;
  chartPending_ = false;
  rebuildChart();
}

void HistogramView::showEvent(QShowEvent* event) {
  flush();
  QWidget::showEvent(event);
}

bool HistogramView::logCounts() const {
  const QString choice = currentItemName(counts_);
  if (choice == QStringLiteral("log")) return true;
  if (choice == QStringLiteral("linear")) return false;
  return prefersLogCounts(data_);  // the whole range's bins: a zoom does not flip the axis
}

bool HistogramView::rebinning() const { return pendingZoom_.has_value(); }

void HistogramView::zoomTo(double lo, double hi) {
  if (data_.edges.size() < 2 || !(hi > lo)) return;
  const double full0 = data_.edges.front(), full1 = data_.edges.back();
  const double slack = 1e-9 * (full1 - full0);
  if (lo <= full0 + slack && hi >= full1 - slack) {
    // The whole range (a reset) or more: the bins of the data.
    rebin_->cancel();
    pendingZoom_.reset();
    if (!zoom_) return;
    zoom_.reset();
    requestRebuild();
    stats_->setText(statsText());
    return;
  }
  pendingZoom_ = std::pair{lo, hi};
  rebin();
}

void HistogramView::rebin() {
  if (!pendingZoom_) return;
  if (!layer_) {
    pendingZoom_.reset();
    return;
  }
  const double lo = pendingZoom_->first, hi = pendingZoom_->second;  // plain variables: lambdas capture them
  const int bins = bins_->value();
  const auto scope = static_cast<HistogramScope>(scope_->currentData().toInt());
  // What to count: the format space's input and output, or the layer's original, B and A.
  const Tensor3 *x = nullptr, *hat = nullptr, *aHat = nullptr;
  int64_t head = 0, hatHead = 0, aHead = -1, index = scope == HistogramScope::Channel ? channel_ : token_;
  int64_t densityDim = 0;
  std::shared_ptr<const void> keep;  // what the pointers point into, for a worker thread
  if (formatSpace_) {
    if (!formatSpaceShared_) formatSpaceShared_ = std::make_shared<const FormatSpaceData>(*formatSpace_);
    const FormatSpaceData& f = *formatSpaceShared_;
    x = &f.input;
    hat = &f.output;
    if (scope == HistogramScope::Token) index -= f.firstToken;
    if (!f.density.empty()) densityDim = f.input.dim;
    keep = formatSpaceShared_;
  } else {
    const ViewTensor t = tensor();
    x = layer_->original(t);
    head = layer_->originalHead(kvHead_);
    hatHead = layer_->hatHead(kvHead_);
    hat = hatHead >= 0 ? layer_->reconstruction(t) : nullptr;
    if (!compareCounts_.empty() && compare_) {
      aHat = compare_->reconstruction(t);
      aHead = compare_->hatHead(kvHead_);
    }
    keep = std::make_shared<std::pair<LayerQuantPtr, LayerQuantPtr>>(layer_, compare_);
  }
  if (!x) {
    pendingZoom_.reset();
    return;
  }
  const int64_t count = data_.count;
  const auto work = [=]() {
    Rebinned r;
    rebinHistogramInto(*x, head, hat, hatHead, scope, index, lo, hi, bins, r.bins);
    if (aHat && aHead >= 0) countInRange(*aHat, aHead, scope, index, lo, hi, bins, r.a);
    if (densityDim > 0) r.density = sphereDensityCounts(densityDim, count, r.bins.edges);
    return r;
  };
  const uint64_t generation = generation_;
  const auto deliver = [this, generation, lo, hi](Rebinned r) {
    if (generation != generation_ || !pendingZoom_ || *pendingZoom_ != std::pair{lo, hi}) return;
    zoomed_ = std::move(r.bins);
    zoomedCompare_ = std::move(r.a);
    zoomedDensity_ = std::move(r.density);
    zoom_ = pendingZoom_;
    pendingZoom_.reset();
    requestRebuild();
    stats_->setText(statsText());
  };
  const int64_t slice = scope == HistogramScope::Head ? x->tokens * x->dim
                        : scope == HistogramScope::Channel ? x->tokens
                                                           : x->dim;
  const int64_t values = slice * (1 + (hat ? 1 : 0) + (aHat ? 1 : 0));
  if (values <= kRebinOnGuiThread) {
    rebin_->cancel();
    deliver(work());
    return;
  }
  // Newest wins: a pan's stream of ranges cancels the recount before it.
  rebin_->start<Rebinned>([work, keep](const Progress&) -> Expected<Rebinned> { return work(); }, deliver);
}

void HistogramView::rebuildChart() {
  const bool logCounts = this->logCounts();
  const HistogramData& h = shown();
  const std::vector<double>& aCounts = zoom_ ? zoomedCompare_ : compareCounts_;
  QList<QPointF> a, b, levels;
  double top = 1;
  for (size_t i = 0; i < h.original.size(); ++i) {
    const auto y = [&](double c) { return logCounts ? std::max(c, kLogFloor) : c; };
    a.append({h.edges[i], y(h.original[i])});
    a.append({h.edges[i + 1], y(h.original[i])});
    top = std::max(top, h.original[i]);
    if (!h.reconstructed.empty()) {
      b.append({h.edges[i], y(h.reconstructed[i])});
      b.append({h.edges[i + 1], y(h.reconstructed[i])});
      top = std::max(top, h.reconstructed[i]);
    }
  }
  QList<QPointF> aLine;
  for (size_t i = 0; i < aCounts.size() && i + 1 < h.edges.size(); ++i) {
    const double c = logCounts ? std::max(aCounts[i], kLogFloor) : aCounts[i];
    aLine.append({h.edges[i], c});
    aLine.append({h.edges[i + 1], c});
    top = std::max(top, aCounts[i]);
  }
  reconstructedA_->replace(aLine);
  reconstructedA_->setVisible(!aLine.isEmpty());
  double xlo = h.edges.empty() ? 0 : h.edges.front();
  double xhi = h.edges.empty() ? 1 : h.edges.back();
  const double base = logCounts ? kLogFloor : 0.0;
  // Round tops: a linear count axis ends on a tick, a log one on a decade.
  const double yTop = logCounts ? std::pow(10.0, std::ceil(std::log10(top * 1.5))) : niceRange(0, top).hi;
  // Qt Charts strokes a line's whole path on every update, and a zig-zag through hundreds of
  // levels cost the GUI thread 20-120 ms per spec change: denser grids are named, not drawn.
  // The levels are ticks in a band along the x axis, not lines through the bars: 16 or 32 levels
  // of a 4- or 5-bit format drawn full height hid the data under a grey block.
  const double bandTop = logCounts ? base * std::pow(yTop / base, kLevelBand) : yTop * kLevelBand;
  if (group_ && static_cast<int>(group_->levels.size()) <= kMaxDrawnLevels) {
    for (double level : group_->levels) {
      if (level < xlo || level > xhi) continue;
      levels.append({level, base});
      levels.append({level, bandTop});
      levels.append({level, base});
    }
  }
  QList<QPointF> density;
  const std::vector<double>& expected = zoom_ ? zoomedDensity_ : (formatSpace_ ? formatSpace_->density : zoomedDensity_);
  if (formatSpace_ && expected.size() == h.original.size()) {
    for (size_t i = 0; i < expected.size(); ++i) {
      const double c = expected[i];
      if (logCounts && c < kLogFloor) continue;  // below the log axis
      density.append({0.5 * (h.edges[i] + h.edges[i + 1]), c});
    }
  }
  // The log axis says so; under "auto" it says that the rule chose it.
  logAxis_->setTitleText(currentItemName(counts_) == QStringLiteral("auto") ? tr("count (log: heavy tails)") : tr("count (log)"));
  reconstructed_->setName(compare_ ? tr("reconstructed B") : tr("reconstructed"));
  original_->replace(a);
  reconstructed_->replace(b);
  levels_->replace(levels);
  // A hidden series hides its legend entry: "levels of the group" is named only where drawn.
  levels_->setVisible(!levels.isEmpty());
  density_->replace(density);
  // A hidden series hides its legend entry: the density is named only where it is drawn.
  density_->setVisible(!density.isEmpty());
  xAxis_->setTitleText(!formatSpace_                ? tr("value")
                       : formatSpace_->normalized ? tr("rotated coordinate / vector norm (u = v/‖v‖)")
                                                  : tr("rotated value (format input)"));

  // Zoomed, the x axis shows the user's range (the chart view keeps it); the data's own range
  // stays its home, where a reset returns.
  if (!zoom_ && !pendingZoom_) setAxisRange(xAxis_, xlo, xhi);
  QAbstractAxis* wanted = logCounts ? static_cast<QAbstractAxis*>(logAxis_) : linearAxis_;
  QAbstractAxis* other = logCounts ? static_cast<QAbstractAxis*>(linearAxis_) : logAxis_;
  if (!original_->attachedAxes().contains(wanted)) {
    for (QLineSeries* s : {levels_, original_, reconstructed_, density_, reconstructedA_}) {
      s->detachAxis(other);
      s->attachAxis(wanted);
    }
    other->setVisible(false);
    wanted->setVisible(true);
  }
  if (logCounts) {
    logAxis_->setRange(base, yTop);
    logAxis_->setMinorTickCount(8);
  } else {
    setAxisRange(linearAxis_, 0, yTop);
  }
  if (layer_) {
    const auto t = static_cast<ViewTensor>(tensor_->currentData().toInt());
    chart_->setTitle(tr("%1 · layer %2 · kv head %3 · %4 · %5")
                         .arg(QString::fromUtf8(viewTensorLabel(t)))
                         .arg(layer_->tensors->layer)
                         .arg(kvHead_)
                         .arg(scope_->currentText())
                         .arg(QString::fromStdString(toString(layer_->spec(t)))));
    if (compare_) {
      chart_->setTitle(tr("%1 · layer %2 · kv head %3 · %4 · B %5 · A %6")
                           .arg(QString::fromUtf8(viewTensorLabel(t)))
                           .arg(layer_->tensors->layer)
                           .arg(kvHead_)
                           .arg(scope_->currentText())
                           .arg(QString::fromStdString(toString(layer_->spec(t))),
                                QString::fromStdString(toString(compare_->spec(t)))));
    }
  } else {
    chart_->setTitle(tr("Histogram: no data yet"));
  }
}

QString HistogramView::countsText() const {
  if (!layer_ || data_.count == 0) return tr("No data.");
  QString text = tr("%1 values in [%2, %3] · kurtosis %4 · max/median |x| %5")
                     .arg(data_.count)
                     .arg(num(data_.min), num(data_.max), num(data_.kurtosis), num(data_.maxOverMedian));
  if (zoom_) {
    text += tr(" · zoomed: %1 of them in [%2, %3] on %4 bins").arg(zoomed_.count).arg(num(zoom_->first), num(zoom_->second)).arg(zoomed_.original.size());
  }
  return text;
}

QString HistogramView::statsText() const {
  if (!layer_ || data_.count == 0) return countsText();
  QString text;
  if (formatSpace_) {
    const QuantSpec& spec = layer_->spec(tensor());
    text = formatSpace_->normalized
               ? tr("Format space of %1: rotated coordinates of each quantized token divided by its norm; levels: "
                    "the codebook's centroids; dashed: the density f(t) ∝ (1−t²)^((D−3)/2) it assumes, D = %2.\n")
                     .arg(QString::fromStdString(toString(spec)))
                     .arg(formatSpace_->input.dim)
               : tr("Format space of %1: rotated values (outliers zeroed) and their reconstruction before "
                    "rotating back.\n")
                     .arg(QString::fromStdString(toString(spec)));
  }
  text += countsText();
  if (group_) {
    text += tr("\nGroup of (token %1, channel %2): %3 values, min %4, max %5, clipped to [%6, %7], "
               "scale %8, zero %9, codes used %10 of %11")
                .arg(token_)
                .arg(channel_)
                .arg(group_->size)
                .arg(num(group_->lo), num(group_->hi), num(group_->clipLo), num(group_->clipHi),
                     num(group_->scale), num(group_->zero))
                .arg(group_->codesUsed)
                .arg(group_->codesTotal);
    if (static_cast<int>(group_->levels.size()) > kMaxDrawnLevels) {
      text += tr(" (%1 levels: too dense to draw)").arg(group_->levels.size());
    }
  } else if (!groupNote_.isEmpty()) {
    text += QStringLiteral("\n") + groupNote_;
  }
  if (!compareNote_.isEmpty()) text += QStringLiteral("\n") + compareNote_;
  return text;
}

void HistogramView::renderTo(QPainter& painter, const QRectF& target) {
  flush();
  const QFontMetricsF fm(painter.font());
  // The figure's rule: the statistics under the chart, wrapped, as long as the chart keeps ten
  // lines of height; else only the line of count, range and kurtosis; else none.
  const QRectF textArea(0, 0, target.width() - 20, 1e6);
  const auto heightOf = [&](const QString& text) {
    return text.isEmpty() ? 0.0 : fm.boundingRect(textArea, Qt::TextWordWrap, text).height() + fm.height() * 0.5;
  };
  QString stats = statsText();
  double statsHeight = heightOf(stats);
  const double chartNeeds = 10 * fm.lineSpacing();
  if (target.height() - statsHeight < chartNeeds) {
    stats = countsText();
    statsHeight = heightOf(stats);
  }
  if (target.height() - statsHeight < chartNeeds) {
    stats.clear();
    statsHeight = 0;
  }
  const QRectF chartRect(target.left(), target.top(), target.width(), target.height() - statsHeight);
  renderChart(chart_, painter, chartRect);
  if (stats.isEmpty()) return;
  painter.save();
  painter.fillRect(QRectF(target.left(), chartRect.bottom(), target.width(), statsHeight),
                   chart_->backgroundBrush());
  painter.setPen(chart_->titleBrush().color());
  painter.drawText(QRectF(target.left() + 10, chartRect.bottom(), target.width() - 20, statsHeight),
                   Qt::AlignLeft | Qt::AlignVCenter | Qt::TextWordWrap, stats);
  painter.restore();
}

QString HistogramView::toCsv() const {
  // The bins drawn: over the zoomed range when the chart is zoomed (a comment line says so).
  const HistogramData& h = shown();
  const std::vector<double>& aCounts = zoom_ ? zoomedCompare_ : compareCounts_;
  const bool ab = !aCounts.empty();
  QString out;
  // What was counted, by the names sessions use (pandas.read_csv(f, comment="#") skips these).
  const QString scope = currentItemName(scope_);
  out += QStringLiteral("# tensor: %1\n").arg(currentItemName(tensor_));
  out += QStringLiteral("# scope: %1\n")
             .arg(scope == QLatin1String("channel") ? QStringLiteral("channel %1").arg(channel_)
                  : scope == QLatin1String("token") ? QStringLiteral("token %1").arg(token_)
                                                    : scope);
  // The space counted: "rotated" only where the spec rotates and the box asks for it.
  const bool rotated = layer_ && showsFormatSpace(tensor(), layer_->spec(tensor()));
  out += QStringLiteral("# space: %1\n").arg(rotated ? QStringLiteral("rotated") : QStringLiteral("original"));
  if (zoom_) {
    out += QStringLiteral("# zoomed: %1 bins over [%2, %3] only; reset the zoom for the whole range\n")
               .arg(h.original.size())
               .arg(zoom_->first, 0, 'g', 9)
               .arg(zoom_->second, 0, 'g', 9);
  }
  out += ab ? QStringLiteral("bin_lo,bin_hi,original,reconstructed_b,reconstructed_a\n")
            : QStringLiteral("bin_lo,bin_hi,original,reconstructed\n");
  for (size_t i = 0; i < h.original.size(); ++i) {
    out += QStringLiteral("%1,%2,%3,%4")
               .arg(h.edges[i], 0, 'g', 9)
               .arg(h.edges[i + 1], 0, 'g', 9)
               .arg(h.original[i])
               .arg(h.reconstructed.empty() ? 0.0 : h.reconstructed[i]);
    if (ab) out += QStringLiteral(",%1").arg(i < aCounts.size() ? aCounts[i] : 0.0);
    out += QLatin1Char('\n');
  }
  if (group_) {
    out += QStringLiteral("\nlevel\n");
    for (double l : group_->levels) out += QString::number(l, 'g', 9) + QLatin1Char('\n');
  }
  return out;
}

QString HistogramView::tabTitle() const { return tr("Histogram"); }

nlohmann::json HistogramView::saveState() const {
  return {{"tensor", currentItemName(tensor_).toStdString()},
          {"scope", currentItemName(scope_).toStdString()},
          {"counts", currentItemName(counts_).toStdString()},
          {"bins", bins_->value()},
          {"space", currentItemName(space_).toStdString()}};
}

void HistogramView::loadState(const nlohmann::json& state) {
  // Indexes (sessions written before names) through the entries' order then.
  loadNamedChoice(tensor_, state, "tensor", {"key", "key_prerope", "value"}, QStringLiteral("key"));
  loadNamedChoice(scope_, state, "scope", {"head", "channel", "token"}, QStringLiteral("head"));
  // Sessions written before the automatic choice hold "log": true (log) or false (now auto).
  if (state.contains("counts")) {
    loadNamedChoice(counts_, state, "counts", {"auto", "linear", "log"}, QStringLiteral("auto"));
  } else {
    selectItemName(counts_, state.value("log", false) ? QStringLiteral("log") : QStringLiteral("auto"));
  }
  if (state.contains("bins")) bins_->setValue(state.value("bins", 128));
  loadNamedChoice(space_, state, "space", {"original", "rotated"}, QStringLiteral("rotated"));
}

void HistogramView::fillRequest(ViewRequest& request, const ViewContext& context) const {
  fillRequest(request, context.key, context.value, context.info->tokens);
}

void HistogramView::takeLayer(const LayerQuantPtr& layer, const ViewContext& context) {
  setLayer(layer, context.selection.kvHead, context.selection.channel, context.selection.token);
}

}  // namespace kvscope::ui
