// SPDX-License-Identifier: GPL-3.0-or-later
#include "ui/views/drift_view.h"

#include <QChart>
#include <QChartView>
#include <QCheckBox>
#include <QComboBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QFontMetrics>
#include <QHeaderView>
#include <QLabel>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QScrollBar>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QTableWidget>
#include <QValueAxis>
#include <QVBoxLayout>

#include <algorithm>
#include <vector>
#include <cmath>
#include <limits>

#include "ui/export/chart_render.h"
#include "ui/state/session.h"
#include "ui/export/chart_ticks.h"
#include "ui/widgets/chart_view.h"

namespace kvscope::ui {

namespace {

QChart* makeChart(const QString& title) {
  auto* chart = new QChart;
  applyPaletteTheme(chart);
  chart->setAnimationOptions(QChart::NoAnimation);
  chart->setTitle(title);
  chart->legend()->setAlignment(Qt::AlignRight);
  return chart;
}

QLineSeries* makeSeries(QChart* chart, const QString& name, const QColor& colour, double width,
                        Qt::PenStyle style = Qt::SolidLine) {
  auto* s = new QLineSeries;
  s->setName(name);
  QPen pen(colour);
  pen.setWidthF(width);
  pen.setStyle(style);
  s->setPen(pen);
  chart->addSeries(s);
  return s;
}

// Axes are made once and only re-ranged: replacing axes leaves stale axis items in the scene.
QValueAxis* addAxis(QChart* chart, Qt::Alignment where, const QString& title, const QList<QLineSeries*>& series) {
  auto* axis = new QValueAxis;
  axis->setTitleText(title);
  keepNiceTicks(axis);
  chart->addAxis(axis, where);
  for (QLineSeries* s : series) s->attachAxis(axis);
  return axis;
}

// x exactly over the data (positions are whole numbers), y widened to round numbers.
void setRanges(QValueAxis* x, QValueAxis* y, double x0, double x1, double y0, double y1) {
  setAxisRange(x, x0, x1 > x0 ? x1 : x0 + 1);
  const NiceRange r = niceRange(y0, y1);
  setAxisRange(y, r.lo, r.hi);
}

// A log probability axis spans at most this factor below the row's largest probability: keys
// further down carry no weight, and 30 decades of underflowing tails would squeeze the rest.
constexpr double kLogProbabilitySpan = 1e-8;

}  // namespace

DriftView::DriftView(QWidget* parent) : QWidget(parent) {
  head_ = new QSpinBox(this);
  head_->setToolTip(tr("The query head whose attention row is shown (its kv head is query head / group size)."));
  query_ = new QSpinBox(this);
  query_->setToolTip(tr("The query row: row i is the query at position T − Tq + i."));
  case_ = new QComboBox(this);
  addNamedItem(case_, QStringLiteral("key_only"), tr("key_only (K′, V)"));
  addNamedItem(case_, QStringLiteral("value_only"), tr("value_only (K, V′)"));
  addNamedItem(case_, QStringLiteral("joint"), tr("joint (K′, V′)"));
  case_->setToolTip(tr("Which tensors are reconstructed (K′, V′: quantized and dequantized) when comparing against the "
                        "original attention."));
  logP_ = new QCheckBox(tr("log P"), this);
  logP_->setChecked(true);
  logP_->setToolTip(tr("Logarithmic probability axis: a row is usually one or two keys near 1 and thousands near 0, "
                       "which a linear axis draws as a spike over a flat line. Values more than 8 decades below "
                       "the largest (and zeros) sit on the axis floor."));
  diff_ = new QCheckBox(tr("difference"), this);
  diff_->setToolTip(tr("Draw s′ − s and P′ − P instead of the values: over thousands of keys the two lines of a "
                       "small change cover each other."));
  linkX_ = new QCheckBox(tr("link key axes"), this);
  linkX_->setChecked(true);
  linkX_->setToolTip(tr("Zooming or panning the key positions of the score chart or the probability chart moves "
                        "the other one too."));
  info_ = new QLabel(this);
  info_->setWordWrap(true);
  top_ = new QTableWidget(0, 5, this);
  top_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  top_->setSelectionMode(QAbstractItemView::NoSelection);
  top_->verticalHeader()->setVisible(false);
  top_->setWordWrap(false);
  top_->setToolTip(tr("The keys the original row attends to most (largest P), with the reconstruction's P′ of "
                      "the case shown and the change."));

  scoreChart_ = makeChart(tr("Scores over key positions"));
  probChart_ = makeChart(tr("Attention probabilities over key positions"));
  posChart_ = makeChart(tr("Drift along query positions (this kv head)"));
  scoreOriginal_ = makeSeries(scoreChart_, tr("s (original)"), QColor(31, 119, 180), 2.0);
  scoreCase_ = makeSeries(scoreChart_, tr("s′ (quantized)"), QColor(255, 127, 14), 1.3);
  probOriginal_ = makeSeries(probChart_, tr("P (original)"), QColor(31, 119, 180), 2.0);
  probCase_ = makeSeries(probChart_, tr("P′ (quantized)"), QColor(255, 127, 14), 1.3);
  kl_ = makeSeries(posChart_, tr("KL(P‖P′)"), QColor(44, 160, 44), 1.8);
  rel_ = makeSeries(posChart_, tr("output rel. error"), QColor(214, 39, 40), 1.8);
  marker_ = makeSeries(posChart_, tr("selected query"), QColor(127, 127, 127), 1.0, Qt::DashLine);
  marker_->setProperty("kvscopeNoReadout", true);
  // A/B comparison: A's lines, dashed purple, beside B's (the current setting's).
  scoreCaseA_ = makeSeries(scoreChart_, tr("s′ A"), QColor(148, 103, 189), 1.3, Qt::DashLine);
  probCaseA_ = makeSeries(probChart_, tr("P′ A"), QColor(148, 103, 189), 1.3, Qt::DashLine);
  klA_ = makeSeries(posChart_, tr("KL A"), QColor(44, 160, 44).lighter(140), 1.5, Qt::DashLine);
  relA_ = makeSeries(posChart_, tr("output rel. error A"), QColor(214, 39, 40).lighter(140), 1.5, Qt::DashLine);
  for (QLineSeries* s : {scoreCaseA_, probCaseA_, klA_, relA_}) s->setVisible(false);
  scoreX_ = addAxis(scoreChart_, Qt::AlignBottom, tr("key position"), {scoreOriginal_, scoreCase_, scoreCaseA_});
  scoreY_ = addAxis(scoreChart_, Qt::AlignLeft, tr("score"), {scoreOriginal_, scoreCase_, scoreCaseA_});
  probX_ = addAxis(probChart_, Qt::AlignBottom, tr("key position"), {probOriginal_, probCase_, probCaseA_});
  probY_ = addAxis(probChart_, Qt::AlignLeft, tr("probability"), {probOriginal_, probCase_, probCaseA_});
  // Both probability axes stay in the chart (removing an axis from a chart left its labels drawn):
  // the log switch moves the series between them and shows the one they are on.
  probLogY_ = new QLogValueAxis;
  probLogY_->setBase(10);
  probLogY_->setTitleText(tr("P (log)"));  // short: a figure's chart is short
  keepLogLabels(probLogY_);
  probChart_->addAxis(probLogY_, Qt::AlignLeft);
  probLogY_->setVisible(false);
  // KL (nats) and the output's relative error have different units: one axis each.
  posX_ = addAxis(posChart_, Qt::AlignBottom, tr("query position"), {kl_, rel_, marker_, klA_, relA_});
  klY_ = addAxis(posChart_, Qt::AlignLeft, tr("KL (nats)"), {kl_, marker_, klA_});
  // Short enough for the chart's height at 1400 × 900; the legend names the line in full.
  relY_ = addAxis(posChart_, Qt::AlignRight, tr("rel. error"), {rel_, relA_});
  klY_->setLinePenColor(kl_->pen().color());
  klY_->setLabelsColor(kl_->pen().color());
  relY_->setLinePenColor(rel_->pen().color());
  relY_->setLabelsColor(rel_->pen().color());
  posChart_->legend()->setAlignment(Qt::AlignBottom);
  scoreView_ = new InteractiveChartView(scoreChart_, this);
  probView_ = new InteractiveChartView(probChart_, this);
  // Nine decades of P in a short plot: label every k-th decade, as an export does.
  connect(probChart_, &QChart::plotAreaChanged, this, [this] { fitLogLabels(); });
  posView_ = new InteractiveChartView(posChart_, this);
  posView_->setHint(tr("click: show that query's row above"));
  const auto keyLabel = [this](double x) {
    const auto j = static_cast<qsizetype>(std::llround(x));
    QString text = tr("key position %1").arg(j);
    if (j >= 0 && j < tokenText_.size()) text += QStringLiteral(" \u201c%1\u201d").arg(tokenText_[j]);
    return text;
  };
  scoreView_->setXLabeler(keyLabel);
  probView_->setXLabeler(keyLabel);
  posView_->setXLabeler([this](double x) {
    const auto j = static_cast<qsizetype>(std::llround(x));
    QString text = tr("query position %1").arg(j);
    if (j >= 0 && j < tokenText_.size()) text += QStringLiteral(" \u201c%1\u201d").arg(tokenText_[j]);
    return text;
  });
  connect(posView_, &InteractiveChartView::clicked, this, [this](QPointF value) { selectQueryAt(value.x()); });

  // The key axes of the two row charts move together while linked (zoom, pan, reset).
  connect(scoreView_, &InteractiveChartView::xRangeChanged, this, [this](double lo, double hi) {
    if (linkX_->isChecked()) probView_->showXRange(lo, hi);
  });
  connect(probView_, &InteractiveChartView::xRangeChanged, this, [this](double lo, double hi) {
    if (linkX_->isChecked()) scoreView_->showXRange(lo, hi);
  });
  connect(linkX_, &QCheckBox::toggled, this, [this](bool on) {
    if (on) probView_->showXRange(scoreX_->min(), scoreX_->max());
  });

  auto* controls = new QHBoxLayout;
  controls->addWidget(new QLabel(tr("Query head"), this));
  controls->addWidget(head_);
  controls->addWidget(new QLabel(tr("Query row"), this));
  controls->addWidget(query_);
  controls->addWidget(case_);
  controls->addWidget(logP_);
  controls->addWidget(diff_);
  controls->addWidget(linkX_);
  controls->addStretch(1);
  auto* topPanel = new QWidget(this);
  auto* topLayout = new QVBoxLayout(topPanel);
  topLayout->setContentsMargins(0, 0, 0, 0);
  topLayout->addWidget(new QLabel(tr("Top %1 keys by P").arg(kTopKeys), topPanel));
  topLayout->addWidget(top_, 1);
  auto* rows = new QGridLayout;
  rows->addWidget(scoreView_, 0, 0);
  rows->addWidget(probView_, 1, 0);
  rows->addWidget(topPanel, 0, 1, 2, 1);
  rows->setColumnStretch(0, 1);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addLayout(controls);
  layout->addWidget(info_);
  layout->addLayout(rows, 6);
  layout->addWidget(posView_, 3);
  for (QChartView* v : {scoreView_, probView_, posView_}) v->setMinimumHeight(200);

  const auto changed = [this] {
    if (session()) session()->selectQuery(head_->value(), query_->value());
  };
  connect(head_, &QSpinBox::valueChanged, this, changed);
  connect(query_, &QSpinBox::valueChanged, this, changed);
  connect(case_, &QComboBox::currentIndexChanged, this, [this] { requestRebuild(true); });
  connect(logP_, &QCheckBox::toggled, this, [this] { requestRebuild(true); });
  connect(diff_, &QCheckBox::toggled, this, [this] { requestRebuild(true); });
  setMessage(tr("No dump open."));
}

void DriftView::takeDump(const std::shared_ptr<const Dump>& dump, const ViewContext& context) {
  // Limits of the query selectors for the new dump (none without queries); nothing of the old one stays.
  const int heads = dump && dump->info().hasQuery ? dump->info().heads : 0;
  const int queries = dump ? dump->info().queries : 0;
  {
    const QSignalBlocker a(head_), b(query_);
    head_->setRange(0, std::max(0, heads - 1));
    query_->setRange(0, std::max(0, queries - 1));
    head_->setEnabled(heads > 0);
    query_->setEnabled(queries > 0);
  }
  compare_.reset();
  tokenText_ = context.tokenText;
  for (InteractiveChartView* v : {scoreView_, probView_, posView_}) v->resetZoom();
  setMessage(tr("Computing the attention of layer %1…").arg(context.selection.layer));
  takeSelection(context.selection);
}

void DriftView::takeDrift(const DriftDataPtr& drift, const QString& message) {
  if (!drift) {
    setMessage(message);
    return;
  }
  setData(drift, tokenText_);
}

void DriftView::setMessage(const QString& message) {
  data_.reset();
  info_->setText(message);
  requestRebuild(true);
}

void DriftView::setData(DriftDataPtr data, QStringList tokenText) {
  // The series arrives with the row the layer result already showed: the same object, or (a
  // row the drift lane computed itself) the same values.
  const bool sameRow =
      data_ && data && data_->row && data->row && data_->layer == data->layer &&
      (data_->row == data->row ||
       (data_->row->queryHead == data->row->queryHead && data_->row->queryIndex == data->row->queryIndex &&
        data_->row->keyOnly.scores == data->row->keyOnly.scores &&
        data_->row->valueOnly.probabilities == data->row->valueOnly.probabilities &&
        data_->row->joint.kl == data->row->joint.kl && data_->row->joint.outputRelError == data->row->joint.outputRelError));
  data_ = std::move(data);
  tokenText_ = std::move(tokenText);
  requestRebuild(!sameRow);
}

void DriftView::requestRebuild(bool rowToo) {
  rowPending_ = rowPending_ || rowToo;
  seriesPending_ = true;
  if (isVisible()) flush();
}

void DriftView::flush() {
  if (rowPending_) rebuildRow();
  if (seriesPending_) rebuildSeries();
  rowPending_ = seriesPending_ = false;
}

void DriftView::showEvent(QShowEvent* event) {
  flush();
  QWidget::showEvent(event);
}

const AttentionRowCase& DriftView::caseOf(const AttentionRowDetail& row) const {
  switch (case_->currentIndex()) {
    case 1: return row.valueOnly;
    case 2: return row.joint;
    default: return row.keyOnly;
  }
}

const std::vector<std::vector<double>>& DriftView::relOf(const AttentionPositionSeries& series) const {
  switch (case_->currentIndex()) {
    case 1: return series.relValueOnly;
    case 2: return series.relJoint;
    default: return series.relKeyOnly;
  }
}

const AttentionRowCase& DriftView::currentCase() const { return caseOf(*data_->row); }

const std::vector<std::vector<double>>& DriftView::currentRel() const { return relOf(data_->series); }

void DriftView::takeComparison(const ComparisonData& a) {
  const bool pinned = a.pinned;
  pinned_ = pinned;
  compare_ = pinned ? a.drift : nullptr;
  otherDump_ = pinned && a.otherDump != nullptr;
  aNote_ = pinned ? a.note : QString();
  kl_->setName(pinned ? tr("KL B") : tr("KL(P‖P′)"));
  rel_->setName(pinned ? tr("output rel. error B") : tr("output rel. error"));
  requestRebuild(true);
}

void DriftView::fitLogLabels() {
  // On screen only: a hidden view has no plot height of its own, and an export fits its own.
  if (probView_->isVisible() && probLogY_->isVisible()) fitLogDecades(probLogY_, probChart_->plotArea().height());
}

bool DriftView::compareRow() const {
  // On A's own dump the row is matched from the end (ui/state/view_feed.h), so its index differs.
  return pinned_ && compare_ && compare_->row && data_ && data_->row && compare_->layer == data_->layer &&
         compare_->row->queryHead == data_->row->queryHead &&
         (otherDump_ || compare_->row->queryIndex == data_->row->queryIndex);
}

bool DriftView::compareShown() const {
  return compareRow() && compare_->row->original.scores.size() == data_->row->original.scores.size();
}

bool DriftView::compareSeries() const {
  if (!compareRow()) return false;
  return otherDump_ ? !compare_->series.positions.empty() : compare_->series.positions == data_->series.positions;
}

void DriftView::rebuild() {
  rebuildRow();
  rebuildSeries();
}

namespace {

// A line of up to kMaxRowPoints points: longer rows (32k keys) keep each bucket's minimum and
// maximum in position order, so that spikes such as attention sinks stay visible while the GUI
// thread hands Qt Charts two thousand points (two per pixel of a wide chart), not tens of thousands.
constexpr size_t kMaxRowPoints = 2048;

QList<QPointF> envelope(const std::vector<double>& y) {
  QList<QPointF> out;
  const size_t n = y.size();
  if (n <= kMaxRowPoints) {
    out.reserve(static_cast<qsizetype>(n));
    for (size_t j = 0; j < n; ++j) out.append({static_cast<double>(j), y[j]});
    return out;
  }
  const size_t buckets = kMaxRowPoints / 2;
  out.reserve(static_cast<qsizetype>(kMaxRowPoints));
  for (size_t b = 0; b < buckets; ++b) {
    const size_t j0 = b * n / buckets, j1 = (b + 1) * n / buckets;
    size_t lo = j0, hi = j0;
    for (size_t j = j0 + 1; j < j1; ++j) {
      if (y[j] < y[lo]) lo = j;
      if (y[j] > y[hi]) hi = j;
    }
    const size_t first = std::min(lo, hi), second = std::max(lo, hi);
    out.append({static_cast<double>(first), y[first]});
    if (second != first) out.append({static_cast<double>(second), y[second]});
  }
  return out;
}

}  // namespace

void DriftView::useProbabilityAxis(bool log) {
  QAbstractAxis* wanted = log ? static_cast<QAbstractAxis*>(probLogY_) : probY_;
  QAbstractAxis* other = log ? static_cast<QAbstractAxis*>(probY_) : probLogY_;
  if (probOriginal_->attachedAxes().contains(wanted)) return;
  for (QLineSeries* s : {probOriginal_, probCase_, probCaseA_}) {
    s->detachAxis(other);
    s->attachAxis(wanted);
  }
  other->setVisible(false);
  wanted->setVisible(true);
}

void DriftView::rebuildRow() {
  for (QLineSeries* s : {scoreOriginal_, scoreCase_, probOriginal_, probCase_, scoreCaseA_, probCaseA_}) s->clear();
  const bool ab = compareShown();
  const bool diff = diff_->isChecked();
  const bool logP = logP_->isChecked() && !diff;  // a difference has negative values
  logP_->setEnabled(!diff);
  useProbabilityAxis(logP);
  scoreOriginal_->setVisible(!diff);
  probOriginal_->setVisible(!diff);
  scoreCaseA_->setVisible(ab);
  probCaseA_->setVisible(ab);
  const QString b = pinned_ ? tr(" B") : tr(" (quantized)");
  scoreCase_->setName(diff ? tr("s′ − s") + (pinned_ ? tr(" B") : QString()) : tr("s′") + b);
  probCase_->setName(diff ? tr("P′ − P") + (pinned_ ? tr(" B") : QString()) : tr("P′") + b);
  scoreCaseA_->setName(diff ? tr("s′ − s A") : tr("s′ A"));
  probCaseA_->setName(diff ? tr("P′ − P A") : tr("P′ A"));
  scoreY_->setTitleText(diff ? tr("s′ − s") : tr("score"));
  probY_->setTitleText(diff ? tr("P′ − P") : tr("probability"));
  probChart_->setTitle(diff ? tr("Change of the attention probabilities, P′ − P") : tr("Attention probabilities over key positions"));
  fillTopKeys();
  if (!data_ || !data_->row) {
    setRanges(scoreX_, scoreY_, 0, 1, 0, 1);
    setRanges(probX_, probY_, 0, 1, 0, 1);
    setDecadeRange(probLogY_, 1e-3, 1);
    return;
  }
  const AttentionRowDetail& row = *data_->row;
  const AttentionRowCase& o = row.original;
  const AttentionRowCase& c = currentCase();
  const AttentionRowCase* a = ab ? &caseOf(*compare_->row) : nullptr;
  const double last = static_cast<double>(row.position);
  const size_t n = o.scores.size();
  if (diff) {
    // s′ − s and P′ − P (A's against the same original), with 0 inside both axes.
    const auto minus = [n](const std::vector<double>& x, const std::vector<double>& ref) {
      std::vector<double> d(n);
      for (size_t j = 0; j < n; ++j) d[j] = x[j] - ref[j];
      return d;
    };
    double slo = 0, shi = 0, plo = 0, phi = 0;
    const auto fill = [&](const AttentionRowCase& k, const AttentionRowCase& ref, QLineSeries* scores,
                          QLineSeries* probabilities) {
      const std::vector<double> ds = minus(k.scores, ref.scores), dp = minus(k.probabilities, ref.probabilities);
      for (size_t j = 0; j < n; ++j) {
        slo = std::min(slo, ds[j]);
        shi = std::max(shi, ds[j]);
        plo = std::min(plo, dp[j]);
        phi = std::max(phi, dp[j]);
      }
      scores->replace(envelope(ds));
      probabilities->replace(envelope(dp));
    };
    fill(c, o, scoreCase_, probCase_);
    // A on its own dump against its own original (the same original on one dump).
    if (a) fill(*a, compare_->row->original, scoreCaseA_, probCaseA_);
    setRanges(scoreX_, scoreY_, 0, last, slo, shi);
    setRanges(probX_, probY_, 0, last, plo, phi);
  } else {
    double smin = 0, smax = 0, pmax = 0, pmin = std::numeric_limits<double>::infinity();
    const auto span = [&](const AttentionRowCase& k) {
      for (size_t j = 0; j < n; ++j) {
        smin = std::min(smin, k.scores[j]);
        smax = std::max(smax, k.scores[j]);
        pmax = std::max(pmax, k.probabilities[j]);
        if (k.probabilities[j] > 0) pmin = std::min(pmin, k.probabilities[j]);
      }
    };
    span(o);
    span(c);
    if (a) span(*a);
    scoreOriginal_->replace(envelope(o.scores));
    scoreCase_->replace(envelope(c.scores));
    if (a) scoreCaseA_->replace(envelope(a->scores));
    setRanges(scoreX_, scoreY_, 0, last, smin, smax);
    if (logP) {
      // Whole decades from the smallest positive value (at most kLogProbabilitySpan below the
      // largest) to the largest; smaller values and zeros are drawn on the floor.
      const double top = pmax > 0 ? pmax : 1.0;
      setDecadeRange(probLogY_, std::max(std::isfinite(pmin) ? pmin : top, top * kLogProbabilitySpan), top);
      fitLogLabels();
      const double bottom = probLogY_->min();
      const auto floored = [bottom](const std::vector<double>& p) {
        std::vector<double> out(p.size());
        for (size_t j = 0; j < p.size(); ++j) out[j] = std::max(p[j], bottom);
        return envelope(out);
      };
      probOriginal_->replace(floored(o.probabilities));
      probCase_->replace(floored(c.probabilities));
      if (a) probCaseA_->replace(floored(a->probabilities));
      setAxisRange(probX_, 0, last > 0 ? last : 1);
    } else {
      probOriginal_->replace(envelope(o.probabilities));
      probCase_->replace(envelope(c.probabilities));
      if (a) probCaseA_->replace(envelope(a->probabilities));
      setRanges(probX_, probY_, 0, last, 0, pmax);
    }
  }

  const QString caseName = case_->currentText().section(QLatin1Char(' '), 0, 0);
  scoreChart_->setTitle(tr("Layer %1 · query head %2 (kv head %3) · query at position %4 · %5")
                            .arg(data_->layer).arg(row.queryHead).arg(row.kvHead).arg(row.position).arg(caseName));
  info_->setText(tr("This row: KL(P‖P′) = %1 · output rel. error = %2 · top-1 %3 → %4")
                     .arg(c.kl, 0, 'g', 4)
                     .arg(c.outputRelError, 0, 'g', 4)
                     .arg(row.original.top1)
                     .arg(c.top1));
  if (!a && compareRow()) a = &caseOf(*compare_->row);  // A's own dump at another length: its figures only
  if (a) {
    info_->setText(tr("This row, B: KL(P‖P′) = %1 · output rel. error = %2 · top-1 %3 → %4   |   A: KL = %5 · "
                      "output rel. error = %6 · top-1 → %7")
                       .arg(c.kl, 0, 'g', 4)
                       .arg(c.outputRelError, 0, 'g', 4)
                       .arg(row.original.top1)
                       .arg(c.top1)
                       .arg(a->kl, 0, 'g', 4)
                       .arg(a->outputRelError, 0, 'g', 4)
                       .arg(a->top1));
    if (otherDump_) {
      info_->setText(info_->text() + tr(" (A's dump: query at position %1, %2 keys%3)")
                                         .arg(compare_->row->position)
                                         .arg(compare_->row->original.scores.size())
                                         .arg(compareShown() ? QString() : tr("; not drawn over B's %1").arg(n)));
    }
  } else if (pinned_ && !aNote_.isEmpty()) {
    info_->setText(info_->text() + QStringLiteral("   (") + aNote_ + QStringLiteral(")"));
  } else if (pinned_ && otherDump_ && compare_ && compare_->layer == data_->layer) {
    info_->setText(info_->text() + tr("   (A's dump has no query row of this head at this distance from the end)"));
  } else if (pinned_) {
    info_->setText(info_->text() + tr("   (setting A: computing…)"));
  }
}

void DriftView::fillTopKeys() {
  const bool ab = compareShown();
  QStringList headers{tr("key"), tr("token"), tr("P"), pinned_ ? tr("P′ B") : tr("P′"), pinned_ ? tr("P′ B − P") : tr("P′ − P")};
  if (ab) headers << tr("P′ A");
  top_->setColumnCount(static_cast<int>(headers.size()));
  top_->setHorizontalHeaderLabels(headers);
  if (!data_ || !data_->row) {
    top_->setRowCount(0);
    return;
  }
  const AttentionRowDetail& row = *data_->row;
  const AttentionRowCase& c = currentCase();
  const std::vector<int64_t> keys = topIndices(row.original.probabilities, kTopKeys);
  top_->setRowCount(static_cast<int>(keys.size()));
  // Each cell holds its exact number as data (tests, copies); the text is rounded for reading.
  const auto cell = [this](int r, int col, const QString& text, const QVariant& value) {
    auto* item = new QTableWidgetItem(text);
    item->setData(Qt::UserRole, value);
    if (col != 1) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    top_->setItem(r, col, item);
  };
  for (int r = 0; r < static_cast<int>(keys.size()); ++r) {
    const auto j = static_cast<size_t>(keys[static_cast<size_t>(r)]);
    const double p = row.original.probabilities[j], q = c.probabilities[j];
    const QString token = static_cast<qsizetype>(j) < tokenText_.size() ? tokenText_[static_cast<qsizetype>(j)] : QString();
    cell(r, 0, QString::number(j), QVariant::fromValue(static_cast<qlonglong>(j)));
    cell(r, 1, token, token);
    cell(r, 2, QString::number(p, 'g', 3), p);
    cell(r, 3, QString::number(q, 'g', 3), q);
    cell(r, 4, (q - p > 0 ? QStringLiteral("+") : QString()) + QString::number(q - p, 'g', 2), q - p);
    if (ab) {
      const double qa = caseOf(*compare_->row).probabilities[j];
      cell(r, 5, QString::number(qa, 'g', 3), qa);
    }
  }
  top_->setColumnHidden(1, tokenText_.isEmpty());
  // Columns as wide as their widest possible figure, not as this row's: widths that followed each
  // row's figures re-laid out the whole view (and its charts) at every update of a drag.
  const QFontMetrics fm(top_->font());
  const int pad = fm.averageCharWidth() * 2;
  for (int col = 0; col < top_->columnCount(); ++col) {
    if (col == 1) {
      top_->resizeColumnToContents(1);  // token text: as wide as this row's tokens
      continue;
    }
    const QString widest = col == 0 ? QStringLiteral("0000000") : QStringLiteral("+0.00e-00");
    const int header = top_->horizontalHeader()->fontMetrics().horizontalAdvance(top_->horizontalHeaderItem(col)->text());
    top_->setColumnWidth(col, std::max(fm.horizontalAdvance(widest), header) + pad);
  }
  // Wide enough for every column: a horizontal scroll bar would hide the change column.
  int width = 2 * top_->frameWidth() + top_->verticalScrollBar()->sizeHint().width();
  for (int col = 0; col < top_->columnCount(); ++col) {
    if (!top_->isColumnHidden(col)) width += top_->columnWidth(col);
  }
  top_->setMinimumWidth(width);
}

void DriftView::rebuildSeries() {
  for (QLineSeries* s : {kl_, rel_, marker_, klA_, relA_}) s->clear();
  klA_->setVisible(false);
  relA_->setVisible(false);
  if (!data_ || !data_->row) {
    setRanges(posX_, klY_, 0, 1, 0, 1);
    setAxisRange(relY_, 0, 1);
    return;
  }
  const AttentionRowDetail& row = *data_->row;
  const double last = static_cast<double>(row.position);
  const AttentionPositionSeries& series = data_->series;
  const auto line = static_cast<size_t>(row.kvHead);
  QList<QPointF> klPoints, relPoints;
  double klTop = 0, relTop = 0;
  const auto& rel = currentRel();
  for (size_t i = 0; i < series.positions.size(); ++i) {
    const auto x = static_cast<double>(series.positions[i]);
    // Only the row's kv head has a line when the series was computed for that head alone.
    const double k = case_->currentIndex() == 1 ? 0.0
                     : (line < series.kl.size() && i < series.kl[line].size() ? series.kl[line][i] : 0.0);
    const double r = line < rel.size() && i < rel[line].size() ? rel[line][i] : 0.0;
    klPoints.append({x, k});
    relPoints.append({x, r});
    klTop = std::max(klTop, k);
    relTop = std::max(relTop, r);
  }
  double lastA = 0;
  if (compareSeries()) {
    const AttentionPositionSeries& sa = compare_->series;
    const auto& relA = relOf(sa);
    QList<QPointF> klA, relAPoints;
    for (size_t i = 0; i < sa.positions.size(); ++i) {
      const auto x = static_cast<double>(sa.positions[i]);
      const double k = case_->currentIndex() == 1 ? 0.0
                       : (line < sa.kl.size() && i < sa.kl[line].size() ? sa.kl[line][i] : 0.0);
      const double r = line < relA.size() && i < relA[line].size() ? relA[line][i] : 0.0;
      klA.append({x, k});
      relAPoints.append({x, r});
      klTop = std::max(klTop, k);
      relTop = std::max(relTop, r);
    }
    if (!sa.positions.empty()) lastA = static_cast<double>(sa.positions.back());
    klA_->replace(klA);
    relA_->replace(relAPoints);
    klA_->setVisible(true);
    relA_->setVisible(true);
  }
  kl_->replace(klPoints);
  rel_->replace(relPoints);
  const double first = series.positions.empty() ? 0 : static_cast<double>(series.positions.front());
  // A on its own dump may reach further along the positions (a longer text).
  double firstAll = first;
  if (compareSeries() && !compare_->series.positions.empty())
    firstAll = std::min(first, static_cast<double>(compare_->series.positions.front()));
  setRanges(posX_, klY_, firstAll,
            std::max({firstAll + 1, lastA, series.positions.empty() ? 1.0 : static_cast<double>(series.positions.back())}), 0,
            klTop > 0 ? klTop : 1);
  setAxisRange(relY_, 0, niceRange(0, relTop > 0 ? relTop : 1).hi);
  marker_->replace(QList<QPointF>{{last, 0}, {last, klY_->max()}});
}

void DriftView::selectQueryAt(double position) {
  if (!data_ || data_->series.positions.empty() || !query_->isEnabled()) return;
  // The series' i-th point is query row i (position T − Tq + i); take the nearest one.
  const auto& positions = data_->series.positions;
  size_t best = 0;
  for (size_t i = 1; i < positions.size(); ++i) {
    if (std::abs(static_cast<double>(positions[i]) - position) < std::abs(static_cast<double>(positions[best]) - position)) best = i;
  }
  query_->setValue(static_cast<int>(best));  // valueChanged → queryChanged
}

void DriftView::renderTo(QPainter& painter, const QRectF& target) {
  flush();
  const QFontMetricsF fm(painter.font());
  // The row's numbers, wrapped onto more lines on a narrow figure.
  const QRectF textBox(target.left() + 10, target.top(), target.width() - 20, 1e6);
  const double infoHeight =
      fm.boundingRect(textBox, Qt::AlignLeft | Qt::TextWordWrap, info_->text()).height() + fm.height() * 0.8;
  painter.save();
  painter.fillRect(QRectF(target.topLeft(), QSizeF(target.width(), infoHeight)), scoreChart_->backgroundBrush());
  painter.setPen(scoreChart_->titleBrush().color());
  painter.drawText(QRectF(target.left() + 10, target.top(), target.width() - 20, infoHeight),
                   Qt::AlignLeft | Qt::AlignVCenter | Qt::TextWordWrap, info_->text());
  painter.restore();
  const double h = target.height() - infoHeight;
  const double y0 = target.top() + infoHeight;
  // The figure's rule: a chart needs about ten lines of text height (title, plot, ticks, axis
  // title, legend) to draw its labels whole. What does not fit is left out of the figure, the
  // scores first (P shows what they do to attention), then the drift along query positions.
  const double line = fm.lineSpacing();
  const int fit = std::clamp(static_cast<int>(h / (10 * line)), 1, 3);
  std::vector<QChart*> charts;
  if (fit == 3) charts.push_back(scoreChart_);
  charts.push_back(probChart_);
  if (fit >= 2) charts.push_back(posChart_);
  // Legends beside the plots on a wide figure; under them on a narrow one, where beside them
  // they would take half the width. (On screen the lowest chart has its legend underneath.)
  const bool narrow = target.width() < 70 * fm.averageCharWidth();
  const double each = h / static_cast<double>(charts.size());
  for (size_t i = 0; i < charts.size(); ++i) {
    QChart* chart = charts[i];
    const Qt::Alignment legendAt = chart->legend()->alignment();
    chart->legend()->setAlignment(narrow ? Qt::AlignBottom : Qt::AlignRight);
    renderChart(chart, painter, QRectF(target.left(), y0 + each * static_cast<double>(i), target.width(), each));
    chart->legend()->setAlignment(legendAt);
  }
}

QString DriftView::toCsv() const {
  if (!data_ || !data_->row) return {};
  const AttentionRowDetail& row = *data_->row;
  QString out = QStringLiteral("# layer %1, query head %2, kv head %3, query row %4, position %5\n")
                    .arg(data_->layer).arg(row.queryHead).arg(row.kvHead).arg(row.queryIndex).arg(row.position);
  out += QStringLiteral("key_position,score,score_key_only,score_joint,p,p_key_only,p_value_only,p_joint\n");
  for (size_t j = 0; j < row.original.scores.size(); ++j) {
    out += QStringLiteral("%1,%2,%3,%4,%5,%6,%7,%8\n")
               .arg(j)
               .arg(row.original.scores[j], 0, 'g', 9)
               .arg(row.keyOnly.scores[j], 0, 'g', 9)
               .arg(row.joint.scores[j], 0, 'g', 9)
               .arg(row.original.probabilities[j], 0, 'g', 9)
               .arg(row.keyOnly.probabilities[j], 0, 'g', 9)
               .arg(row.valueOnly.probabilities[j], 0, 'g', 9)
               .arg(row.joint.probabilities[j], 0, 'g', 9);
  }
  const AttentionPositionSeries& s = data_->series;
  const auto line = static_cast<size_t>(row.kvHead);
  out += QStringLiteral("\nquery_position,kl,rel_key_only,rel_value_only,rel_joint\n");
  for (size_t i = 0; i < s.positions.size() && line < s.kl.size() && i < s.kl[line].size(); ++i) {
    out += QStringLiteral("%1,%2,%3,%4,%5\n")
               .arg(s.positions[i])
               .arg(s.kl[line][i], 0, 'g', 9)
               .arg(s.relKeyOnly[line][i], 0, 'g', 9)
               .arg(s.relValueOnly[line][i], 0, 'g', 9)
               .arg(s.relJoint[line][i], 0, 'g', 9);
  }
  if (compareRow()) {
    // A/B comparison: setting A's row and series in the same columns (on A's own dump, its row's
    // own keys and its own query positions).
    const AttentionRowDetail& a = *compare_->row;
    out += QStringLiteral("\n# setting A\nkey_position,score_key_only_a,score_joint_a,p_key_only_a,p_value_only_a,p_joint_a\n");
    for (size_t j = 0; j < a.original.scores.size(); ++j) {
      out += QStringLiteral("%1,%2,%3,%4,%5,%6\n")
                 .arg(j)
                 .arg(a.keyOnly.scores[j], 0, 'g', 9)
                 .arg(a.joint.scores[j], 0, 'g', 9)
                 .arg(a.keyOnly.probabilities[j], 0, 'g', 9)
                 .arg(a.valueOnly.probabilities[j], 0, 'g', 9)
                 .arg(a.joint.probabilities[j], 0, 'g', 9);
    }
    const AttentionPositionSeries& sa = compare_->series;
    out += QStringLiteral("\nquery_position,kl_a,rel_key_only_a,rel_value_only_a,rel_joint_a\n");
    for (size_t i = 0; i < sa.positions.size() && line < sa.kl.size() && i < sa.kl[line].size(); ++i) {
      out += QStringLiteral("%1,%2,%3,%4,%5\n")
                 .arg(sa.positions[i])
                 .arg(sa.kl[line][i], 0, 'g', 9)
                 .arg(sa.relKeyOnly[line][i], 0, 'g', 9)
                 .arg(sa.relValueOnly[line][i], 0, 'g', 9)
                 .arg(sa.relJoint[line][i], 0, 'g', 9);
    }
  }
  return out;
}

QString DriftView::tabTitle() const { return tr("Attention drift"); }

nlohmann::json DriftView::saveState() const {
  return {{"case", currentItemName(case_).toStdString()},
          {"log_p", logP_->isChecked()},
          {"difference", diff_->isChecked()},
          {"link_keys", linkX_->isChecked()}};
}

void DriftView::loadState(const nlohmann::json& state) {
  loadNamedChoice(case_, state, "case", {"key_only", "value_only", "joint"}, QStringLiteral("key_only"));
  // Sessions written before these options get their defaults.
  logP_->setChecked(state.value("log_p", true));
  diff_->setChecked(state.value("difference", false));
  linkX_->setChecked(state.value("link_keys", true));
}

void DriftView::fillRequest(ViewRequest& request, const ViewContext& context) const {
  const DumpInfo& info = *context.info;
  if (!info.hasQuery || info.groupSize() <= 0) return;
  const int queryHead = std::clamp(context.selection.queryHead, 0, info.heads - 1);
  if (queryHead / info.groupSize() != request.kvHead) return;
  request.queryHead = queryHead;
  request.queryIndex = context.selection.queryRow(info.queries);
}

void DriftView::takeSelection(const Selection& selection) {
  const QSignalBlocker a(head_), b(query_);
  head_->setValue(selection.queryHead);
  query_->setValue(selection.queryIndex < 0 ? query_->maximum() : selection.queryIndex);
}

}  // namespace kvscope::ui
