// SPDX-License-Identifier: GPL-3.0-or-later
// A/B comparison driven as a user drives it: pin the current setting as A, move a control (B),
// and check that every view shows both, with numbers equal to core's computed here on its own;
// undo/redo of pin and swap; sessions; the headless `--compare-*` export against kvscope-cli eval.
#include <QtTest>

#include <QAction>
#include <QComboBox>
#include <QHeaderView>
#include <QLabel>
#include <QLineSeries>
#include <QProcess>
#include <QPushButton>
#include <QSlider>
#include <QSortFilterProxyModel>
#include <QStandardItemModel>
#include <QStandardPaths>
#include <QTableView>
#include <QTemporaryDir>
#include <QUndoStack>

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/attention/detail.h"
#include "core/engine/engine.h"
#include "core/io/dump.h"
#include "core/inspect/view_compare.h"
#include "core/engine/presets.h"
#include "core/quant/quantize.h"
#include "core/report/eval.h"
#include "core/synth/synth.h"
#include "ui/main_window.h"
#include "tests/ui/ui_test_support.h"
#include "ui/views/drift_view.h"
#include "ui/views/heatmap_view.h"
#include "ui/views/histogram_view.h"
#include "ui/views/summary_view.h"
#include "ui/widgets/comparison_bar.h"
#include "ui/widgets/spec_panel.h"

using namespace kvscope;
using namespace kvscope::ui;
using kvscope::test::coreReconstruction;
using kvscope::test::seriesCounts;

namespace {

constexpr int kWaitMs = 60000;

std::vector<double> ys(QLineSeries* s) {
  std::vector<double> out;
  for (const QPointF& p : s->points()) out.push_back(p.y());
  return out;
}

EvalReport coreEval(const std::string& path, const QuantSpec& key, const QuantSpec& value) {
  auto dump = Dump::open(path);
  if (!dump) qFatal("%s", dump.status().message().c_str());
  EvalOptions options;
  options.key = Plan(key);
  options.value = Plan(value);
  auto report = evaluate(**dump, options);
  if (!report) qFatal("%s", report.status().message().c_str());
  return *report;
}

QProcessEnvironment offscreen() {
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
  return env;
}

}  // namespace

class ComparisonTest : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString sample_;

  // Opens the sample and waits for the views and the summary.
  void openSample(MainWindow& w) {
    QSignalSpy layer(&w, &MainWindow::layerReady);
    QSignalSpy summary(&w, &MainWindow::summaryFinished);
    w.openDump(sample_);
    QVERIFY(layer.wait(kWaitMs));
    QTRY_VERIFY_WITH_TIMEOUT(w.summaryComplete(), kWaitMs);
  }

  // Waits until B is `keySpec` on the layer in view and everything of A is computed.
  static void waitForBoth(MainWindow& w, const QuantSpec& keySpec) {
    QTRY_VERIFY_WITH_TIMEOUT(w.layerQuant() && w.layerQuant()->keySpec == keySpec && w.comparisonComplete() &&
                                 w.summaryComplete() && !w.busy(),
                             kWaitMs);
  }

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY(dir_.isValid());
    auto path = ensureSampleDump(dir_.filePath(QStringLiteral("sample")).toStdString());
    QVERIFY2(path.hasValue(), path.status().message().c_str());
    sample_ = QString::fromStdString(*path);
  }

  void pinThenMoveAControlShowsBothInEveryView() {
    MainWindow w(false);
    w.resize(1400, 900);
    w.setSpecs(*parseSpec("int8"), *parseSpec("int8"));
    openSample(w);
    const std::string path = sample_.toStdString();
    ComparisonBar* bar = w.comparisonBar();
    QVERIFY(!bar->unpinButton()->isVisibleTo(bar));

    // Pin as A, then two bits for keys (B) through the slider.
    bar->pinButton()->click();
    QVERIFY(w.session()->pinned().has_value());
    QVERIFY(w.session()->pinned()->key == Plan(*parseSpec("int8")));
    QVERIFY(bar->unpinButton()->isVisibleTo(bar));
    QVERIFY2(bar->aLabel()->text().contains(QStringLiteral("K int8")), qPrintable(bar->aLabel()->text()));
    w.keyPanel()->bitsSlider()->setValue(2);
    const QuantSpec keyB = w.keyPanel()->spec();
    QCOMPARE(keyB.bits, 2);
    waitForBoth(w, keyB);
    QVERIFY2(bar->bLabel()->text().contains(QString::fromStdString(toString(keyB))), qPrintable(bar->bLabel()->text()));
    QVERIFY2(bar->aLabel()->text().contains(QStringLiteral("K int8")), "A stays what was pinned");

    const Tensor3 keyA = coreReconstruction(path, 0, TensorKind::Key, *parseSpec("int8"));
    const Tensor3 keyBHat = coreReconstruction(path, 0, TensorKind::Key, keyB);
    const Tensor3& key = w.layerQuant()->tensors->key;

    // Histogram: three lines; A's counts are core's int8 reconstruction on the bins shown.
    HistogramView* hist = viewOf<HistogramView>(w);
    // Counts as drawn on a linear axis (a log one draws empty bins at 0.5; auto picks it for this head).
    QVERIFY(selectItemName(hist->countsBox(), QStringLiteral("linear")));
    w.showTab(0);
    QVERIFY(hist->comparisonSeries()->isVisible());
    QCOMPARE(hist->comparisonSeries()->name(), QStringLiteral("reconstructed A"));
    QCOMPARE(hist->reconstructedSeries()->name(), QStringLiteral("reconstructed B"));
    std::vector<double> expectedA;
    countOnEdges(keyA, 0, HistogramScope::Head, 0, hist->data().edges, expectedA);
    QCOMPARE(seriesCounts(hist->comparisonSeries()), expectedA);
    std::vector<double> expectedB;
    countOnEdges(keyBHat, 0, HistogramScope::Head, 0, hist->data().edges, expectedB);
    QCOMPARE(seriesCounts(hist->reconstructedSeries()), expectedB);
    QVERIFY(expectedA != expectedB);  // int8 and int2 do not fill the same bins

    // Heat map: switched to the change in error by the pin; cells are |B err| − |A err|.
    HeatmapView* heat = viewOf<HeatmapView>(w);
    w.showTab(1);
    QCOMPARE(heat->valueBox()->currentIndex(), HeatmapView::kDifferenceIndex);
    QImage canvas(900, 400, QImage::Format_ARGB32);
    {
      QPainter p(&canvas);
      heat->renderTo(p, QRectF(0, 0, 900, 400));
    }
    const HeatmapData& shown = heat->canvas()->data();
    QVERIFY(shown.columns > 0);
    // Every cell, by hand from the two reconstructions: the d of largest |d| in its bin.
    for (int c = 0; c < shown.channels; ++c) {
      for (int col = 0; col < shown.columns; ++col) {
        float best = 0;
        for (int t = shown.binStart(col); t < shown.binStart(col + 1); ++t) {
          const float x = key.at(0, t, c);
          const float d = std::fabs(keyBHat.at(0, t, c) - x) - std::fabs(keyA.at(0, t, c) - x);
          if (std::fabs(d) > std::fabs(best)) best = d;
        }
        QCOMPARE(shown.cell(c, col), best);
      }
    }
    QVERIFY(shown.maxValue > 0);
    const QString hover = heat->canvas()->describeAt(QPointF(450, 200));
    QVERIFY2(hover.contains(QStringLiteral("x′A")) && hover.contains(QStringLiteral("x′B")), qPrintable(hover));
    // The colour bar is centred at 0: its middle is the diverging map's white.
    const QImage& image = heat->canvas()->image();
    QVERIFY(!image.isNull());
    const QString csv = heat->toCsv();
    QVERIFY(csv.startsWith(QStringLiteral("channel,token,error_b_minus_error_a")));

    // Drift: s′ and P′ for A and B; A's equal core's row under A's reconstructions.
    DriftView* drift = viewOf<DriftView>(w);
    w.showTab(2);
    QVERIFY(drift->scoreCaseA()->isVisible());
    QCOMPARE(drift->scoreCase()->name(), QStringLiteral("s′ B"));
    QCOMPARE(drift->scoreCaseA()->name(), QStringLiteral("s′ A"));
    const Tensor3 valueA = coreReconstruction(path, 0, TensorKind::Value, *parseSpec("int8"));
    const Tensor3 valueB = coreReconstruction(path, 0, TensorKind::Value, w.valuePanel()->spec());
    AttentionInput input;
    input.query = &*w.layerQuant()->tensors->query;
    input.key = &key;
    input.value = &w.layerQuant()->tensors->value;
    input.softmaxScale = w.dump()->info().softmaxScale;
    input.keyHat = &keyA;
    input.valueHat = &valueA;
    auto rowA = attentionRowDetail(input, w.selection().queryHead, w.selection().queryIndex);
    input.keyHat = &keyBHat;
    input.valueHat = &valueB;
    auto rowB = attentionRowDetail(input, w.selection().queryHead, w.selection().queryIndex);
    QVERIFY(rowA.hasValue() && rowB.hasValue());
    QCOMPARE(ys(drift->scoreCaseA()), rowA->keyOnly.scores);
    QCOMPARE(ys(drift->scoreCase()), rowB->keyOnly.scores);
    QCOMPARE(ys(drift->probabilityCaseA()), rowA->keyOnly.probabilities);
    QVERIFY(drift->klSeriesA()->isVisible());
    QCOMPARE(drift->klSeriesA()->count(), drift->klSeries()->count());
    QVERIFY(drift->toCsv().contains(QStringLiteral("# setting A")));

    // Summary: A, B and B − A of the chosen metric per (layer, kv head), equal to core's evaluate.
    SummaryView* summary = viewOf<SummaryView>(w);
    w.showTab(3);
    summary->comparisonMetricBox()->setCurrentIndex(summary->comparisonMetricBox()->findData(QStringLiteral("K_rel_error")));
    QStandardItemModel* model = summary->model();
    QCOMPARE(model->headerData(4, Qt::Horizontal).toString(), QStringLiteral("B − A"));
    QVERIFY(model->headerData(4, Qt::Horizontal, Qt::ToolTipRole).toString().contains(QStringLiteral("K_rel_error")));
    const EvalReport a = coreEval(path, *parseSpec("int8"), *parseSpec("int8"));
    const EvalReport b = coreEval(path, keyB, *parseSpec("int8"));
    QCOMPARE(model->rowCount(), 4 * 2);
    for (int r = 0; r < model->rowCount(); ++r) {
      const int layer = model->item(r, 0)->data(Qt::UserRole).toInt();
      const int head = model->item(r, 1)->data(Qt::UserRole).toInt();
      const double ea = a.layers[static_cast<size_t>(layer)].heads[static_cast<size_t>(head)].key.relError;
      const double eb = b.layers[static_cast<size_t>(layer)].heads[static_cast<size_t>(head)].key.relError;
      QCOMPARE(model->item(r, 2)->data(Qt::UserRole).toDouble(), ea);
      QCOMPARE(model->item(r, 3)->data(Qt::UserRole).toDouble(), eb);
      QCOMPARE(model->item(r, 4)->data(Qt::UserRole).toDouble(), eb - ea);
    }
    // Sorting by the difference, as a click on its header does: descending order of B − A.
    summary->table()->horizontalHeader()->setSortIndicator(4, Qt::DescendingOrder);
    auto* proxy = qobject_cast<QSortFilterProxyModel*>(summary->table()->model());
    QVERIFY(proxy);
    double previous = INFINITY;
    for (int r = 0; r < proxy->rowCount(); ++r) {
      const double d = proxy->index(r, 4).data(Qt::UserRole).toDouble();
      QVERIFY(d <= previous);
      previous = d;
    }
    QVERIFY(summary->toCsv().contains(QStringLiteral("b_minus_a_K_rel_error")));

    // Unpin: the views show B alone again; undo brings A back, redo removes it.
    bar->unpinButton()->click();
    QVERIFY(!w.session()->pinned());
    QVERIFY(!hist->comparisonSeries()->isVisible());
    QCOMPARE(heat->valueBox()->currentIndex(), 0);  // the colouring chosen before the pin
    QCOMPARE(w.undoStack()->undoText(), QStringLiteral("unpin A"));
    w.undoStack()->undo();
    QVERIFY(w.session()->pinned().has_value());
    QVERIFY(w.session()->pinned()->key == Plan(*parseSpec("int8")));
    w.undoStack()->redo();
    QVERIFY(!w.session()->pinned());
    // Undo back past the slider move and the pin: nothing pinned, K int8 again.
    w.undoStack()->undo();  // unpin
    w.undoStack()->undo();  // the slider move
    QVERIFY(w.keyPanel()->spec() == *parseSpec("int8"));
    QVERIFY(w.session()->pinned().has_value());
    QCOMPARE(w.undoStack()->undoText(), QStringLiteral("pin as A"));
    w.undoStack()->undo();
    QVERIFY(!w.session()->pinned());
  }

  // A is computed when pinned and when the layer in view changes, never for a move of B's controls.
  void aIsComputedPerLayerNotPerSliderMove() {
    MainWindow w(false);
    w.setSpecs(*parseSpec("int8"), *parseSpec("int8"));
    openSample(w);
    w.pinAsA();
    w.keyPanel()->bitsSlider()->setValue(3);
    waitForBoth(w, w.keyPanel()->spec());
    const LayerQuant* a = w.feed()->pinned()->layer().get();
    QVERIFY(a != nullptr);
    QSignalSpy aReady(w.feed()->pinned(), &SettingLane::layerComputed);
    w.keyPanel()->bitsSlider()->setValue(2);
    waitForBoth(w, w.keyPanel()->spec());
    QCOMPARE(aReady.count(), 0);
    QCOMPARE(w.feed()->pinned()->layer().get(), a);
    // Another layer: A follows, with core's int8 reconstruction of that layer's head.
    w.select(2, 1);
    QTRY_VERIFY_WITH_TIMEOUT(w.layerQuant() && w.layerQuant()->tensors->layer == 2 && w.comparisonComplete(), kWaitMs);
    QVERIFY(aReady.count() >= 1);
    const LayerQuant& a2 = *w.feed()->pinned()->layer();
    QCOMPARE(a2.tensors->layer, 2);
    const Tensor3 expected = coreReconstruction(sample_.toStdString(), 2, TensorKind::Key, *parseSpec("int8"));
    const int64_t head = a2.hatHead(1);
    QVERIFY(head >= 0);
    const std::vector<float> shown(a2.keyHat.row(head, 0), a2.keyHat.row(head, 0) + a2.keyHat.tokens * a2.keyHat.dim);
    const std::vector<float> core(expected.row(1, 0), expected.row(1, 0) + expected.tokens * expected.dim);
    QVERIFY(shown == core);
  }

  void swapAndPresetsAndEngines() {
    MainWindow w(false);
    openSample(w);
    const KvShape shape{w.dump()->info().headDim, w.dump()->info().layers, w.dump()->info().kvHeads};
    // A set by a preset, B by an engine string.
    QVERIFY(w.applyPreset(QStringLiteral("kivi-4")));
    const auto kivi = parseResolved(*resolvePreset("kivi-4", shape), "kivi-4");
    QVERIFY(kivi.hasValue());
    w.pinAsA();
    QVERIFY(w.session()->pinned()->key.base == kivi->key);
    QVERIFY(w.session()->pinned()->value.base == kivi->value);
    const QString engine = QStringLiteral("llama.cpp -ctk q4_0 -ctv q4_0");
    QVERIFY(w.applyEngine(engine));
    const auto llama = parseResolved(*resolveEngine(engine.toStdString(), shape), engine.toStdString());
    QVERIFY(llama.hasValue());
    QVERIFY(w.keyPanel()->spec() == llama->key);
    waitForBoth(w, llama->key);
    QVERIFY(w.feed()->comparisonMatches());
    // The Edit menu offers the same as the bar.
    auto* unpinAction = [&]() -> QAction* {
      for (QAction* a : w.findChildren<QAction*>()) {
        if (a->text() == QStringLiteral("U&npin A")) return a;
      }
      return nullptr;
    }();
    QVERIFY(unpinAction && unpinAction->isEnabled());
    // Swap: the controls get A (kivi-4), A becomes the engine's setting; one undo step.
    const int steps = w.undoStack()->count();
    w.comparisonBar()->swapButton()->click();
    QVERIFY(w.keyPanel()->spec() == kivi->key);
    QVERIFY(w.valuePanel()->spec() == kivi->value);
    QVERIFY(w.session()->pinned()->key.base == llama->key);
    QCOMPARE(w.undoStack()->count(), steps + 1);
    QCOMPARE(w.undoStack()->undoText(), QStringLiteral("swap A and B"));
    w.undoStack()->undo();
    QVERIFY(w.keyPanel()->spec() == llama->key);
    QVERIFY(w.session()->pinned()->key.base == kivi->key);
  }

  void sessionsKeepThePinnedSetting() {
    const QString session = dir_.filePath(QStringLiteral("ab-session.json"));
    {
      MainWindow w(false);
      w.setSpecs(*parseSpec("int8"), *parseSpec("int4"));
      openSample(w);
      w.pinAsA();
      w.setSpecs(*parseSpec("int2"), *parseSpec("int4"));
      QVERIFY(w.saveSession(session).isOk());
      const auto j = nlohmann::json::parse(w.sessionJson());
      QCOMPARE(QString::fromStdString(j["compare"]["key"].get<std::string>()), QStringLiteral("int8"));
    }
    MainWindow w(false);
    QSignalSpy layer(&w, &MainWindow::layerReady);
    QVERIFY(w.loadSession(session).isOk());
    QVERIFY(w.session()->pinned().has_value());
    QVERIFY(w.session()->pinned()->key == Plan(*parseSpec("int8")));
    QVERIFY(w.session()->pinned()->value == Plan(*parseSpec("int4")));
    QVERIFY(w.keyPanel()->spec() == *parseSpec("int2"));
    QVERIFY(layer.wait(kWaitMs));
    waitForBoth(w, *parseSpec("int2"));
    QVERIFY(w.feed()->pinned()->summaryComplete());
    // A session without a pinned setting unpins.
    const QString plain = dir_.filePath(QStringLiteral("plain-session.json"));
    w.unpinA();
    QVERIFY(w.saveSession(plain).isOk());
    w.pinAsA();
    QVERIFY(w.loadSession(plain).isOk());
    QVERIFY(!w.session()->pinned());
  }

  void headlessComparisonMatchesTheCli() {
    const QString out = dir_.filePath(QStringLiteral("ab-export"));
    QProcess p;
    p.setProcessEnvironment(offscreen());
    p.start(QStringLiteral(KVSCOPE_GUI_PATH),
            {sample_, QStringLiteral("--preset"), QStringLiteral("kivi-4"), QStringLiteral("--compare-preset"),
             QStringLiteral("kivi-2"), QStringLiteral("--export-dir"), out, QStringLiteral("--views"),
             QStringLiteral("histogram,heatmap,drift,summary"), QStringLiteral("--size"), QStringLiteral("800x500")});
    QVERIFY(p.waitForFinished(kWaitMs * 2));
    QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
    const QDir dir(out);
    for (const char* name : {"histogram", "heatmap", "drift", "summary"}) {
      for (const char* ext : {"png", "svg", "pdf", "csv"}) {
        QVERIFY2(QFile::exists(dir.filePath(QStringLiteral("%1.%2").arg(name, ext))), name);
      }
    }
    QVERIFY(QFile(dir.filePath(QStringLiteral("histogram.csv"))).open(QIODevice::ReadOnly));
    QFile histCsv(dir.filePath(QStringLiteral("histogram.csv")));
    QVERIFY(histCsv.open(QIODevice::ReadOnly));
    QByteArray header = histCsv.readLine();
    while (header.startsWith('#')) header = histCsv.readLine();  // the export's metadata comment lines
    QVERIFY2(header.contains("reconstructed_a"), header.constData());
    QFile file(dir.filePath(QStringLiteral("comparison.json")));
    QVERIFY(file.open(QIODevice::ReadOnly));
    const auto j = nlohmann::json::parse(file.readAll().toStdString());

    // The CLI's reports of the same presets.
    const auto cliReport = [&](const char* preset) {
      const QString json = dir_.filePath(QStringLiteral("cli-%1.json").arg(QString::fromLatin1(preset)));
      QProcess cli;
      cli.start(QStringLiteral(KVSCOPE_CLI_PATH), {QStringLiteral("eval"), sample_, QStringLiteral("--preset"),
                                                   QString::fromLatin1(preset), QStringLiteral("--json"), json});
      if (!cli.waitForFinished(kWaitMs) || cli.exitCode() != 0) qFatal("%s", cli.readAllStandardError().constData());
      QFile f(json);
      if (!f.open(QIODevice::ReadOnly)) qFatal("no CLI report");
      return nlohmann::json::parse(f.readAll().toStdString());
    };
    const auto a = cliReport("kivi-4");
    const auto b = cliReport("kivi-2");
    // Both reports: the same layers, specs, storage and summary as eval --json writes them.
    for (const auto& [mine, cli] : {std::pair{j["a"], a}, std::pair{j["b"], b}}) {
      QCOMPARE(mine["layers"], cli["layers"]);
      QCOMPARE(mine["summary"], cli["summary"]);
      QCOMPARE(mine["key"], cli["key"]);
      QCOMPARE(mine["value"], cli["value"]);
      QCOMPARE(mine["bytes_per_token"], cli["bytes_per_token"]);
    }
    // Per-head differences B − A of the CLI's numbers.
    const auto& heads = j["differences"]["heads"];
    QCOMPARE(heads.size(), size_t{4 * 2});
    size_t i = 0;
    for (const auto& layer : a["layers"]) {
      for (size_t h = 0; h < layer["heads"].size(); ++h, ++i) {
        const auto& ha = layer["heads"][h];
        const auto& hb = b["layers"][layer["layer"].get<size_t>()]["heads"][h];
        QCOMPARE(heads[i]["layer"], layer["layer"]);
        QCOMPARE(heads[i]["kv_head"].get<int>(), static_cast<int>(h));
        QCOMPARE(heads[i]["key"]["rel_error"].get<double>(), hb["key"]["rel_error"].get<double>() - ha["key"]["rel_error"].get<double>());
        QCOMPARE(heads[i]["attention"]["joint"]["output_rel_error"].get<double>(),
                 hb["attention"]["joint"]["output_rel_error"].get<double>() - ha["attention"]["joint"]["output_rel_error"].get<double>());
        QCOMPARE(heads[i]["value"]["sqnr_db"].get<double>(), hb["value"]["sqnr_db"].get<double>() - ha["value"]["sqnr_db"].get<double>());
      }
    }
    QVERIFY(j["differences"]["bits_per_element"]["key"].get<double>() < 0);  // kivi-2 stores less than kivi-4
  }

  void headlessRefusesBadCombinations() {
    const QString out = dir_.filePath(QStringLiteral("ab-bad"));
    const auto run = [&](const QStringList& args) {
      QProcess p;
      p.setProcessEnvironment(offscreen());
      p.start(QStringLiteral(KVSCOPE_GUI_PATH), QStringList{sample_} + args + QStringList{QStringLiteral("--export-dir"), out});
      if (!p.waitForFinished(kWaitMs)) qFatal("kvscope did not finish");
      return std::pair{p.exitCode(), QString::fromUtf8(p.readAllStandardError())};
    };
    auto [code, err] = run({QStringLiteral("--compare-preset"), QStringLiteral("kivi-2")});
    QCOMPARE(code, 2);
    QVERIFY2(err.contains(QStringLiteral("--compare-preset needs setting A")), qPrintable(err));
    std::tie(code, err) = run({QStringLiteral("--preset"), QStringLiteral("kivi-4"), QStringLiteral("--compare-key"), QStringLiteral("int4")});
    QCOMPARE(code, 2);
    QVERIFY2(err.contains(QStringLiteral("--compare-key and --compare-value go together")), qPrintable(err));
    std::tie(code, err) = run({QStringLiteral("--preset"), QStringLiteral("kivi-4"), QStringLiteral("--compare-preset"),
                               QStringLiteral("kivi-2"), QStringLiteral("--compare-engine"), QStringLiteral("llama.cpp -ctk q4_0")});
    QCOMPARE(code, 2);
    QVERIFY2(err.contains(QStringLiteral("give one of --compare-key and --compare-value, --compare-preset or --compare-engine, not both")), qPrintable(err));
    std::tie(code, err) = run({QStringLiteral("--preset"), QStringLiteral("kivi-4"), QStringLiteral("--compare-preset"), QStringLiteral("kivi-9")});
    QCOMPARE(code, 2);
    QVERIFY2(err.contains(QStringLiteral("--compare-preset")) && err.contains(QStringLiteral("kivi-2")), qPrintable(err));
    std::tie(code, err) = run({QStringLiteral("--preset"), QStringLiteral("kivi-4"), QStringLiteral("--compare-key"),
                               QStringLiteral("int99"), QStringLiteral("--compare-value"), QStringLiteral("int4")});
    QCOMPARE(code, 2);
    QVERIFY2(err.contains(QStringLiteral("--compare-key")), qPrintable(err));
    QVERIFY(!QFile::exists(QDir(out).filePath(QStringLiteral("comparison.json"))));
  }
};

QTEST_MAIN(ComparisonTest)
#include "comparison_test.moc"
