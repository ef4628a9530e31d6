// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/views/sensitivity_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QMouseEvent>
#include <QPainter>
#include <QPushButton>
#include <QStandardItemModel>
#include <QToolTip>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "core/quant/spec.h"
#include "ui/views/colour_map.h"
#include "ui/export/chart_ticks.h"
#include "ui/state/session.h"
#include "ui/workers/job_runner.h"

namespace kvscope::ui {

namespace {

// Figure layout, in pixels of the target.
constexpr double kTop = 30, kSideTitle = 22, kLeft = 62, kBottom = 36, kGap = 10, kColourBar = 14,
                 kColourLabels = 64, kMaxCellWidth = 110, kMaxCellHeight = 48;

constexpr AttentionField kFields[] = {AttentionField::KlMean,   AttentionField::KlMax,
                                      AttentionField::ScoreMae, AttentionField::ScoreMax,
                                      AttentionField::Top1Agreement, AttentionField::OutputRelError};

QString q(const std::string& s) { return QString::fromStdString(s); }
QString number(double v) { return QString::number(v, 'g', 4); }

/// What the colour shows for a field: top1_agreement is coloured as its complement, so that
/// brighter is always more damage.
QString colouredName(AttentionField field) {
  if (field == AttentionField::Top1Agreement) return QStringLiteral("1 − top1_agreement");
  return QString::fromLatin1(attentionFieldName(field));
}

double colouredValue(const AttentionMetrics& m, AttentionField field) {
  const double v = attentionFieldValue(m, field);
  return field == AttentionField::Top1Agreement ? 1.0 - v : v;
}

const SensitivitySide& sideOf(const SensitivityMap& map, bool isKey) { return isKey ? map.key : map.value; }

}  // namespace

Expected<std::vector<std::string>> sensitivityCandidateList(const QString& text, const DumpInfo& info) {
  const std::string t = text.trimmed().toStdString();
  if (t.empty() || t == "default") return sensitivityCandidates();
  if (t == "search") return defaultCandidates(KvShape{info.headDim, info.layers, info.kvHeads});
  std::vector<std::string> out;
  for (const QString& part : text.split(QLatin1Char(';'))) {
    const std::string item = part.trimmed().toStdString();
    if (item.empty()) continue;
    auto spec = parseSpec(item);
    if (!spec) {
      return Status::invalidArgument("candidates '" + t + "': '" + item + "' is not a spec (" +
                                     spec.status().message() + "); allowed: default, search, or SPEC;SPEC;…");
    }
    out.push_back(item);
  }
  if (out.empty()) return Status::invalidArgument("candidates '" + t + "': no specs; allowed: default, search, or SPEC;SPEC;…");
  return out;
}

// ---------------------------------------------------------------------------------------------
// Canvas

SensitivityCanvas::SensitivityCanvas(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setMinimumSize(420, 240);
}

void SensitivityCanvas::setMap(SensitivityMapPtr map, int candidate, AttentionField field) {
  map_ = std::move(map);
  candidate_ = candidate;
  field_ = field;
  computeRanges();
  update();
}

void SensitivityCanvas::setPlaceholder(const QString& text) {
  placeholder_ = text;
  update();
}

void SensitivityCanvas::setSelection(int layer, int kvHead) {
  selLayer_ = layer;
  selHead_ = kvHead;
  update();
}

AttentionField SensitivityCanvas::sideField(bool isKey) const {
  return isKey ? field_ : AttentionField::OutputRelError;
}

SensitivityCell SensitivityCanvas::cell(bool isKey, size_t layerIndex, int kvHead) const {
  SensitivityCell c;
  if (!map_ || layerIndex >= map_->layers.size()) return c;
  const SensitivitySide& side = sideOf(*map_, isKey);
  if (!side.mapped || candidate_ < 0 || static_cast<size_t>(candidate_) >= side.candidates.size()) return c;
  if (kvHead < 0 || kvHead >= side.kvHeads || !side.candidates[static_cast<size_t>(candidate_)].skipped.empty()) return c;
  c.valid = true;
  c.isKey = isKey;
  c.layer = map_->layers[layerIndex];
  c.kvHead = kvHead;
  c.metrics = &side.at(layerIndex, kvHead, static_cast<size_t>(candidate_));
  c.value = colouredValue(*c.metrics, sideField(isKey));
  return c;
}

void SensitivityCanvas::computeRanges() {
  // One scale for both sides when they show the same quantity (so K and V compare by colour),
  // else one per side. Log scale: the range runs from the smallest positive value to the largest.
  double lo[2] = {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
  double hi[2] = {0, 0};
  if (map_) {
    for (int s = 0; s < 2; ++s) {
      const bool isKey = s == 0;
      const SensitivitySide& side = sideOf(*map_, isKey);
      for (size_t li = 0; li < map_->layers.size(); ++li) {
        for (int g = 0; g < side.kvHeads; ++g) {
          const SensitivityCell c = cell(isKey, li, g);
          if (!c.valid || !std::isfinite(c.value)) continue;
          hi[s] = std::max(hi[s], c.value);
          if (c.value > 0) lo[s] = std::min(lo[s], c.value);
        }
      }
    }
  }
  if (sideField(true) == sideField(false)) {
    lo[0] = lo[1] = std::min(lo[0], lo[1]);
    hi[0] = hi[1] = std::max(hi[0], hi[1]);
  }
  for (int s = 0; s < 2; ++s) {
    if (!std::isfinite(lo[s]) || hi[s] <= 0) {
      lo[s] = 0;
      hi[s] = 0;  // nothing positive to colour
    } else if (hi[s] <= lo[s]) {
      lo[s] = hi[s] / 10;  // one value: a decade below it, so it draws at the top
    }
    grids_[s].lo = lo[s];
    grids_[s].hi = hi[s];
  }
}

std::pair<double, double> SensitivityCanvas::scaleRange(bool isKey) const {
  const Grid& g = grids_[isKey ? 0 : 1];
  return {g.lo, g.hi};
}

QString SensitivityCanvas::describe(const SensitivityCell& c) const {
  if (!c.valid || !map_) return {};
  const SensitivitySide& side = sideOf(*map_, c.isKey);
  const SensitivityCandidate& cand = side.candidates[static_cast<size_t>(candidate_)];
  QString text = tr("%1 · layer %2 · kv head %3\ncandidate %4 (%5 bits/element)")
                     .arg(c.isKey ? tr("K (key_only)") : tr("V (value_only)"))
                     .arg(c.layer)
                     .arg(c.kvHead)
                     .arg(q(cand.spec))
                     .arg(cand.bitsPerElement, 0, 'g', 4);
  const AttentionField shown = sideField(c.isKey);
  text += QStringLiteral("\n%1 = %2").arg(QString::fromLatin1(attentionFieldName(shown)),
                                          number(attentionFieldValue(*c.metrics, shown)));
  if (c.isKey) {
    for (AttentionField f : kFields) {
      if (f == shown) continue;
      text += QStringLiteral("\n  %1 = %2").arg(QString::fromLatin1(attentionFieldName(f)),
                                                number(attentionFieldValue(*c.metrics, f)));
    }
  } else {
    text += tr("\n  (values change only the output: the scores, KL and top-1 are those of the original)");
  }
  return text;
}

void SensitivityCanvas::paintFigure(QPainter& painter, const QRectF& target) { draw(painter, target, false); }

void SensitivityCanvas::draw(QPainter& painter, const QRectF& target, bool screen) {
  painter.save();
  const QPalette pal = palette();
  painter.fillRect(target, pal.color(QPalette::Base));
  painter.setPen(pal.color(QPalette::Text));
  const QFont font = painter.font();
  const QFontMetricsF fm(font);
  QFont bold = font;
  bold.setBold(true);

  const SensitivitySide* any = map_ ? (map_->key.mapped ? &map_->key : &map_->value) : nullptr;
  QString title = tr("Sensitivity map");
  if (any && candidate_ >= 0 && static_cast<size_t>(candidate_) < any->candidates.size()) {
    title += tr(" · candidate %1").arg(q(any->candidates[static_cast<size_t>(candidate_)].spec));
  }
  painter.setFont(bold);
  painter.drawText(QRectF(target.left(), target.top(), target.width(), kTop), Qt::AlignCenter, title);
  painter.setFont(font);
  if (!map_) {
    painter.drawText(target.adjusted(20, kTop, -20, 0), Qt::AlignCenter | Qt::TextWordWrap,
                     placeholder_.isEmpty() ? tr("No map yet: open a dump with queries and show this view.") : placeholder_);
    painter.restore();
    return;
  }

  const double halfWidth = target.width() / 2;
  const int layers = static_cast<int>(map_->layers.size());
  for (int s = 0; s < 2; ++s) {
    const bool isKey = s == 0;
    const SensitivitySide& side = sideOf(*map_, isKey);
    const QRectF area(target.left() + s * halfWidth, target.top() + kTop, halfWidth, target.height() - kTop);
    const AttentionField shown = sideField(isKey);
    painter.setFont(bold);
    painter.drawText(QRectF(area.left(), area.top(), area.width(), kSideTitle), Qt::AlignCenter,
                     isKey ? tr("K — key_only %1").arg(colouredName(shown))
                           : tr("V — value_only %1").arg(colouredName(shown)));
    painter.setFont(font);
    Grid grid = grids_[s];
    const double right = kGap + kColourBar + kColourLabels;
    const double availW = std::max(10.0, area.width() - kLeft - right - kGap);
    const double availH = std::max(10.0, area.height() - kSideTitle - kBottom);
    const int heads = std::max(1, side.kvHeads > 0 ? side.kvHeads : map_->dump.kvHeads);
    const double cw = std::min(kMaxCellWidth, availW / heads);
    // On screen a cell is at most kMaxCellHeight tall; a figure fills its height with cells up to
    // 1.5 times as tall as wide, so that an export of few layers is not left a third blank.
    const double ch = std::min(screen ? kMaxCellHeight : std::max(kMaxCellHeight, 1.5 * cw), availH / std::max(1, layers));
    const QRectF plot(area.left() + kLeft + (availW - cw * heads) / 2, area.top() + kSideTitle, cw * heads,
                      ch * std::max(1, layers));
    grid.plot = plot;
    if (screen) grids_[s].plot = plot;  // hit areas are the screen's, whatever an export draws

    const SensitivityCandidate* cand =
        side.mapped && static_cast<size_t>(candidate_) < side.candidates.size() ? &side.candidates[static_cast<size_t>(candidate_)]
                                                                                 : nullptr;
    if (!side.mapped || cand == nullptr || !cand->skipped.empty()) {
      painter.drawRect(plot);
      painter.drawText(plot.adjusted(4, 4, -4, -4), Qt::AlignCenter | Qt::TextWordWrap,
                       !side.mapped ? tr("not mapped")
                                    : tr("skipped for this side: %1").arg(cand ? q(cand->skipped) : QString()));
      continue;
    }
    const double logSpan = grid.hi > grid.lo && grid.lo > 0 ? std::log(grid.hi / grid.lo) : 0.0;
    const auto fraction = [&](double v) {
      if (!(v > 0) || grid.hi <= 0) return 0.0;
      if (logSpan <= 0) return 1.0;
      return std::clamp(std::log(v / grid.lo) / logSpan, 0.0, 1.0);
    };
    const bool labels = cw >= fm.horizontalAdvance(QStringLiteral("0.0000")) + 6 && ch >= fm.height() + 2;
    for (int li = 0; li < layers; ++li) {
      for (int g = 0; g < side.kvHeads; ++g) {
        const SensitivityCell c = cell(isKey, static_cast<size_t>(li), g);
        const QRectF r(plot.left() + g * cw, plot.top() + li * ch, cw, ch);
        const double t = fraction(c.value);
        const QColor colour = QColor::fromRgb(colourAt(t));
        painter.fillRect(r, colour);
        if (labels) {
          // Dark text on bright cells (relative luminance, Rec. 601 weights), light on dark ones.
          const double luma = 0.299 * colour.redF() + 0.587 * colour.greenF() + 0.114 * colour.blueF();
          painter.setPen(luma > 0.45 ? Qt::black : Qt::white);
          painter.drawText(r, Qt::AlignCenter, QString::number(c.value, 'g', 3));
        }
      }
    }
    painter.setPen(pal.color(QPalette::Text));
    painter.drawRect(plot);
    // The selected (layer, kv head).
    const auto sel = std::find(map_->layers.begin(), map_->layers.end(), selLayer_);
    if (sel != map_->layers.end() && selHead_ >= 0 && selHead_ < side.kvHeads) {
      const double li = static_cast<double>(sel - map_->layers.begin());
      const QRectF r(plot.left() + selHead_ * cw, plot.top() + li * ch, cw, ch);
      painter.setPen(QPen(Qt::white, 3));
      painter.drawRect(r.adjusted(1.5, 1.5, -1.5, -1.5));
      painter.setPen(QPen(Qt::black, 1));
      painter.drawRect(r.adjusted(0.5, 0.5, -0.5, -0.5));
      painter.setPen(pal.color(QPalette::Text));
    }
    // Axes: layers down the left, kv heads along the bottom.
    const int layerStep = std::max(1, static_cast<int>(niceTickInterval(layers, std::max(1, static_cast<int>(plot.height() / (fm.height() * 1.4))))));
    for (int li = 0; li < layers; li += layerStep) {
      const double y = plot.top() + (li + 0.5) * ch;
      painter.drawText(QRectF(area.left(), y - fm.height() / 2, plot.left() - area.left() - 6, fm.height()),
                       Qt::AlignRight | Qt::AlignVCenter, QString::number(map_->layers[static_cast<size_t>(li)]));
    }
    const int headStep = std::max(1, static_cast<int>(niceTickInterval(side.kvHeads, std::max(1, static_cast<int>(plot.width() / 30)))));
    for (int g = 0; g < side.kvHeads; g += headStep) {
      const double x = plot.left() + (g + 0.5) * cw;
      painter.drawText(QRectF(x - 20, plot.bottom() + 2, 40, fm.height()), Qt::AlignHCenter | Qt::AlignTop, QString::number(g));
    }
    painter.drawText(QRectF(plot.left() - 40, plot.bottom() + 2 + fm.height(), plot.width() + 80, fm.height() + 2),
                     Qt::AlignCenter, tr("kv head"));
    painter.save();
    painter.translate(area.left() + 10, plot.center().y());
    painter.rotate(-90);
    painter.drawText(QRectF(-60, -fm.height() / 2, 120, fm.height()), Qt::AlignCenter, tr("layer"));
    painter.restore();

    // Colour bar, log scale: decades inside the range, and its ends.
    const QRectF bar(plot.right() + kGap, plot.top(), kColourBar, std::max(plot.height(), 80.0));
    QImage ramp(1, 256, QImage::Format_RGB32);
    for (int i = 0; i < 256; ++i) ramp.setPixel(0, 255 - i, colourAt(i / 255.0));
    painter.drawImage(bar, ramp);
    painter.drawRect(bar);
    std::vector<std::pair<double, double>> ticks;  // (fraction up the bar, value)
    if (grid.lo > 0 && grid.hi > grid.lo) {
      for (double d = std::pow(10.0, std::ceil(std::log10(grid.lo) - 1e-9)); d <= grid.hi * (1 + 1e-9); d *= 10) {
        ticks.emplace_back(std::log(d / grid.lo) / logSpan, d);
      }
      const double minGap = (fm.height() + 2) / bar.height();
      const auto farFromAll = [&](double f) {
        return std::all_of(ticks.begin(), ticks.end(), [&](const auto& t) { return std::abs(t.first - f) >= minGap; });
      };
      if (farFromAll(0.0)) ticks.emplace_back(0.0, grid.lo);
      if (farFromAll(1.0)) ticks.emplace_back(1.0, grid.hi);
    }
    for (const auto& [f, v] : ticks) {
      const double y = bar.bottom() - f * bar.height();
      painter.drawLine(QPointF(bar.right(), y), QPointF(bar.right() + 3, y));
      painter.drawText(QRectF(bar.right() + 5, y - fm.height() / 2, kColourLabels - 5, fm.height()),
                       Qt::AlignLeft | Qt::AlignVCenter, QString::number(v, 'g', 3));
    }
    painter.drawText(QRectF(bar.left(), bar.bottom() + 2 + fm.height(), kColourBar + kColourLabels, fm.height() + 2),
                     Qt::AlignLeft | Qt::AlignTop, tr("log scale"));
  }
  painter.restore();
}

void SensitivityCanvas::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  draw(painter, QRectF(rect()), true);
}

SensitivityCell SensitivityCanvas::cellAt(const QPointF& pos) const {
  if (!map_) return {};
  for (int s = 0; s < 2; ++s) {
    const Grid& grid = grids_[s];
    const SensitivitySide& side = sideOf(*map_, s == 0);
    if (!grid.plot.contains(pos) || side.kvHeads <= 0 || map_->layers.empty()) continue;
    const int g = std::clamp(static_cast<int>((pos.x() - grid.plot.left()) / grid.plot.width() * side.kvHeads), 0, side.kvHeads - 1);
    const int layers = static_cast<int>(map_->layers.size());
    const int li = std::clamp(static_cast<int>((pos.y() - grid.plot.top()) / grid.plot.height() * layers), 0, layers - 1);
    return cell(s == 0, static_cast<size_t>(li), g);
  }
  return {};
}

QRectF SensitivityCanvas::cellRect(bool isKey, size_t layerIndex, int kvHead) const {
  const Grid& grid = grids_[isKey ? 0 : 1];
  if (!map_ || map_->layers.empty()) return {};
  const SensitivitySide& side = sideOf(*map_, isKey);
  const double cw = grid.plot.width() / std::max(1, side.kvHeads);
  const double ch = grid.plot.height() / static_cast<double>(map_->layers.size());
  return {grid.plot.left() + kvHead * cw, grid.plot.top() + static_cast<double>(layerIndex) * ch, cw, ch};
}

void SensitivityCanvas::mouseMoveEvent(QMouseEvent* event) {
  const QString text = describe(cellAt(event->position()));
  if (text.isEmpty()) QToolTip::hideText();
  else QToolTip::showText(event->globalPosition().toPoint(), text, this);
}

void SensitivityCanvas::mousePressEvent(QMouseEvent* event) {
  const SensitivityCell c = cellAt(event->position());
  if (c.valid) emit cellClicked(c.layer, c.kvHead);
}

// ---------------------------------------------------------------------------------------------
// View

SensitivityView::SensitivityView(QWidget* parent) : QWidget(parent) {
  runner_ = new JobRunner(tr("sensitivity map"), this);
  canvas_ = new SensitivityCanvas(this);
  candidates_ = new QLineEdit(QStringLiteral("default"), this);
  candidates_->setToolTip(tr("The candidate specs to map, as kvscope-cli sensitivity --candidates takes them: "
                             "default (the ladder of docs/sensitivity.md), search (the budget search's whole set: "
                             "slow on a large dump) or specs joined by ';'. Enter recomputes the map."));
  candidates_->setMinimumWidth(220);
  metric_ = new QComboBox(this);
  for (AttentionField f : kFields) metric_->addItem(QString::fromLatin1(attentionFieldName(f)), static_cast<int>(f));
  metric_->setCurrentIndex(static_cast<int>(std::size(kFields)) - 1);  // output_rel_error: both sides have it
  metric_->setToolTip(tr("The key_only metric that colours the K grid (quantization.md §6). The V grid always shows "
                         "value_only output_rel_error: values do not change the scores, so the other metrics are "
                         "those of the original attention. top1_agreement is coloured as 1 − agreement."));
  candidate_ = new QComboBox(this);
  candidate_->setToolTip(tr("The candidate whose damage is shown; a candidate that does not apply to the dump is "
                            "disabled and its tooltip says why."));
  candidate_->setMinimumContentsLength(24);
  candidate_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  auto* computeButton = new QPushButton(tr("Compute"), this);
  computeButton->setObjectName(QStringLiteral("sensitivityCompute"));
  computeButton->setToolTip(tr("Compute the map now (it is computed when the view is first shown, and again when the "
                               "dump or the candidates change)."));
  status_ = new QLabel(this);
  status_->setObjectName(QStringLiteral("sensitivityStatus"));
  status_->setWordWrap(true);

  auto* controls = new QHBoxLayout;
  controls->addWidget(new QLabel(tr("Candidates"), this));
  controls->addWidget(candidates_, 1);
  controls->addWidget(computeButton);
  controls->addWidget(new QLabel(tr("Colour K by"), this));
  controls->addWidget(metric_);
  controls->addWidget(new QLabel(tr("at"), this));
  controls->addWidget(candidate_);
  auto* hint = new QLabel(tr("Hover a cell for its numbers; click it to select that layer and kv head everywhere."), this);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addLayout(controls);
  layout->addWidget(hint);
  layout->addWidget(canvas_, 1);
  layout->addWidget(status_);

  connect(metric_, &QComboBox::currentIndexChanged, this, &SensitivityView::refresh);
  connect(candidate_, &QComboBox::currentIndexChanged, this, [this] {
    if (candidate_->currentIndex() >= 0) preferredCandidate_ = candidate_->currentData().toString();
    refresh();
  });
  connect(candidates_, &QLineEdit::returnPressed, this, &SensitivityView::compute);
  connect(computeButton, &QPushButton::clicked, this, &SensitivityView::compute);
  connect(canvas_, &SensitivityCanvas::cellClicked, this, [this](int layer, int kvHead) {
    emit selected(layer, kvHead);
    if (session()) session()->select(layer, kvHead);
  });
  connect(runner_, &JobRunner::progressed, this, [this](double fraction, const QString&) {
    if (running_) setStatus(tr("Computing the map… %1%").arg(static_cast<int>(fraction * 100)));
  });
  connect(runner_, &JobRunner::busyChanged, this, [this](bool busy) {
    if (!busy && running_) {
      // Ended without a result: cancelled or failed (the window reports failures).
      running_ = false;
      runningDump_.reset();
      setStatus(tr("Not computed (cancelled or failed); press Compute to run it again."));
    }
  });
  connect(runner_, &JobRunner::failed, this, [this](const QString& message) {
    running_ = false;
    runningDump_.reset();
    setStatus(tr("⚠ %1").arg(message));
  });
}

SensitivityView::~SensitivityView() {
  runner_->cancel();
  runner_->waitForIdle();
}

void SensitivityView::setDump(std::shared_ptr<const Dump> dump) {
  runner_->cancel();
  running_ = false;
  runningDump_.reset();
  dump_ = std::move(dump);
  map_.reset();
  mapDump_.reset();
  candidate_->clear();
  refresh();
  setStatus(dump_ && !dump_->info().hasQuery
                       ? tr("This dump has no queries: the sensitivity map measures attention and needs them.")
                       : tr("The map is computed when this view is shown."));
  if (isVisible()) compute();
}

void SensitivityView::setSelection(int layer, int kvHead) { canvas_->setSelection(layer, kvHead); }

void SensitivityView::setStatus(const QString& text) {
  status_->setText(text);
  if (!map_) canvas_->setPlaceholder(text);
}

bool SensitivityView::upToDate() const {
  if (!dump_ || !map_ || mapDump_ != dump_) return false;
  auto wanted = sensitivityCandidateList(candidates_->text(), dump_->info());
  return wanted && *wanted == mapCandidates_;
}

void SensitivityView::compute() {
  if (!dump_) return;
  if (!dump_->info().hasQuery) {
    setStatus(tr("This dump has no queries: the sensitivity map measures attention and needs them."));
    return;
  }
  auto wanted = sensitivityCandidateList(candidates_->text(), dump_->info());
  if (!wanted) {
    setStatus(tr("⚠ %1").arg(q(wanted.status().message())));
    return;
  }
  if (map_ && mapDump_ == dump_ && *wanted == mapCandidates_) return;
  if (running_ && runningDump_ == dump_ && *wanted == runningCandidates_) return;
  runningDump_ = dump_;
  runningCandidates_ = *wanted;
  running_ = true;
  setStatus(tr("Computing the map…"));
  SensitivityOptions options;
  options.candidates = *wanted;
  auto dump = dump_;
  runner_->start<SensitivityMapPtr>(
      [dump, options](const Progress& progress) -> Expected<SensitivityMapPtr> {
        auto map = sensitivityMap(*dump, options, progress);
        if (!map) return map.status();
        return SensitivityMapPtr(std::make_shared<const SensitivityMap>(std::move(map).value()));
      },
      [this, dump, candidates = *wanted](SensitivityMapPtr map) {
        running_ = false;
        runningDump_.reset();
        if (dump != dump_) return;
        map_ = std::move(map);
        mapDump_ = dump;
        mapCandidates_ = candidates;
        fillCandidates();
        refresh();
        QString text = tr("%1 layers × %2 kv heads × %3 candidates (all queries).")
                           .arg(map_->layers.size())
                           .arg(map_->dump.kvHeads)
                           .arg(map_->key.candidates.size());
        for (const std::string& n : map_->notes) text += QStringLiteral(" ") + q(n);
        setStatus(text);
        emit computed();
        exportReady();
      });
}

void SensitivityView::fillCandidates() {
  const QSignalBlocker block(candidate_);
  candidate_->clear();
  if (!map_) return;
  const SensitivitySide& side = map_->key.mapped ? map_->key : map_->value;
  auto* model = qobject_cast<QStandardItemModel*>(candidate_->model());
  int firstUsable = -1;
  for (size_t c = 0; c < side.candidates.size(); ++c) {
    const std::string& keySkip = map_->key.mapped ? map_->key.candidates[c].skipped : std::string("not mapped");
    const std::string& valueSkip = map_->value.mapped ? map_->value.candidates[c].skipped : std::string("not mapped");
    candidate_->addItem(QStringLiteral("%1  (%2 b/el)").arg(q(side.candidates[c].spec)).arg(side.candidates[c].bitsPerElement, 0, 'g', 3),
                        q(side.candidates[c].spec));
    const int row = candidate_->count() - 1;
    QString tip;
    if (!keySkip.empty()) tip += tr("K: %1\n").arg(q(keySkip));
    if (!valueSkip.empty()) tip += tr("V: %1").arg(q(valueSkip));
    candidate_->setItemData(row, tip.trimmed(), Qt::ToolTipRole);
    const bool usable = keySkip.empty() || valueSkip.empty();
    if (model != nullptr) model->item(row)->setEnabled(usable);
    if (usable && firstUsable < 0) firstUsable = row;
  }
  int index = candidate_->findData(preferredCandidate_);
  if (index < 0 || (model && !model->item(index)->isEnabled())) {
    // The ladder's 4-bit rung when present (the setting users ask about first), else the first usable one.
    index = candidate_->findData(QStringLiteral("q4_0"));
    if (index < 0 || (model && !model->item(index)->isEnabled())) index = firstUsable;
  }
  candidate_->setCurrentIndex(std::max(0, index));
  if (candidate_->currentIndex() >= 0 && preferredCandidate_.isEmpty()) preferredCandidate_ = candidate_->currentData().toString();
}

void SensitivityView::restore(const QString& candidates, const QString& metric, const QString& candidate) {
  candidates_->setText(candidates);
  const int m = metric_->findText(metric);
  if (m >= 0) metric_->setCurrentIndex(m);
  // A spec as typed or canonical: the map's list holds canonical strings.
  auto parsed = parseSpec(candidate.toStdString());
  preferredCandidate_ = parsed ? q(toString(*parsed)) : candidate;
  const int c = candidate_->findData(preferredCandidate_);
  if (c >= 0) candidate_->setCurrentIndex(c);
  if (isVisible()) compute();
}

void SensitivityView::refresh() {
  const auto field = static_cast<AttentionField>(metric_->currentData().toInt());
  canvas_->setMap(map_, candidate_->currentIndex(), field);
}

void SensitivityView::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  compute();
}

void SensitivityView::renderTo(QPainter& painter, const QRectF& target) {
  canvas_->paintFigure(painter, target);
}

QString SensitivityView::toCsv() const { return map_ ? q(sensitivityToCsv(*map_)) : QString(); }

QString SensitivityView::tabTitle() const { return tr("Sensitivity"); }

nlohmann::json SensitivityView::saveState() const {
  return {{"candidates", candidates_->text().toStdString()},
          {"metric", metric_->currentText().toStdString()},
          {"candidate", shownCandidate().toStdString()}};
}

void SensitivityView::loadState(const nlohmann::json& state) {
  restore(QString::fromStdString(state.value("candidates", std::string("default"))),
          QString::fromStdString(state.value("metric", std::string("output_rel_error"))),
          QString::fromStdString(state.value("candidate", std::string())));
}

}  // namespace kvscope::ui
