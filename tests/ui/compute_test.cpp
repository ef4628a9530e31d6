// SPDX-License-Identifier: GPL-3.0-or-later
// The GUI's pure computations (heat map binning, histograms) against hand-computed values.
#include <QtTest>

#include "core/inspect/view_data.h"
#include "core/inspect/view_data.h"
#include "ui/export/chart_ticks.h"
#include "ui/workers/job_runner.h"

#include <atomic>
#include <chrono>
#include <thread>

using namespace kvscope;
using namespace kvscope::ui;

class ComputeTest : public QObject {
  Q_OBJECT

 private slots:
  void heatmapBinKeepsLoneOutlier() {
    // 1 head, 1000 tokens, 2 channels; one spike at token 537 of channel 1.
    Tensor3 x(1, 1000, 2, 0.1f);
    x.at(0, 537, 1) = -50.0f;
    const HeatmapData d = computeHeatmap(x, nullptr, 0, HeatmapValue::Magnitude, 10);
    QCOMPARE(d.columns, 10);
    QCOMPARE(d.binStart(5), 500);
    // Bin 5 covers tokens 500..599 and must show the spike, at its token.
    QCOMPARE(d.cell(1, 5), 50.0f);
    QCOMPARE(d.cellToken[static_cast<size_t>(1 * 10 + 5)], 537);
    QCOMPARE(d.cell(1, 4), 0.1f);
    QCOMPARE(d.channelMax[1], 50.0f);
    QCOMPARE(d.channelMax[0], 0.1f);
    QCOMPARE(d.maxValue, 50.0f);
  }

  void heatmapErrorIsAbsoluteDifference() {
    Tensor3 x(2, 3, 1, 1.0f), hat(2, 3, 1, 1.0f);
    hat.at(1, 2, 0) = 0.25f;
    const HeatmapData d = computeHeatmap(x, &hat, 1, HeatmapValue::Error, 100);
    QCOMPARE(d.columns, 3);  // never more columns than tokens
    QCOMPARE(d.cell(0, 2), 0.75f);
    QCOMPARE(d.cell(0, 0), 0.0f);
  }

  void heatmapNormalizedDividesBySigma() {
    // Channel values 1, -1, 1, -1: mean 0, σ 1; doubled channel: σ 2, so |x|/σ is 1 for both.
    Tensor3 x(1, 4, 2);
    const float v[4] = {1, -1, 1, -1};
    for (int t = 0; t < 4; ++t) {
      x.at(0, t, 0) = v[t];
      x.at(0, t, 1) = 2 * v[t];
    }
    const HeatmapData d = computeHeatmap(x, nullptr, 0, HeatmapValue::Normalized, 4);
    for (int t = 0; t < 4; ++t) {
      QCOMPARE(d.cell(0, t), 1.0f);
      QCOMPARE(d.cell(1, t), 1.0f);
    }
  }

  void histogramCountsAndShape() {
    // Token 1 of head 0 holds 0, 1, 2, 3: four bins of width 0.75 get one value each.
    Tensor3 x(1, 2, 4);
    for (int c = 0; c < 4; ++c) {
      x.at(0, 0, c) = 100;
      x.at(0, 1, c) = static_cast<float>(c);
    }
    Tensor3 hat = x;
    hat.at(0, 1, 1) = 0;  // the reconstruction moves 1 to 0
    const HistogramData h = computeHistogram(x, &hat, 0, HistogramScope::Token, 1, 4);
    QCOMPARE(h.count, 4);
    QCOMPARE(h.edges.front(), 0.0);
    QCOMPARE(h.edges.back(), 3.0);
    QCOMPARE(h.original, (std::vector<double>{1, 1, 1, 1}));
    QCOMPARE(h.reconstructed, (std::vector<double>{2, 0, 1, 1}));
    // Pearson kurtosis of {0,1,2,3}: m2 = 1.25, m4 = 2.5625, m4/m2² = 1.64.
    QVERIFY(std::abs(h.kurtosis - 1.64) < 1e-12);
    // max |x| = 3, median |x| = 1.5.
    QCOMPARE(h.maxOverMedian, 2.0);
  }

  void newerJobCancelsStaleOne() {
    JobRunner runner(QStringLiteral("test"));
    std::atomic<bool> firstStarted{false}, firstStopped{false};
    int delivered = 0, value = 0;
    QSignalSpy failures(&runner, &JobRunner::failed);
    runner.start<int>(
        [&](const Progress& progress) -> Expected<int> {
          firstStarted = true;
          // Runs until the runner says stop: only a newer request can end it.
          while (progress(0.5, "spinning")) std::this_thread::sleep_for(std::chrono::milliseconds(1));
          firstStopped = true;
          return Status::cancelled();
        },
        [&](int v) {
          ++delivered;
          value = v;
        });
    QTRY_VERIFY(firstStarted.load());
    QVERIFY(runner.busy());
    runner.start<int>([](const Progress&) -> Expected<int> { return 42; },
                      [&](int v) {
                        ++delivered;
                        value = v;
                      });
    QTRY_COMPARE(value, 42);
    QVERIFY(firstStopped.load());
    QCOMPARE(delivered, 1);  // the stale job delivered nothing
    QVERIFY(!runner.busy());
    QCOMPARE(failures.count(), 0);  // cancellation is not an error
  }

  void failedJobReportsItsMessage() {
    JobRunner runner(QStringLiteral("test"));
    QSignalSpy failures(&runner, &JobRunner::failed);
    bool delivered = false;
    runner.start<int>([](const Progress&) -> Expected<int> { return Status::invalidData("x.h5: key: broken"); },
                      [&](int) { delivered = true; });
    QVERIFY(failures.wait(5000));
    QCOMPARE(failures.at(0).at(0).toString(), QStringLiteral("x.h5: key: broken"));
    QVERIFY(!delivered);
  }

  void histogramChannelScope() {
    Tensor3 x(1, 3, 2, 0.0f);
    x.at(0, 0, 1) = -1;
    x.at(0, 1, 1) = 1;
    x.at(0, 2, 1) = 1;
    const HistogramData h = computeHistogram(x, nullptr, 0, HistogramScope::Channel, 1, 2);
    QCOMPARE(h.count, 3);
    QCOMPARE(h.original, (std::vector<double>{1, 2}));
    QVERIFY(h.reconstructed.empty());
  }

  // Ticks: 1, 2, 2.5 or 5 × 10^k, at most maxTicks steps (values worked out by hand).
  void niceTickIntervalsAreRound() {
    QCOMPARE(niceTickInterval(397.3, 6), 100.0);  // 66.2 per step → 100 (the histogram's −185.4…211.9)
    QCOMPARE(niceTickInterval(12394, 4), 5000.0);  // 3098.5 → 5000, not 3098
    QCOMPARE(niceTickInterval(1.0, 4), 0.25);
    QCOMPARE(niceTickInterval(1.0, 5), 0.2);
    QCOMPARE(niceTickInterval(255, 6), 50.0);
    QCOMPARE(niceTickInterval(0.3, 3), 0.1);  // not 0.2 from 0.3/3 rounding above 0.1
    QCOMPARE(niceTickInterval(0.0, 6), 1.0);  // degenerate spans still give a step
    QCOMPARE(tickDecimals(100.0), 0);
    QCOMPARE(tickDecimals(0.25), 2);
    QCOMPARE(tickDecimals(0.5), 1);
    QCOMPARE(tickDecimals(2.5e-3), 4);
  }

  void niceRangeWidensToTicks() {
    const NiceRange r = niceRange(-185.4, 211.9, 6);
    QCOMPARE(r.interval, 100.0);
    QCOMPARE(r.lo, -200.0);
    QCOMPARE(r.hi, 300.0);
    const NiceRange empty = niceRange(0, 0);
    QCOMPARE(empty.lo, 0.0);
    QCOMPARE(empty.hi, 1.0);
    const NiceRange one = niceRange(5, 5);  // a single value gets a unit of its magnitude around it
    QVERIFY(one.lo < 5 && one.hi > 5);
    const NiceRange exact = niceRange(0, 8.4, 4);  // 2.1 per step → 2.5; 8.4 → 10
    QCOMPARE(exact.interval, 2.5);
    QCOMPARE(exact.hi, 10.0);
  }
};

QTEST_GUILESS_MAIN(ComputeTest)
#include "compute_test.moc"
