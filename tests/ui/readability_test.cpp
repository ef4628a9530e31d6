// SPDX-License-Identifier: GPL-3.0-or-later
// What a user reads and does in the window (issue 32): a readout that follows the data, levels
// that leave the data visible, one notation per log axis, Ctrl+E from any control, the channel
// kept across layers.
#include <QAction>
#include <QChart>
#include <QCheckBox>
#include <QComboBox>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

#include "core/synth/synth.h"
#include "tests/ui/ui_test_support.h"
#include "ui/export/chart_ticks.h"
#include "ui/main_window.h"
#include "ui/views/histogram_view.h"
#include "ui/widgets/chart_view.h"

using namespace kvscope;
using namespace kvscope::ui;

namespace {

constexpr int kWaitMs = 60000;

void waitIdle(MainWindow& w) { QTRY_VERIFY_WITH_TIMEOUT(w.layerQuant() && !w.busy(), kWaitMs); }

}  // namespace

class ReadabilityTest : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString dump_;

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY(dir_.isValid());
    SynthOptions o = test::synthShape(3, 2, 4, 192, 8, 64, 11);
    o.profile = "qwen2-bias";
    dump_ = dir_.filePath(QStringLiteral("bias.h5"));
    QVERIFY(writeSynthDump(dump_.toStdString(), o).isOk());
  }

  // Issue 32 defect 2: the histogram's crosshair readout reads the values drawn now, not those of
  // the channel or layer shown before a step with Alt+arrow.
  void readoutFollowsNewData() {
    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    w.setSpecs(*parseSpec("int4"), *parseSpec("int4"));
    test::openAndWaitForViews(w, dump_, kWaitMs);
    waitIdle(w);
    auto* histogram = viewOf<HistogramView>(w);
    InteractiveChartView* chart = histogram->chartView();
    const QRectF plot = chart->chart()->plotArea();
    const QPoint at = chart->mapFromScene(chart->chart()->mapToScene(plot.center()));
    QTest::mouseMove(chart->viewport(), at);
    QTRY_VERIFY(!chart->readout().isEmpty());
    const QString before = chart->readout();
    w.session()->stepLayer(1);
    QTRY_VERIFY_WITH_TIMEOUT(w.layerQuant() && w.layerQuant()->tensors->layer == 1 && !w.busy(), kWaitMs);
    // The cursor has not moved: the readout is the one the new data gives at that place.
    QTRY_COMPARE(chart->readout(), chart->readoutAt(at));
    QVERIFY(chart->readout() != before);
  }

  // Issue 32 defect 3: a 4-bit format's 16 levels are ticks in a band along the x axis, not
  // full-height lines that cover the bars; without levels the legend does not name them.
  void levelsLeaveTheDataVisible() {
    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    w.setSpecs(*parseSpec("int4,axis=token,group=32"), *parseSpec("fp16"));
    test::openAndWaitForViews(w, dump_, kWaitMs);
    waitIdle(w);
    auto* histogram = viewOf<HistogramView>(w);
    QLineSeries* levels = histogram->levelSeries();
    QVERIFY(histogram->group().has_value());
    QCOMPARE(static_cast<int>(histogram->group()->levels.size()), 16);
    QVERIFY(levels->isVisible());
    double top = 0;
    for (const QPointF& p : levels->points()) top = std::max(top, p.y());
    double highest = 0;
    for (const QPointF& p : histogram->originalSeries()->points()) highest = std::max(highest, p.y());
    QVERIFY2(top <= 0.1 * highest + 1e-9, qPrintable(QStringLiteral("%1 of %2").arg(top).arg(highest)));
    // V under fp16 has no scale groups: no levels, and no legend entry for them.
    histogram->tensorBox()->setCurrentIndex(2);
    QVERIFY(!histogram->group().has_value());
    QVERIFY(!levels->isVisible());
    for (QLegendMarker* m : histogram->chart()->legend()->markers(levels)) QVERIFY(!m->isVisible());
  }

  // Issue 32 defect 9: every label of a log axis in one notation (never 100000 beside 1e+06).
  void logAxesUseOneNotation() {
    const auto labels = [](double lo, double hi) {
      const QString f = logLabelFormat(lo, hi);
      QStringList out;
      for (double v = lo; v <= hi * 1.0001; v *= 10) out << QString::asprintf(f.toLatin1().constData(), v);
      return out;
    };
    for (const auto& [lo, hi] : {std::pair{0.5, 1e6}, std::pair{1.0, 1e5}, std::pair{1e-6, 1.0}, std::pair{1e-3, 1e3}}) {
      const QStringList l = labels(lo, hi);
      const int exponents = static_cast<int>(std::count_if(l.begin(), l.end(), [](const QString& s) {
        return s.contains(QLatin1Char('e'));
      }));
      QVERIFY2(exponents == 0 || exponents == l.size(), qPrintable(l.join(QLatin1Char(' '))));
    }
    QCOMPARE(labels(1, 1e5).last(), QStringLiteral("100000"));
    QCOMPARE(labels(1, 1e6).last(), QStringLiteral("1e+06"));
    QCOMPARE(labels(1, 1e6).first(), QStringLiteral("1e+00"));
    // Minor ticks over a few decades only: over nine they fill the plot with grey lines.
    QLogValueAxis decades;
    setDecadeRange(&decades, 2e-4, 0.5);  // 1e-4 … 1: four decades
    QCOMPARE(decades.minorTickCount(), 8);
    setDecadeRange(&decades, 3e-10, 0.9);  // 1e-10 … 1: ten decades
    QCOMPARE(decades.minorTickCount(), 0);
    QCOMPARE(decades.min(), 1e-10);
    // The histogram's log count axis follows the rule as its range changes.
    MainWindow w(false);
    w.setSpecs(*parseSpec("int4"), *parseSpec("int4"));
    test::openAndWaitForViews(w, dump_, kWaitMs);
    auto* histogram = viewOf<HistogramView>(w);
    QVERIFY(selectItemName(histogram->countsBox(), QStringLiteral("log")));
    auto* axis = qobject_cast<QLogValueAxis*>(histogram->originalSeries()->attachedAxes().value(1));
    QVERIFY(axis);
    QCOMPARE(axis->labelFormat(), logLabelFormat(axis->min(), axis->max()));
  }

  // Issue 32 defect 7: Ctrl+E exports the view while a spin box (or any text field) has the focus.
  void ctrlEWorksFromASpinBox() {
    MainWindow w(false);
    w.show();
    QVERIFY(QTest::qWaitForWindowActive(&w));
    auto* action = w.findChild<QAction*>(QStringLiteral("exportViewAction"));
    QVERIFY(action);
    QSignalSpy triggered(action, &QAction::triggered);
    QSpinBox* bins = viewOf<HistogramView>(w)->binsBox();
    bins->setFocus();
    QTRY_VERIFY(bins->hasFocus());
    QTest::keyClick(bins, Qt::Key_E, Qt::ControlModifier);
    QCOMPARE(triggered.count(), 1);
  }

  // Issue 32 defect 8: the channel (and token) stay selected across layer and head switches, so
  // one channel (the bias channel of a Qwen2-like dump) can be followed through the layers.
  void channelIsKeptAcrossLayersAndHeads() {
    MainWindow w(false);
    w.setSpecs(*parseSpec("int4"), *parseSpec("int4"));
    test::openAndWaitForViews(w, dump_, kWaitMs);
    waitIdle(w);
    auto* histogram = viewOf<HistogramView>(w);
    histogram->scopeBox()->setCurrentIndex(1);  // one channel
    auto* channel = histogram->findChild<QSpinBox*>(QStringLiteral("histogramChannel"));
    channel->setValue(37);
    QCOMPARE(w.selection().channel, 37);
    for (const auto& [layer, head] : {std::pair{1, 0}, std::pair{2, 1}, std::pair{0, 1}}) {
      w.select(layer, head);
      QTRY_VERIFY_WITH_TIMEOUT(w.layerQuant() && w.layerQuant()->tensors->layer == layer && !w.busy(), kWaitMs);
      QCOMPARE(w.selection().channel, 37);
      QCOMPARE(channel->value(), 37);
      // One channel of one kv head: T values.
      QCOMPARE(histogram->data().count, int64_t{192});
      QVERIFY(histogram->chart()->title().contains(QStringLiteral("layer %1").arg(layer)));
    }
  }
};

QTEST_MAIN(ReadabilityTest)
#include "readability_test.moc"
