// SPDX-License-Identifier: GPL-3.0-or-later
// Charts that do not look empty (issue 32, defect 10, and its linked-axis and re-binning
// features): the drift view's log probability axis, top keys and difference lines, its linked
// key axes, and the histogram's automatic log counts and its bins counted again over a zoom.
#include <QChart>
#include <QCheckBox>
#include <QComboBox>
#include <QLineSeries>
#include <QFontMetricsF>
#include <QLogValueAxis>
#include <QPainter>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QValueAxis>
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/attention/detail.h"
#include "core/inspect/drift_data.h"
#include "core/inspect/view_data.h"
#include "core/synth/synth.h"
#include "tests/ui/ui_test_support.h"
#include "ui/main_window.h"
#include "ui/views/drift_view.h"
#include "ui/views/histogram_view.h"
#include "ui/widgets/chart_view.h"

using namespace kvscope;
using namespace kvscope::ui;

namespace {

constexpr int kWaitMs = 60000;

// A row of five keys whose probabilities hold a zero and an underflowing one.
DriftDataPtr constructedRow() {
  auto row = std::make_shared<AttentionRowDetail>();
  row->position = 4;
  row->original.scores = {3.0, -1.0, -2.0, -50.0, -80.0};
  row->original.probabilities = {0.97, 0.02, 0.01, 0.0, 1e-30};
  row->keyOnly.scores = {2.5, -0.5, -2.5, -49.0, -81.0};
  row->keyOnly.probabilities = {0.9, 0.08, 0.02, 1e-25, 0.0};
  row->valueOnly = row->original;
  row->joint = row->keyOnly;
  auto d = std::make_shared<DriftData>();
  d->row = row;
  return d;
}

// The vertical axis shown: the first visible one (a chart may keep a hidden alternative).
QAbstractAxis* verticalAxis(QChart* chart) {
  for (QAbstractAxis* a : chart->axes(Qt::Vertical)) {
    if (a->isVisible()) return a;
  }
  return nullptr;
}

std::pair<double, double> xRange(QChart* chart) {
  auto* x = qobject_cast<QValueAxis*>(chart->axes(Qt::Horizontal).value(0));
  return x ? std::pair{x->min(), x->max()} : std::pair{0.0, 0.0};
}

// One kv head of `tokens` × `dim` values from `value(t, d)`, with a reconstruction 0.9 x.
template <class F>
LayerQuantPtr constructedLayer(int64_t tokens, int64_t dim, F value) {
  auto tensors = std::make_shared<LayerTensors>();
  tensors->kvHeads = 1;
  tensors->key = Tensor3(1, tokens, dim);
  tensors->value = Tensor3(1, tokens, dim);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t d = 0; d < dim; ++d) {
      tensors->key.at(0, t, d) = value(t, d);
      tensors->value.at(0, t, d) = static_cast<float>(t * dim + d) / static_cast<float>(tokens * dim);  // uniform
    }
  }
  auto layer = std::make_shared<LayerQuant>();
  layer->tensors = tensors;
  layer->keyHat = tensors->key;
  for (float& v : layer->keyHat.data) v *= 0.9f;
  layer->valueHat = tensors->value;
  return layer;
}

// Heavy tails: values spread over [−1, 1] and every 97th one an outlier out to ±60.
float heavy(int64_t t, int64_t d) {
  const int64_t i = t * 64 + d;
  if (i % 97 == 0) return (i % 2 ? 1.0f : -1.0f) * static_cast<float>(10 + i % 50);
  return -1.0f + 2.0f * static_cast<float>((i * 7919) % 1000) / 1000.0f;
}

// The test's own count: values of the head in [lo, hi], bin floor((v − lo) / (hi − lo) · bins).
std::vector<double> countByHand(const Tensor3& x, double lo, double hi, int bins) {
  std::vector<double> out(static_cast<size_t>(bins), 0.0);
  for (float f : x.data) {
    const double v = f;
    if (v < lo || v > hi) continue;
    const int b = std::min(bins - 1, static_cast<int>(std::floor((v - lo) / (hi - lo) * bins)));
    out[static_cast<size_t>(b)] += 1;
  }
  return out;
}

}  // namespace

class ChartTest : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString dump_;

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY(dir_.isValid());
    SynthOptions o = test::synthShape(2, 2, 4, 160, 8, 64, 5);
    dump_ = dir_.filePath(QStringLiteral("charts.h5"));
    QVERIFY(writeSynthDump(dump_.toStdString(), o).isOk());
  }

  // Every label readable on screen: nine decades of P in a short plot label every k-th decade
  // (Qt Charts elides crowded labels to "…"), and every decade again once the plot is tall.
  void aShortLogPAxisLabelsEveryKthDecade() {
    DriftView v;
    v.setData(constructedRow(), {});
    v.resize(900, 560);
    v.show();
    QVERIFY(QTest::qWaitForWindowExposed(&v));
    auto* axis = qobject_cast<QLogValueAxis*>(verticalAxis(v.probabilityChartView()->chart()));
    QVERIFY(axis);
    const double decades = std::log10(axis->max() / axis->min());
    QCOMPARE(decades, 9.0);
    const auto labelsFit = [&] {
      const double height = v.probabilityChartView()->chart()->plotArea().height();
      const double step = std::log10(axis->base());
      // Each label 1.6 label heights apart at most as many as the plot holds.
      return (decades / step + 1) * 1.6 * QFontMetricsF(axis->labelsFont()).height() <= height + 1e-9 ||
             step >= 64;
    };
    QTRY_VERIFY(axis->base() > 10.0 && labelsFit());
    QCOMPARE(axis->minorTickCount(), 0);
    v.resize(900, 2400);
    QTRY_COMPARE(axis->base(), 10.0);
    QVERIFY(labelsFit());
  }

  // Defect 10 (a): P on a log axis by default; zeros and values below its floor sit on the floor.
  void probabilitiesOnALogAxisArePositive() {
    DriftView v;
    const DriftDataPtr d = constructedRow();
    v.setData(d, {});
    QVERIFY(v.logProbabilityBox()->isChecked());
    QVERIFY(v.probabilityOriginal());  // a hidden view draws when asked
    auto* axis = qobject_cast<QLogValueAxis*>(verticalAxis(v.probabilityChartView()->chart()));
    QVERIFY(axis);
    QVERIFY(axis->min() > 0);
    QCOMPARE(axis->min(), 1e-9);  // the decade under 0.97 · 1e-8
    QCOMPARE(axis->max(), 1.0);
    for (QLineSeries* s : {v.probabilityOriginal(), v.probabilityCase()}) {
      QVERIFY(s->attachedAxes().contains(axis));
      const QList<QPointF> points = s->points();
      QCOMPARE(points.size(), 5);
      for (const QPointF& p : points) QVERIFY2(p.y() >= axis->min(), qPrintable(QString::number(p.y())));
    }
    QCOMPARE(v.probabilityOriginal()->points()[0].y(), 0.97);
    QCOMPARE(v.probabilityOriginal()->points()[3].y(), axis->min());  // P = 0
    QCOMPARE(v.probabilityOriginal()->points()[4].y(), axis->min());  // 1e-30, below the span
    QCOMPARE(v.probabilityCase()->points()[4].y(), axis->min());
    // A short figure labels every k-th decade (renderChart) and gives the screen its axis back.
    const int minorOnScreen = axis->minorTickCount();  // 0 here: minor ticks only over ≤ 4 decades
    QImage figure(700, 240, QImage::Format_ARGB32);
    {
      QPainter painter(&figure);
      v.renderTo(painter, QRectF(0, 0, 700, 240));
    }
    QCOMPARE(axis->base(), 10.0);
    QCOMPARE(axis->minorTickCount(), minorOnScreen);
    // Linear: the values themselves.
    v.logProbabilityBox()->setChecked(false);
    QVERIFY(v.probabilityOriginal());
    QVERIFY(qobject_cast<QValueAxis*>(verticalAxis(v.probabilityChartView()->chart())));
    QCOMPARE(v.probabilityOriginal()->points()[3].y(), 0.0);
    QCOMPARE(v.saveState()["log_p"].get<bool>(), false);
  }

  // Defect 10 (c): the difference lines are s′ − s and P′ − P point by point, on a linear axis.
  void differenceIsTheCaseMinusTheOriginal() {
    DriftView v;
    const DriftDataPtr d = constructedRow();
    v.setData(d, {});
    v.differenceBox()->setChecked(true);
    QVERIFY(!v.scoreOriginal()->isVisible());
    QVERIFY(!v.logProbabilityBox()->isEnabled());
    QVERIFY(qobject_cast<QValueAxis*>(verticalAxis(v.probabilityChartView()->chart())));
    const AttentionRowDetail& row = *d->row;
    const QList<QPointF> s = v.scoreCase()->points(), p = v.probabilityCase()->points();
    QCOMPARE(s.size(), 5);
    QCOMPARE(p.size(), 5);
    for (int j = 0; j < 5; ++j) {
      const auto k = static_cast<size_t>(j);
      QCOMPARE(s[j].x(), static_cast<double>(j));
      QCOMPARE(s[j].y(), row.keyOnly.scores[k] - row.original.scores[k]);
      QCOMPARE(p[j].y(), row.keyOnly.probabilities[k] - row.original.probabilities[k]);
    }
    QCOMPARE(v.scoreCase()->name(), QStringLiteral("s′ − s"));
    // value_only's scores are the original's: a zero line.
    v.caseBox()->setCurrentIndex(1);
    for (const QPointF& q : v.scoreCase()->points()) QCOMPARE(q.y(), 0.0);
    v.differenceBox()->setChecked(false);
    QVERIFY(v.scoreOriginal()->isVisible());
    QCOMPARE(v.scoreCase()->points()[0].y(), row.valueOnly.scores[0]);
  }

  // Defect 10 (b): the top keys are the k largest P of core's row (attentionRowDetail computed
  // here from the dump and core's reconstruction), with P′ and P′ − P of the case shown.
  void topKeysAreTheLargestOfCoresRow() {
    MainWindow w(false);
    w.resize(1400, 900);
    w.setSpecs(*parseSpec("int2"), *parseSpec("int4"));
    test::openAndWaitForViews(w, dump_, kWaitMs);
    auto* drift = viewOf<DriftView>(w);
    QTRY_VERIFY_WITH_TIMEOUT(drift->data() && drift->data()->row, kWaitMs);
    const std::string path = dump_.toStdString();
    auto dump = Dump::open(path);
    QVERIFY(dump.hasValue());
    auto q = (*dump)->read(0, TensorKind::Query);
    auto k = (*dump)->read(0, TensorKind::Key);
    auto val = (*dump)->read(0, TensorKind::Value);
    const Tensor3 kHat = test::coreReconstruction(path, 0, TensorKind::Key, *parseSpec("int2"));
    const Tensor3 vHat = test::coreReconstruction(path, 0, TensorKind::Value, *parseSpec("int4"));
    AttentionInput input;
    input.query = &*q;
    input.key = &*k;
    input.value = &*val;
    input.keyHat = &kHat;
    input.valueHat = &vHat;
    input.softmaxScale = (*dump)->info().softmaxScale;
    auto row = attentionRowDetail(input, w.selection().queryHead, w.selection().queryIndex);
    QVERIFY(row.hasValue());
    const std::vector<double>& p = row->original.probabilities;
    std::vector<size_t> order(p.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&p](size_t a, size_t b) { return p[a] > p[b]; });
    QTableWidget* top = drift->topKeysTable();
    QCOMPARE(top->rowCount(), DriftView::kTopKeys);
    QCOMPARE(top->horizontalHeaderItem(4)->text(), QStringLiteral("P′ − P"));
    for (int r = 0; r < top->rowCount(); ++r) {
      const size_t j = order[static_cast<size_t>(r)];
      QCOMPARE(top->item(r, 0)->data(Qt::UserRole).toLongLong(), static_cast<qlonglong>(j));
      QCOMPARE(top->item(r, 2)->data(Qt::UserRole).toDouble(), p[j]);
      QCOMPARE(top->item(r, 3)->data(Qt::UserRole).toDouble(), row->keyOnly.probabilities[j]);
      QCOMPARE(top->item(r, 4)->data(Qt::UserRole).toDouble(), row->keyOnly.probabilities[j] - p[j]);
    }
    // Every key not listed has a P no larger than the last listed one.
    const double last = top->item(top->rowCount() - 1, 2)->data(Qt::UserRole).toDouble();
    for (size_t r = static_cast<size_t>(DriftView::kTopKeys); r < order.size(); ++r) QVERIFY(p[order[r]] <= last);
  }

  // Feature: zooming or panning the key axis of one row chart moves the other; unlinked, not.
  void linkedKeyAxesFollowEachOther() {
    DriftView v;
    v.resize(1000, 800);
    v.show();
    QVERIFY(QTest::qWaitForWindowExposed(&v));
    auto d = std::make_shared<DriftData>(*constructedRow());
    auto row = std::make_shared<AttentionRowDetail>(*d->row);
    for (AttentionRowCase* c : {&row->original, &row->keyOnly, &row->valueOnly, &row->joint}) {
      c->scores.resize(200, -3.0);
      c->probabilities.resize(200, 1e-4);
    }
    row->position = 199;
    d->row = row;
    v.setData(d, {});
    InteractiveChartView* score = v.scoreChartView();
    InteractiveChartView* prob = v.probabilityChartView();
    QVERIFY(xRange(prob->chart()) == (std::pair{0.0, 199.0}));
    const QPoint centre = score->mapFromScene(score->chart()->mapToScene(score->chart()->plotArea().center()));
    score->zoomAt(centre, 4.0);
    const auto zoomed = xRange(score->chart());
    QVERIFY(zoomed.second - zoomed.first < 60);
    QVERIFY(xRange(prob->chart()) == zoomed);
    QVERIFY(prob->zoomed());
    prob->panBy(QPointF(-40, 0));
    QVERIFY(xRange(prob->chart()) != zoomed);
    QVERIFY(xRange(score->chart()) == xRange(prob->chart()));
    prob->resetZoom();
    QVERIFY(xRange(score->chart()) == (std::pair{0.0, 199.0}));
    QVERIFY(!score->zoomed());
    // Unlinked: each chart keeps its own range.
    v.linkKeysBox()->setChecked(false);
    score->zoomAt(centre, 4.0);
    QVERIFY(xRange(prob->chart()) == (std::pair{0.0, 199.0}));
    // Linked again: the probability chart takes the score chart's range.
    v.linkKeysBox()->setChecked(true);
    QVERIFY(xRange(prob->chart()) == xRange(score->chart()));
  }

  // Defect 10 (d): "auto" counts are log for heavy tails and linear for uniform values (core's
  // prefersLogCounts); the user's choice wins and is kept in the session.
  void histogramCountsFollowTheHeavyTailRuleUnlessChosen() {
    HistogramView v;
    v.setLayer(constructedLayer(256, 64, heavy), 0, 0, 0);
    QCOMPARE(currentItemName(v.countsBox()), QStringLiteral("auto"));
    QVERIFY(prefersLogCounts(v.data()));
    QVERIFY(v.logCounts());
    QVERIFY(qobject_cast<QLogValueAxis*>(verticalAxis(v.chart())));
    QCOMPARE(qobject_cast<QLogValueAxis*>(verticalAxis(v.chart()))->titleText(), QStringLiteral("count (log: heavy tails)"));
    v.tensorBox()->setCurrentIndex(2);  // V: uniform
    QVERIFY(!prefersLogCounts(v.data()));
    QVERIFY(qobject_cast<QValueAxis*>(verticalAxis(v.chart())));
    v.tensorBox()->setCurrentIndex(0);
    QVERIFY(selectItemName(v.countsBox(), QStringLiteral("linear")));
    QVERIFY(qobject_cast<QValueAxis*>(verticalAxis(v.chart())));
    QCOMPARE(v.saveState()["counts"].get<std::string>(), std::string("linear"));
    HistogramView restored;
    restored.loadState(v.saveState());
    QCOMPARE(currentItemName(restored.countsBox()), QStringLiteral("linear"));
    // A session from before the automatic choice: "log": false is auto, true is log.
    restored.loadState({{"log", true}});
    QCOMPARE(currentItemName(restored.countsBox()), QStringLiteral("log"));
    restored.loadState({{"log", false}});
    QCOMPARE(currentItemName(restored.countsBox()), QStringLiteral("auto"));
  }

  // Feature: zooming the histogram's x axis counts the same number of bins over the visible
  // range; the CSV says which range it holds; a reset shows the whole range's bins again.
  void histogramZoomCountsTheBinsAgain() {
    HistogramView v;
    v.resize(1000, 600);
    v.show();
    QVERIFY(QTest::qWaitForWindowExposed(&v));
    const LayerQuantPtr layer = constructedLayer(256, 64, heavy);
    v.setLayer(layer, 0, 0, 0);
    const int bins = v.binsBox()->value();
    const HistogramData whole = v.data();
    InteractiveChartView* chart = v.chartView();
    QChart* c = v.chart();
    const QPoint centre = chart->mapFromScene(c->mapToScene(c->plotArea().center()));
    chart->zoomAt(centre, 16.0);
    QVERIFY(v.zoomRange().has_value());
    const auto [lo, hi] = xRange(c);
    QCOMPARE(v.zoomRange()->first, lo);
    QCOMPARE(v.zoomRange()->second, hi);
    const HistogramData& shown = v.shown();
    QCOMPARE(static_cast<int>(shown.original.size()), bins);
    QCOMPARE(shown.edges.front(), lo);
    QCOMPARE(shown.edges.back(), hi);
    QCOMPARE(shown.original, countByHand(layer->tensors->key, lo, hi, bins));
    QCOMPARE(shown.reconstructed, countByHand(layer->keyHat, lo, hi, bins));
    // The drawn steps are those bins, and the axis stays where the user put it.
    const QList<QPointF> drawn = v.originalSeries()->points();
    QCOMPARE(drawn.size(), 2 * bins);
    QCOMPARE(drawn.front().x(), lo);
    QCOMPARE(drawn[1].y(), std::max(shown.original[0], v.logCounts() ? 0.5 : 0.0));
    QVERIFY(xRange(c) == (std::pair{lo, hi}));
    // After the lines naming tensor, scope and space, before the header.
    QVERIFY(v.toCsv().contains(QStringLiteral("\n# zoomed: %1 bins over [").arg(bins)));
    QVERIFY(v.toCsv().indexOf(QStringLiteral("# zoomed:")) < v.toCsv().indexOf(QStringLiteral("bin_lo,")));
    // New data with the same range keeps the zoom and counts it again.
    v.setLayer(layer, 0, 0, 0);
    QTRY_VERIFY(v.zoomRange().has_value());
    QCOMPARE(v.shown().original, countByHand(layer->tensors->key, lo, hi, bins));
    // Reset: the whole range's bins.
    chart->resetZoom();
    QVERIFY(!v.zoomRange().has_value());
    QCOMPARE(v.shown().original, whole.original);
    QVERIFY(xRange(c) == (std::pair{whole.edges.front(), whole.edges.back()}));
    QVERIFY(!v.toCsv().contains(QStringLiteral("# zoomed:")) && v.toCsv().contains(QStringLiteral("\nbin_lo,")));
  }

  // A head too large to count on the GUI thread is counted by a worker, to the same bins.
  void aLargeHeadIsCountedOffTheGuiThread() {
    HistogramView v;
    v.resize(1000, 600);
    v.show();
    QVERIFY(QTest::qWaitForWindowExposed(&v));
    const LayerQuantPtr layer = constructedLayer(10000, 64, heavy);  // 2 × 640000 values
    v.setLayer(layer, 0, 0, 0);
    v.zoomTo(-2.0, 3.0);
    QVERIFY(v.rebinning());
    QTRY_VERIFY_WITH_TIMEOUT(!v.rebinning(), kWaitMs);
    QVERIFY(v.zoomRange().has_value());
    QCOMPARE(v.shown().original, countByHand(layer->tensors->key, -2.0, 3.0, v.binsBox()->value()));
  }
};

QTEST_MAIN(ChartTest)
#include "chart_test.moc"
