// SPDX-License-Identifier: GPL-3.0-or-later
// Layer and head switches (issue 17 item 4): a layer not in the cache is read head first (the kv
// head in view, Dump::readHeads) and completed in the background. Whatever was read, the views
// must hold exactly what the whole layer gives: every expectation here is computed from whole
// Dump::read tensors and core's reconstruction of the whole layer (coreReconstruction), never
// from the window's partial tensors.
#include <QtTest>

#include <QComboBox>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QUndoStack>

#include <cmath>

#include "core/attention/detail.h"
#include "core/io/dump.h"
#include "core/inspect/view_data.h"
#include "core/quant/quantize.h"
#include "core/quant/spec.h"
#include "core/synth/synth.h"
#include "tests/ui/ui_test_support.h"
#include "core/inspect/view_data.h"
#include "ui/main_window.h"
#include "ui/views/drift_view.h"
#include "ui/views/heatmap_view.h"
#include "ui/views/histogram_view.h"
#include "ui/widgets/spec_panel.h"

using namespace kvscope;
using namespace kvscope::ui;
using kvscope::test::coreReconstruction;

namespace {

constexpr int kWaitMs = 30000;

std::vector<float> headData(const Tensor3& x, int64_t h) { return {x.row(h, 0), x.row(h, 0) + x.tokens * x.dim}; }

Tensor3 wholeTensor(const std::string& path, int layer, TensorKind kind) {
  auto dump = Dump::open(path);
  if (!dump) qFatal("%s", dump.status().message().c_str());
  auto t = (*dump)->read(layer, kind);
  if (!t) qFatal("%s", t.status().message().c_str());
  return std::move(t).value();
}

}  // namespace

class LayerSwitchTest : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  std::string path_;
  SynthOptions options_;

  // Waits until the window shows (layer, head) and its drift series, then compares every view's
  // data with the whole-layer computation.
  void expectViewsOfWholeLayer(MainWindow& w, int layer, int head) {
    QTRY_VERIFY_WITH_TIMEOUT(w.layerQuant() && w.layerQuant()->tensors->layer == layer &&
                                 w.layerQuant()->request.kvHead == head && viewOf<DriftView>(w)->data() && viewOf<DriftView>(w)->data()->layer == layer &&
                                 viewOf<DriftView>(w)->data()->row && viewOf<DriftView>(w)->data()->row->kvHead == head &&
                                 !viewOf<DriftView>(w)->data()->series.positions.empty(),
                             kWaitMs);
    const LayerQuant& lq = *w.layerQuant();
    const DumpInfo& info = w.dump()->info();
    const Tensor3 key = wholeTensor(path_, layer, TensorKind::Key);
    const Tensor3 value = wholeTensor(path_, layer, TensorKind::Value);
    const Tensor3 query = wholeTensor(path_, layer, TensorKind::Query);
    const Tensor3 keyHat = coreReconstruction(path_, layer, TensorKind::Key, w.keyPanel()->spec());
    const Tensor3 valueHat = coreReconstruction(path_, layer, TensorKind::Value, w.valuePanel()->spec());
    // The reconstruction of the head in view, and the whole layer's storage.
    QCOMPARE(lq.hatHead(head), 0);
    QCOMPARE(lq.keyHat.data, headData(keyHat, head));
    QCOMPARE(lq.valueHat.data, headData(valueHat, head));
    const StorageCount keyStorage = storageFor(w.keyPanel()->spec(), info.kvHeads, info.tokens, info.headDim);
    QCOMPARE(lq.keyStorage.bitsPerElement(), keyStorage.bitsPerElement());
    // The originals the views index: the head's values, wherever the read put them.
    const int64_t at = lq.originalHead(head);
    QVERIFY(at >= 0);
    QCOMPARE(std::vector<float>(lq.tensors->key.row(at, 0), lq.tensors->key.row(at, 0) + info.tokens * info.headDim),
             headData(key, head));
    // The heat map of K: |x| (or what the box shows) binned as the view bins it.
    const HeatmapData& shown = viewOf<HeatmapView>(w)->canvas()->data();
    QVERIFY(shown.columns > 0);
    HeatmapData expected;
    const auto heatValue = static_cast<HeatmapValue>(viewOf<HeatmapView>(w)->valueBox()->currentData().toInt());
    computeHeatmapInto(key, head, &keyHat, head, heatValue, shown.columns, expected);
    QCOMPARE(shown.cells, expected.cells);
    QCOMPARE(shown.cellToken, expected.cellToken);
    QCOMPARE(shown.channelMax, expected.channelMax);
    // The histogram of the head's K, original and reconstruction.
    const HistogramData& hist = viewOf<HistogramView>(w)->data();
    const HistogramData expectedHist = computeHistogram(key, &keyHat, head, HistogramScope::Head, 0,
                                                        static_cast<int>(hist.original.size()));
    QCOMPARE(hist.edges, expectedHist.edges);
    QCOMPARE(hist.original, expectedHist.original);
    QCOMPARE(hist.reconstructed, expectedHist.reconstructed);
    QCOMPARE(hist.kurtosis, expectedHist.kurtosis);
    // The drift row and the series along query positions, from the whole layer's tensors.
    AttentionInput input;
    input.query = &query;
    input.key = &key;
    input.value = &value;
    input.keyHat = &keyHat;
    input.valueHat = &valueHat;
    input.softmaxScale = info.softmaxScale;
    const DriftData& drift = *viewOf<DriftView>(w)->data();
    auto row = attentionRowDetail(input, drift.row->queryHead, drift.row->queryIndex);
    QVERIFY(row.hasValue());
    QCOMPARE(drift.row->queryHead / info.groupSize(), head);
    QCOMPARE(drift.row->keyOnly.scores, row->keyOnly.scores);
    QCOMPARE(drift.row->joint.scores, row->joint.scores);
    auto series = attentionPositionSeries(input, SeriesGrouping::KvHead);
    QVERIFY(series.hasValue());
    QCOMPARE(drift.series.positions, series->positions);
    QCOMPARE(drift.series.kl.size(), series->kl.size());
    const auto h = static_cast<size_t>(head);
    QCOMPARE(drift.series.kl[h].size(), series->kl[h].size());
    for (size_t i = 0; i < series->kl[h].size(); ++i) {
      QVERIFY(std::fabs(drift.series.kl[h][i] - series->kl[h][i]) <= 1e-9 * (1 + std::fabs(series->kl[h][i])));
    }
  }

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY(dir_.isValid());
    options_.layers = 4;
    options_.kvHeads = 4;
    options_.heads = 8;
    options_.tokens = 192;
    options_.queries = 8;
    options_.headDim = 32;
    path_ = dir_.filePath(QStringLiteral("switch.h5")).toStdString();
    const Status s = writeSynthDump(path_, options_);
    QVERIFY2(s.isOk(), s.message().c_str());
  }

  // A cold layer shows the head in view from a read of that head alone; the rest follows in the
  // background, after which another head of that layer reads nothing.
  void aColdLayerIsReadHeadFirstAndShowsTheWholeLayersNumbers() {
    MainWindow w(false);
    w.setHeadFirstBytes(1);  // every layer of this small dump takes the head-first path
    w.setSpecs(*parseSpec("int4,axis=channel,group=32,residual=16"), *parseSpec("int2,axis=token,group=32,residual=16"));
    test::openAndWaitForViews(w, QString::fromStdString(path_), kWaitMs);
    QVERIFY(!w.layerQuant()->tensors->whole());
    QCOMPARE(w.layerQuant()->tensors->key.heads, 1);
    QCOMPARE(w.layerQuant()->tensors->firstHead, 0);
    QVERIFY(w.layerQuant()->tensors->keyPreRopeSkipped);  // no view shows pre-RoPE K
    expectViewsOfWholeLayer(w, 0, 0);
    if (QTest::currentTestFailed()) return;

    // The fill lane completes the layer; a head switch then uses the whole layer.
    QTRY_VERIFY_WITH_TIMEOUT(!w.busy(), kWaitMs);
    w.select(0, 2);
    expectViewsOfWholeLayer(w, 0, 2);
    if (QTest::currentTestFailed()) return;
    QVERIFY(w.layerQuant()->tensors->whole());

    // Another cold layer, head 2 in view: read as head 2 alone.
    QTRY_VERIFY_WITH_TIMEOUT(!w.busy(), kWaitMs);
    w.select(2, 2);
    expectViewsOfWholeLayer(w, 2, 2);
    if (QTest::currentTestFailed()) return;
    QVERIFY(!w.layerQuant()->tensors->whole());
    QCOMPARE(w.layerQuant()->tensors->firstHead, 2);
    // At once another head (the fill may still run): that head is read, or taken from the whole layer.
    w.select(2, 3);
    expectViewsOfWholeLayer(w, 2, 3);
    if (QTest::currentTestFailed()) return;
    // And back to a layer in the cache.
    w.select(0, 1);
    expectViewsOfWholeLayer(w, 0, 1);
    if (QTest::currentTestFailed()) return;
    QVERIFY(w.layerQuant()->tensors->whole());
  }

  // Pre-RoPE K is read when a view shows it, on a layer that was read without it.
  void aViewOfPreRopeKeysReadsThemForAPartlyReadLayer() {
    MainWindow w(false);
    w.setHeadFirstBytes(1);
    w.setSpecs(*parseSpec("int4,axis=channel,group=32"), *parseSpec("int4"));
    test::openAndWaitForViews(w, QString::fromStdString(path_), kWaitMs);
    QTRY_VERIFY_WITH_TIMEOUT(!w.busy(), kWaitMs);
    w.select(3, 1);
    QTRY_VERIFY_WITH_TIMEOUT(w.layerQuant() && w.layerQuant()->tensors->layer == 3, kWaitMs);
    QVERIFY(w.layerQuant()->tensors->keyPreRopeSkipped || w.layerQuant()->tensors->whole());
    QComboBox* box = viewOf<HeatmapView>(w)->tensorBox();
    box->setCurrentIndex(box->findData(static_cast<int>(ViewTensor::KeyPreRope)));
    QTRY_VERIFY_WITH_TIMEOUT(w.layerQuant() && w.layerQuant()->tensors->layer == 3 &&
                                 w.layerQuant()->keyPreRopeHat.has_value() && w.layerQuant()->tensors->keyPreRope,
                             kWaitMs);
    const DumpInfo& info = w.dump()->info();
    const LayerQuant& lq = *w.layerQuant();
    Tensor3 preHat = coreReconstruction(path_, 3, TensorKind::Key, w.keyPanel()->spec());
    applyInverseRope(preHat, info.rope());
    QCOMPARE(lq.keyPreRopeHat->data, headData(preHat, 1));
    const Tensor3 pre = wholeTensor(path_, 3, TensorKind::KeyPreRope);
    QTRY_VERIFY_WITH_TIMEOUT(viewOf<HeatmapView>(w)->canvas()->data().columns > 0, kWaitMs);
    const HeatmapData& shown = viewOf<HeatmapView>(w)->canvas()->data();
    HeatmapData expected;
    const auto heatValue = static_cast<HeatmapValue>(viewOf<HeatmapView>(w)->valueBox()->currentData().toInt());
    computeHeatmapInto(pre, 1, &preHat, 1, heatValue, shown.columns, expected);
    QCOMPARE(shown.cells, expected.cells);
  }

  // Specs whose scales span the kv heads read the whole layer first, as before.
  void specsThatNeedTheWholeLayerReadItFirst() {
    MainWindow w(false);
    w.setHeadFirstBytes(1);
    w.setSpecs(*parseSpec("int4,axis=tensor"), *parseSpec("int4"));
    test::openAndWaitForViews(w, QString::fromStdString(path_), kWaitMs);
    QVERIFY(w.layerQuant()->tensors->whole());
    QVERIFY(w.layerQuant()->wholeLayer);
    QCOMPARE(w.layerQuant()->keyHat.data, coreReconstruction(path_, 0, TensorKind::Key, w.keyPanel()->spec()).data);
    QTRY_VERIFY_WITH_TIMEOUT(!w.busy(), kWaitMs);
    w.select(1, 3);
    QTRY_VERIFY_WITH_TIMEOUT(w.layerQuant() && w.layerQuant()->tensors->layer == 1, kWaitMs);
    QVERIFY(w.layerQuant()->tensors->whole());
    QCOMPARE(w.layerQuant()->keyHat.data, coreReconstruction(path_, 1, TensorKind::Key, w.keyPanel()->spec()).data);
  }

  // A pinned setting A whose scales span the kv heads needs the whole layer for A's views: a cold
  // layer is then read whole, and pinning such an A over a layer read head first reads it whole.
  void aPinnedSettingThatNeedsTheWholeLayerReadsItWhole() {
    MainWindow w(false);
    w.setHeadFirstBytes(1);
    w.setSpecs(*parseSpec("int4,axis=tensor"), *parseSpec("int4"));
    test::openAndWaitForViews(w, QString::fromStdString(path_), kWaitMs);
    w.pinAsA();
    const QuantSpec b = *parseSpec("int4,axis=channel,group=32");
    w.setSpecs(b, *parseSpec("int4"));
    QTRY_VERIFY_WITH_TIMEOUT(!w.busy(), kWaitMs);
    w.select(2, 1);
    QTRY_VERIFY_WITH_TIMEOUT(w.layerQuant() && w.layerQuant()->tensors->layer == 2 && w.feed()->pinned()->layer() &&
                                 w.feed()->comparisonMatches(),
                             kWaitMs);
    QVERIFY(w.layerQuant()->tensors->whole());
    QCOMPARE(w.feed()->pinned()->layer()->keyHat.data,
             coreReconstruction(path_, 2, TensorKind::Key, *parseSpec("int4,axis=tensor")).data);
    QVERIFY2(w.lastError().isEmpty(), qPrintable(w.lastError()));

    // Unpinned, a cold layer is read head first; pinning the tensor-wide A again (undo of the
    // unpin) over it reads the layer whole for A.
    w.unpinA();
    QTRY_VERIFY_WITH_TIMEOUT(!w.busy(), kWaitMs);
    w.select(3, 1);
    QTRY_VERIFY_WITH_TIMEOUT(w.layerQuant() && w.layerQuant()->tensors->layer == 3, kWaitMs);
    QVERIFY(!w.layerQuant()->tensors->whole());
    w.undoStack()->undo();
    QVERIFY(w.session()->pinned().has_value());
    QTRY_VERIFY_WITH_TIMEOUT(w.layerQuant() && w.layerQuant()->tensors->layer == 3 && w.feed()->pinned()->layer() &&
                                 w.feed()->comparisonMatches(),
                             kWaitMs);
    QVERIFY(w.layerQuant()->tensors->whole());
    QVERIFY(w.layerQuant()->keySpec == b);
    QCOMPARE(w.feed()->pinned()->layer()->keyHat.data,
             coreReconstruction(path_, 3, TensorKind::Key, *parseSpec("int4,axis=tensor")).data);
    QVERIFY2(w.lastError().isEmpty(), qPrintable(w.lastError()));
  }

  // A pinned setting A whose K spec is `prerope` needs the layer's pre-RoPE K even when B's does
  // not and no view shows it: a cold layer read head first reads it for A (without it A's
  // quantization refuses the layer and A's views stay empty).
  void aPinnedPreRopeSettingReadsPreRopeKeysForAHeadFirstLayer() {
    MainWindow w(false);
    w.setHeadFirstBytes(1);
    const QuantSpec a = *parseSpec("int4,prerope");
    w.setSpecs(a, *parseSpec("int4"));
    test::openAndWaitForViews(w, QString::fromStdString(path_), kWaitMs);
    w.pinAsA();
    w.setSpecs(*parseSpec("int4"), *parseSpec("int4"));
    QTRY_VERIFY_WITH_TIMEOUT(!w.busy(), kWaitMs);
    w.select(2, 1);
    QTRY_VERIFY_WITH_TIMEOUT(w.layerQuant() && w.layerQuant()->tensors->layer == 2 && w.feed()->pinned()->layer() &&
                                 w.feed()->comparisonMatches(),
                             kWaitMs);
    QVERIFY(!w.layerQuant()->tensors->whole());  // still read head first: int4 quantizes per head
    QVERIFY(w.layerQuant()->tensors->keyPreRope.has_value());
    const Tensor3 aHat = coreReconstruction(path_, 2, TensorKind::Key, a);
    QCOMPARE(w.feed()->pinned()->layer()->keyHat.data, headData(aHat, 1));
    QVERIFY2(w.lastError().isEmpty(), qPrintable(w.lastError()));
  }

  // Without the lowered threshold a small dump is read whole, as it always was.
  void aSmallLayerIsReadWhole() {
    MainWindow w(false);
    w.setSpecs(*parseSpec("int4,axis=channel,group=32"), *parseSpec("int4"));
    test::openAndWaitForViews(w, QString::fromStdString(path_), kWaitMs);
    QVERIFY(w.layerQuant()->tensors->whole());
  }
};

QTEST_MAIN(LayerSwitchTest)
#include "layer_switch_test.moc"
