// SPDX-License-Identifier: GPL-3.0-or-later
// The sensitivity view and the diagnosis panel driven as a user drives them: typed candidates,
// combos, hover and clicks on the grid, clicks on findings and their Apply buttons. What the
// user sees is checked against numbers computed here without the GUI (the pipeline and §6's
// attention metrics per (layer, kv head), the dump's own token norms).
#include <QtTest>

#include <QComboBox>
#include <QLabel>
#include <QLineSeries>
#include <QLineEdit>
#include <QPushButton>
#include <QStandardItemModel>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QToolTip>
#include <QTreeWidget>
#include <QUndoStack>

#include <algorithm>
#include <cmath>

#include "core/attention/attention.h"
#include "core/diagnose/diagnose.h"
#include "core/io/dump.h"
#include "core/quant/quantize.h"
#include "core/sensitivity/sensitivity.h"
#include "core/synth/synth.h"
#include "ui/export/exporter.h"
#include "ui/headless.h"
#include "ui/main_window.h"
#include "tests/ui/ui_test_support.h"
#include "ui/views/colour_map.h"
#include "ui/views/diagnosis_view.h"
#include "ui/views/histogram_view.h"
#include "ui/views/sensitivity_view.h"
#include "ui/widgets/plan_editor.h"
#include "ui/widgets/spec_panel.h"
#include "ui/workers/job_runner.h"

using namespace kvscope;
using namespace kvscope::ui;

namespace {

constexpr int kWaitMs = 60000;

SynthOptions smallOptions(const std::string& profile) {
  SynthOptions o = test::synthShape(3, 2, 4, 96, 8, 32, 7);
  o.profile = profile;
  return o;
}

// key_only and value_only metrics per kv head of `layer` under `spec`, computed without the
// sensitivity code: the pipeline on K and on V, then §6's attention metrics with both
// reconstructions (as kvscope-cli eval computes them).
std::vector<AttentionCases> expectedCases(const Dump& dump, int layer, const std::string& specText) {
  const DumpInfo& info = dump.info();
  const Tensor3 k = *dump.read(layer, TensorKind::Key);
  const Tensor3 v = *dump.read(layer, TensorKind::Value);
  const Tensor3 qry = *dump.read(layer, TensorKind::Query);
  std::optional<Tensor3> pre;
  if (info.hasKeyPreRope) pre = *dump.read(layer, TensorKind::KeyPreRope);
  const QuantSpec spec = *parseSpec(specText);
  const RopeParams rope = info.rope();
  auto kh = quantizeTensor(QuantInput{&k, pre ? &*pre : nullptr, rope}, spec);
  auto vh = quantizeTensor(QuantInput{&v, nullptr, rope}, spec);
  if (!kh || !vh) qFatal("quantize failed");
  AttentionInput in;
  in.query = &qry;
  in.key = &k;
  in.value = &v;
  in.keyHat = &kh->reconstruction;
  in.valueHat = &vh->reconstruction;
  in.softmaxScale = info.softmaxScale;
  auto m = attentionMetrics(in);
  if (!m) qFatal("attention failed");
  return *m;
}

bool near(double a, double b) { return std::abs(a - b) <= 1e-9 * (1 + std::abs(b)); }

}  // namespace

class SensitivityDiagnosisTest : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString llama_, sinks_, bias_;

  static void open(MainWindow& w, const QString& path) {
    QSignalSpy layer(&w, &MainWindow::layerReady);
    w.openDump(path);
    QVERIFY(layer.wait(kWaitMs));
  }
  QTabWidget* tabs(MainWindow& w) { return w.viewTabs(); }

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY(dir_.isValid());
    const auto write = [&](const std::string& profile, QString* out) {
      *out = dir_.filePath(QString::fromStdString(profile) + QStringLiteral(".h5"));
      const Status s = writeSynthDump(out->toStdString(), smallOptions(profile));
      QVERIFY2(s.isOk(), s.message().c_str());
    };
    write("llama", &llama_);
    write("massive-sinks", &sinks_);
    write("qwen2-bias", &bias_);
  }

  void gridShowsEachCellsDamageAndClickSelects() {
    MainWindow w(false);
    w.resize(1500, 950);
    w.show();
    open(w, llama_);
    SensitivityView* view = viewOf<SensitivityView>(w);
    QVERIFY(!view->map());  // not computed until shown or asked: opening a dump costs nothing more
    // The user types two candidates and shows the tab.
    view->candidatesField()->setText(QStringLiteral("int2,axis=token,group=32;int4,axis=token"));
    QSignalSpy computed(view, &SensitivityView::computed);
    w.showTab(tabs(w)->indexOf(view));
    QVERIFY(computed.wait(kWaitMs));
    QVERIFY(view->upToDate());
    const SensitivityMapPtr map = view->map();
    QCOMPARE(map->layers, (std::vector<int>{0, 1, 2}));
    QCOMPARE(view->candidateBox()->count(), 2);
    QCOMPARE(view->candidateBox()->itemData(0).toString(), QStringLiteral("int2,group=32"));  // canonical

    auto dump = Dump::open(llama_.toStdString());
    QVERIFY(dump.hasValue());
    SensitivityCanvas* canvas = view->canvas();
    view->metricBox()->setCurrentIndex(view->metricBox()->findText(QStringLiteral("output_rel_error")));
    QCoreApplication::processEvents();
    canvas->repaint();
    for (int c = 0; c < 2; ++c) {
      view->candidateBox()->setCurrentIndex(c);
      const std::string spec = view->candidateBox()->itemData(c).toString().toStdString();
      // Every cell of both grids: the view's number is key_only (K) / value_only (V) output_rel_error.
      std::vector<double> all;
      for (int layer = 0; layer < 3; ++layer) {
        const std::vector<AttentionCases> expected = expectedCases(**dump, layer, spec);
        for (int g = 0; g < 2; ++g) {
          const SensitivityCell k = canvas->cell(true, static_cast<size_t>(layer), g);
          const SensitivityCell v = canvas->cell(false, static_cast<size_t>(layer), g);
          QVERIFY(k.valid && v.valid);
          QVERIFY2(near(k.value, expected[static_cast<size_t>(g)].keyOnly.outputRelError),
                   qPrintable(QStringLiteral("%1 layer %2 head %3: %4 vs %5").arg(QString::fromStdString(spec)).arg(layer).arg(g)
                                  .arg(k.value).arg(expected[static_cast<size_t>(g)].keyOnly.outputRelError)));
          QVERIFY(near(v.value, expected[static_cast<size_t>(g)].valueOnly.outputRelError));
          all.push_back(k.value);
          all.push_back(v.value);
        }
      }
      // One log scale for both grids (same metric): from the smallest to the largest cell.
      const double lo = *std::min_element(all.begin(), all.end());
      const double hi = *std::max_element(all.begin(), all.end());
      QVERIFY(lo > 0);
      QCOMPARE(canvas->scaleRange(true), std::make_pair(lo, hi));
      QCOMPARE(canvas->scaleRange(false), std::make_pair(lo, hi));
      // The drawn colour of a cell is the colour map at its log position (a pixel off the label).
      canvas->repaint();
      const QImage shot = canvas->grab().toImage();
      const qreal dpr = shot.devicePixelRatio();
      for (const bool isKey : {true, false}) {
        for (int layer = 0; layer < 3; ++layer) {
          const SensitivityCell cell = canvas->cell(isKey, static_cast<size_t>(layer), 1);
          const QRectF r = canvas->cellRect(isKey, static_cast<size_t>(layer), 1);
          const QPoint at((r.left() + 4) * dpr, (r.top() + 4) * dpr);
          const double t = std::log(cell.value / lo) / std::log(hi / lo);
          const QColor want = QColor::fromRgb(colourAt(t));
          const QColor got = shot.pixelColor(at);
          QVERIFY2(std::abs(got.red() - want.red()) <= 2 && std::abs(got.green() - want.green()) <= 2 &&
                       std::abs(got.blue() - want.blue()) <= 2,
                   qPrintable(QStringLiteral("layer %1: drawn %2, expected %3").arg(layer).arg(got.name(), want.name())));
        }
      }
    }

    // K coloured by kl_mean: the K cells follow, V stays output_rel_error (values move no score).
    view->candidateBox()->setCurrentIndex(1);
    view->metricBox()->setCurrentIndex(view->metricBox()->findText(QStringLiteral("kl_mean")));
    canvas->repaint();
    const std::vector<AttentionCases> l1 = expectedCases(**dump, 1, "int4,axis=token");
    QVERIFY(near(canvas->cell(true, 1, 0).value, l1[0].keyOnly.klMean));
    QVERIFY(near(canvas->cell(false, 1, 0).value, l1[0].valueOnly.outputRelError));
    // top1_agreement is coloured as its complement (brighter = more damage).
    view->metricBox()->setCurrentIndex(view->metricBox()->findText(QStringLiteral("top1_agreement")));
    QVERIFY(near(canvas->cell(true, 1, 0).value, 1 - l1[0].keyOnly.top1Agreement));

    // Hover: the tooltip names the place, the candidate, the metric and the other metrics.
    view->metricBox()->setCurrentIndex(view->metricBox()->findText(QStringLiteral("kl_mean")));
    canvas->repaint();
    const QPointF centre = canvas->cellRect(true, 1, 0).center();
    QTest::mouseMove(canvas, centre.toPoint());
    const QString hover = canvas->describe(canvas->cellAt(centre));
    QVERIFY2(hover.contains(QStringLiteral("layer 1 · kv head 0")) && hover.contains(QStringLiteral("candidate int4 (")),
             qPrintable(hover));
    QVERIFY2(hover.contains(QStringLiteral("kl_mean = %1").arg(l1[0].keyOnly.klMean, 0, 'g', 4)), qPrintable(hover));
    QVERIFY2(hover.contains(QStringLiteral("output_rel_error = %1").arg(l1[0].keyOnly.outputRelError, 0, 'g', 4)),
             qPrintable(hover));
    QVERIFY(hover.contains(QStringLiteral("top1_agreement")) && hover.contains(QStringLiteral("score_max")));
    QTRY_COMPARE(QToolTip::text(), hover);  // what the mouse move showed

    // Click a V cell: that layer and kv head are selected everywhere.
    QCOMPARE(w.selection().layer, 0);
    QSignalSpy layerReady(&w, &MainWindow::layerReady);
    QTest::mouseClick(canvas, Qt::LeftButton, {}, canvas->cellRect(false, 2, 1).center().toPoint());
    QCOMPARE(w.selection().layer, 2);
    QCOMPARE(w.selection().kvHead, 1);
    QVERIFY(layerReady.wait(kWaitMs));
    QCOMPARE(w.layerQuant()->tensors->layer, 2);  // the other views now show layer 2

    // A spec change does not recompute the map (it does not depend on the K/V settings)...
    w.setSpecs(*parseSpec("int3"), *parseSpec("int3"));
    QTest::qWait(200);
    QCOMPARE(view->map(), map);
    QVERIFY(!view->runner()->busy());
    // ...a new candidate list does.
    view->candidatesField()->setText(QStringLiteral("q4_0"));
    QVERIFY(!view->upToDate());
    QTest::keyClick(view->candidatesField(), Qt::Key_Return);
    QVERIFY(computed.wait(kWaitMs));
    QVERIFY(view->map() != map);
    QCOMPARE(view->candidateBox()->count(), 1);
    const std::vector<AttentionCases> q4 = expectedCases(**dump, 0, "q4_0");
    QVERIFY(near(view->canvas()->cell(true, 0, 1).value, q4[1].keyOnly.klMean));
    // A bad list says what is allowed and keeps the map.
    view->candidatesField()->setText(QStringLiteral("int4;nonsense"));
    QTest::keyClick(view->candidatesField(), Qt::Key_Return);
    QVERIFY2(view->statusLabel()->text().contains(QStringLiteral("'nonsense' is not a spec")), qPrintable(view->statusLabel()->text()));
    QVERIFY(view->map() != nullptr);

    // Sessions keep the candidate list, the metric and the candidate shown.
    view->candidatesField()->setText(QStringLiteral("q4_0;int4,axis=token"));
    QTest::keyClick(view->candidatesField(), Qt::Key_Return);
    QVERIFY(computed.wait(kWaitMs));
    view->candidateBox()->setCurrentIndex(1);
    view->metricBox()->setCurrentIndex(view->metricBox()->findText(QStringLiteral("kl_max")));
    const QString session = dir_.filePath(QStringLiteral("sens-session.json"));
    QVERIFY(w.saveSession(session).isOk());
    {
      MainWindow w2(false);
      w2.show();
      QSignalSpy again(viewOf<SensitivityView>(w2), &SensitivityView::computed);
      w2.showTab(tabs(w2)->indexOf(viewOf<SensitivityView>(w2)));
      QVERIFY(w2.loadSession(session).isOk());
      QVERIFY(again.wait(kWaitMs));
      QCOMPARE(viewOf<SensitivityView>(w2)->candidatesField()->text(), QStringLiteral("q4_0;int4,axis=token"));
      QCOMPARE(viewOf<SensitivityView>(w2)->metricBox()->currentText(), QStringLiteral("kl_max"));
      QCOMPARE(viewOf<SensitivityView>(w2)->candidateBox()->count(), 2);  // the map of the restored list
      QCOMPARE(viewOf<SensitivityView>(w2)->candidateBox()->currentData().toString(), QStringLiteral("int4"));
    }

    // Exports: the CSV is core's, the images draw.
    const QString csv = dir_.filePath(QStringLiteral("sens.csv"));
    QVERIFY(exportView(*view, csv, ExportFormat::Csv, QSize(800, 500)).isOk());
    QFile f(csv);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QCOMPARE(QString::fromUtf8(f.readAll()), QString::fromStdString(sensitivityToCsv(*view->map())));
    for (const char* name : {"sens.png", "sens.svg"}) {
      const QString path = dir_.filePath(QString::fromLatin1(name));
      QVERIFY(exportView(*view, path, *exportFormatFor(path), QSize(800, 500)).isOk());
      QVERIFY(QFileInfo(path).size() > 1000);
    }
  }

  void cancelStopsTheMapAndShowingAgainRestartsIt() {
    MainWindow w(false);
    w.show();
    open(w, llama_);
    SensitivityView* view = viewOf<SensitivityView>(w);
    view->candidatesField()->setText(QStringLiteral("search"));  // the whole search set: long enough to cancel
    view->compute();
    QVERIFY(view->runner()->busy());
    QVERIFY(w.busy());  // the window's progress bar and Cancel button follow the lane
    view->runner()->cancel();
    QVERIFY(!view->map());
    QVERIFY2(view->statusLabel()->text().contains(QStringLiteral("cancelled")), qPrintable(view->statusLabel()->text()));
    view->candidatesField()->setText(QStringLiteral("int8"));
    QSignalSpy computed(view, &SensitivityView::computed);
    w.showTab(tabs(w)->indexOf(view));
    QVERIFY(computed.wait(kWaitMs));
    QCOMPARE(view->candidateBox()->count(), 1);

    // Another dump while a map is computing: the stale job is dropped and the new dump mapped.
    view->candidatesField()->setText(QStringLiteral("search"));
    view->compute();
    QVERIFY(view->runner()->busy());
    view->candidatesField()->setText(QStringLiteral("int8"));
    computed.clear();
    open(w, sinks_);
    if (computed.isEmpty()) QVERIFY(computed.wait(kWaitMs));
    QCOMPARE(computed.count(), 1);
    QCOMPARE(QString::fromStdString(view->map()->dump.path), sinks_);
    QCOMPARE(view->candidateBox()->count(), 1);
  }

  void aDumpWithoutQueriesSaysWhyThereIsNoMap() {
    const QString path = dir_.filePath(QStringLiteral("noq.h5"));
    SynthOptions o = smallOptions("llama");
    o.queries = 0;
    QVERIFY(writeSynthDump(path.toStdString(), o).isOk());
    MainWindow w(false);
    w.show();
    open(w, path);
    SensitivityView* view = viewOf<SensitivityView>(w);
    w.showTab(tabs(w)->indexOf(view));
    QVERIFY(!view->runner()->busy());
    QVERIFY(!view->map());
    QVERIFY2(view->statusLabel()->text().contains(QStringLiteral("no queries")), qPrintable(view->statusLabel()->text()));
    // The diagnosis still runs, and says what it could not check.
    DiagnosisView* diagnosis = viewOf<DiagnosisView>(w);
    QSignalSpy computed(diagnosis, &DiagnosisView::computed);
    w.showTab(tabs(w)->indexOf(diagnosis));
    QVERIFY(computed.wait(kWaitMs));
    QVERIFY(!diagnosis->diagnosis()->notes.empty());
    QVERIFY(w.findChild<QLabel*>(QStringLiteral("diagnosisStatus"))->text().contains(QStringLiteral("no queries")));
  }

  void massiveSinksFindingSelectsItsPlaceAndApplies() {
    MainWindow w(false);
    w.resize(1500, 950);
    w.show();
    open(w, sinks_);
    // A plan with an override: Apply must reach every part of it.
    w.setPlans(*parsePlan("int4,axis=token;2:int8"), *parsePlan("int4,axis=token"));
    DiagnosisView* view = viewOf<DiagnosisView>(w);
    QSignalSpy computed(view, &DiagnosisView::computed);
    w.showTab(tabs(w)->indexOf(view));
    QVERIFY(computed.wait(kWaitMs));
    QTreeWidget* tree = view->tree();
    QTreeWidgetItem* massive = nullptr;
    for (int i = 0; i < tree->topLevelItemCount(); ++i) {
      if (tree->topLevelItem(i)->text(1).startsWith(QStringLiteral("massive_tokens:"))) massive = tree->topLevelItem(i);
    }
    QVERIFY2(massive != nullptr, "no massive_tokens finding on the massive-sinks dump");
    QCOMPARE(massive->text(0), QStringLiteral("high"));
    QVERIFY(massive->childCount() > 0);

    // Click the finding's second evidence row.
    QTreeWidgetItem* row = massive->child(std::min(1, massive->childCount() - 1));
    const int layer = row->text(2).toInt(), kvHead = row->text(3).toInt();
    const int token = row->text(6).toInt();
    const int sinks = synthMassiveSinkCount(smallOptions("massive-sinks"));
    QVERIFY(sinks > 0);
    QVERIFY2(token < sinks, qPrintable(row->text(6)));
    // The evidence is true of the dump: that token's norm is ≥ 50× the head's median token norm.
    auto dump = Dump::open(sinks_.toStdString());
    QVERIFY(dump.hasValue());
    const TensorKind kind = row->text(7) == QStringLiteral("value") ? TensorKind::Value : TensorKind::Key;
    const Tensor3 x = *(*dump)->read(layer, kind);
    std::vector<double> norms;
    for (int64_t t = 0; t < x.tokens; ++t) {
      double s = 0;
      for (int64_t d = 0; d < x.dim; ++d) s += static_cast<double>(x.at(kvHead, t, d)) * x.at(kvHead, t, d);
      norms.push_back(std::sqrt(s));
    }
    const double tokenNorm = norms[static_cast<size_t>(token)];
    std::nth_element(norms.begin(), norms.begin() + static_cast<std::ptrdiff_t>(norms.size() / 2), norms.end());
    QVERIFY2(tokenNorm >= diagnose_thresholds::kMassiveNormRatio * norms[norms.size() / 2],
             qPrintable(QStringLiteral("norm %1, median %2").arg(tokenNorm).arg(norms[norms.size() / 2])));
    QVERIFY2(row->text(8).contains(QStringLiteral("norm %1").arg(tokenNorm, 0, 'g', 4)), qPrintable(row->text(8)));

    tree->scrollToItem(row);
    QTest::mouseClick(tree->viewport(), Qt::LeftButton, {}, tree->visualItemRect(row).center());
    QCOMPARE(w.selection().layer, layer);
    QCOMPARE(w.selection().kvHead, kvHead);
    QCOMPARE(w.selection().token, token);
    // The histogram shows that token of that tensor.
    QCOMPARE(viewOf<HistogramView>(w)->scopeBox()->currentData().toInt(), static_cast<int>(HistogramScope::Token));
    QCOMPARE(viewOf<HistogramView>(w)->tensorBox()->currentData().toInt(),
             static_cast<int>(kind == TensorKind::Value ? ViewTensor::Value : ViewTensor::Key));
    QCOMPARE(viewOf<HistogramView>(w)->spaceBox()->currentData().toInt(), 0);  // the dump's values, as the evidence
    // ...and counts that token's D values (the step series has two points per bin).
    const auto drawnCount = [&] {
      double n = 0;
      const QList<QPointF> points = viewOf<HistogramView>(w)->originalSeries()->points();
      for (qsizetype i = 0; i + 1 < points.size(); i += 2) n += points[i].y();
      return n;
    };
    QTRY_COMPARE_WITH_TIMEOUT(drawnCount(), static_cast<double>(x.dim), kWaitMs);

    // The advice names sinks=S and Apply puts it into both panels and the override.
    QVERIFY2(view->adviceLabel()->text().contains(QStringLiteral("sinks=%1").arg(sinks)), qPrintable(view->adviceLabel()->text()));
    QPushButton* apply = nullptr;
    for (QPushButton* b : view->applyButtons()) {
      if (b->objectName() == QStringLiteral("apply:sinks=%1").arg(sinks)) apply = b;
    }
    QVERIFY(apply != nullptr);
    const int undoSteps = w.undoStack()->count();
    QTest::mouseClick(apply, Qt::LeftButton);
    QCOMPARE(w.keyPanel()->spec().sinks, sinks);
    QCOMPARE(w.valuePanel()->spec().sinks, sinks);
    QCOMPARE(QString::fromStdString(toString(w.keyPlan())),
             QStringLiteral("int4,sinks=%1;2:int8,sinks=%1").arg(sinks));
    QCOMPARE(QString::fromStdString(toString(w.valuePlan())), QStringLiteral("int4,sinks=%1").arg(sinks));
    QVERIFY(w.undoStack()->count() > undoSteps);  // Edit ▸ Undo takes it back

    // Exports: the CSV has one row per evidence entry of every finding.
    QString csv = view->toCsv();
    int rows = 0;
    for (const Finding& f : view->diagnosis()->findings) rows += static_cast<int>(f.evidence.size());
    QCOMPARE(static_cast<int>(csv.count(QLatin1Char('\n'))), rows + 1);
    QVERIFY(csv.contains(QStringLiteral("massive_tokens,high,")));
  }

  void keyBiasOffersPerChannelKeysAndLlamaHasNoMassiveTokens() {
    MainWindow w(false);
    w.show();
    open(w, bias_);
    w.setSpecs(*parseSpec("q4_0"), *parseSpec("q4_0"));
    DiagnosisView* view = viewOf<DiagnosisView>(w);
    QSignalSpy computed(view, &DiagnosisView::computed);
    w.showTab(tabs(w)->indexOf(view));
    QVERIFY(computed.wait(kWaitMs));
    QTreeWidget* tree = view->tree();
    QTreeWidgetItem* bias = nullptr;
    for (int i = 0; i < tree->topLevelItemCount(); ++i) {
      if (tree->topLevelItem(i)->text(1).startsWith(QStringLiteral("key_bias:"))) bias = tree->topLevelItem(i);
    }
    QVERIFY(bias != nullptr);
    // Its evidence names the biased channels synth put there.
    const std::vector<int> channels = synthBiasChannels(smallOptions("qwen2-bias"), bias->child(0)->text(2).toInt());
    QVERIFY(std::find(channels.begin(), channels.end(), bias->child(0)->text(5).toInt()) != channels.end());
    QTest::mouseClick(tree->viewport(), Qt::LeftButton, {}, tree->visualItemRect(bias).center());
    QCOMPARE(w.selection().channel, bias->child(0)->text(5).toInt());
    QStringList options;
    for (QPushButton* b : view->applyButtons()) options << b->objectName();
    QVERIFY2(options.contains(QStringLiteral("apply:axis=channel")) && options.contains(QStringLiteral("apply:prerope")) &&
                 options.contains(QStringLiteral("apply:rot=hadamard")),
             qPrintable(options.join(QLatin1Char(' '))));
    for (QPushButton* b : view->applyButtons()) {
      if (b->objectName() == QStringLiteral("apply:axis=channel")) QTest::mouseClick(b, Qt::LeftButton);
    }
    // q4_0 has no axes: per-channel keys are KIVI's int4 per channel; V is untouched.
    QCOMPARE(QString::fromStdString(toString(w.keyPanel()->spec())), QStringLiteral("int4,axis=channel,group=32"));
    QCOMPARE(QString::fromStdString(toString(w.valuePanel()->spec())), QStringLiteral("q4_0"));

    // The plain llama profile's dump (no massive first tokens) shows no massive_tokens finding.
    computed.clear();
    open(w, llama_);  // the view is shown: a new dump is diagnosed at once (maybe while open() waits)
    if (computed.isEmpty()) QVERIFY(computed.wait(kWaitMs));
    for (int i = 0; i < tree->topLevelItemCount(); ++i) {
      QVERIFY(!tree->topLevelItem(i)->text(1).startsWith(QStringLiteral("massive_tokens:")));
    }
  }

  void headlessExportWritesBothViews() {
    LaunchOptions o;
    o.dump = sinks_;
    o.key = QStringLiteral("int4");
    o.value = QStringLiteral("int4");
    o.exportDir = dir_.filePath(QStringLiteral("headless"));
    o.views = {QStringLiteral("sensitivity"), QStringLiteral("diagnosis")};
    auto launch = resolveLaunch(o);
    QVERIFY2(launch.hasValue(), launch.status().message().c_str());
    QCOMPARE(runHeadless(*launch), 0);
    const QDir out(o.exportDir);
    for (const char* name : {"sensitivity.png", "sensitivity.svg", "sensitivity.pdf", "sensitivity.csv", "diagnosis.png",
                             "diagnosis.csv"}) {
      QVERIFY2(out.exists(QString::fromLatin1(name)), name);
    }
    QFile csv(out.filePath(QStringLiteral("sensitivity.csv")));
    QVERIFY(csv.open(QIODevice::ReadOnly));
    // The default ladder on both sides, three layers of two kv heads (plus a header), after the
    // export's metadata comment lines.
    int rows = 0;
    while (!csv.atEnd()) {
      if (!csv.readLine().startsWith('#')) ++rows;
    }
    QCOMPARE(rows, 1 + 2 * 3 * 2 * static_cast<int>(sensitivityCandidates().size()));
  }
};

QTEST_MAIN(SensitivityDiagnosisTest)
#include "sensitivity_diagnosis_test.moc"
