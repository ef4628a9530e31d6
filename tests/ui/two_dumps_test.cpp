// SPDX-License-Identifier: GPL-3.0-or-later
// Two dumps side by side (issue 32): A pinned on a dump of its own — the same model at another
// length, or another model — and B on the open dump. Checked against core run here on each dump
// alone: A's histogram counts, A's layer summary, A's drift row matched from the end; what A's dump
// lacks is said, never drawn from another layer; swap is refused; a new B keeps A; undo, sessions
// and the headless --compare-dump export (comparison.json against kvscope-cli eval of each dump).
#include <QtTest>

#include <QComboBox>
#include <QPushButton>
#include <QHeaderView>
#include <QStandardItemModel>
#include <QTableView>
#include <QLineSeries>
#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QUndoStack>

#include <nlohmann/json.hpp>

#include "core/inspect/view_compare.h"
#include "core/report/eval.h"
#include "core/synth/synth.h"
#include "tests/ui/ui_test_support.h"
#include "ui/main_window.h"
#include "ui/state/session.h"
#include "ui/state/view_feed.h"
#include "ui/views/drift_view.h"
#include "ui/views/histogram_view.h"
#include "ui/views/summary_view.h"
#include "ui/widgets/comparison_bar.h"

using namespace kvscope;
using namespace kvscope::ui;
using kvscope::test::coreReconstruction;
using kvscope::test::seriesCounts;
using kvscope::test::synthShape;

namespace {

constexpr int kWaitMs = 60000;

EvalReport coreEval(const std::string& path, const char* key, const char* value) {
  auto dump = Dump::open(path);
  if (!dump) qFatal("%s", dump.status().message().c_str());
  EvalOptions options;
  options.key = Plan(*parseSpec(key));
  options.value = Plan(*parseSpec(value));
  auto report = evaluate(**dump, options);
  if (!report) qFatal("%s", report.status().message().c_str());
  return *report;
}

nlohmann::json cliEval(const QString& dump, const QString& preset, const QString& json) {
  QProcess cli;
  cli.start(QStringLiteral(KVSCOPE_CLI_PATH), {QStringLiteral("eval"), dump, QStringLiteral("--preset"), preset,
                                               QStringLiteral("--json"), json});
  if (!cli.waitForFinished(kWaitMs) || cli.exitCode() != 0) qFatal("%s", cli.readAllStandardError().constData());
  QFile f(json);
  if (!f.open(QIODevice::ReadOnly)) qFatal("no CLI report");
  return nlohmann::json::parse(f.readAll().toStdString());
}

}  // namespace

class TwoDumpsTest : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString b_;      // 4 layers, 256 tokens, 32 queries
  QString a_;      // the same heads at 128 tokens, 16 queries, 3 layers (another seed)
  QString same_;   // B's layers and heads at 192 tokens (another seed): comparable per (layer, head)
  QString tiny_;   // head dim 8: q4_0 does not fit it

  QString synth(const char* name, const SynthOptions& o) {
    const QString path = dir_.filePath(QString::fromLatin1(name));
    const Status s = writeSynthDump(path.toStdString(), o);
    if (!s.isOk()) qFatal("%s", s.message().c_str());
    return path;
  }

  static void pinAndWait(MainWindow& w, const QString& path) {
    w.session()->pinDumpAsA(path);
    QTRY_VERIFY_WITH_TIMEOUT(w.session()->pinnedOnOtherDump(), kWaitMs);
    QTRY_VERIFY_WITH_TIMEOUT(w.comparisonComplete() && w.summaryComplete() && !w.busy(), kWaitMs);
  }

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY(dir_.isValid());
    b_ = synth("b.h5", synthShape(4, 2, 8, 256, 32, 64, 1));
    a_ = synth("a.h5", synthShape(3, 2, 8, 128, 16, 64, 7));
    same_ = synth("same.h5", synthShape(4, 2, 8, 192, 24, 64, 9));
    tiny_ = synth("tiny.h5", synthShape(2, 2, 4, 64, 8, 8, 3));
  }

  void aOnItsOwnDumpIsComputedFromThatDump() {
    MainWindow w(false);
    w.resize(1400, 900);
    w.setSpecs(*parseSpec("int8"), *parseSpec("int4"));
    test::openAndWaitForViews(w, b_, kWaitMs);
    QTRY_VERIFY_WITH_TIMEOUT(w.summaryComplete(), kWaitMs);
    pinAndWait(w, a_);
    QVERIFY(w.session()->pinned()->key == Plan(*parseSpec("int8")));
    QVERIFY(w.session()->describePinned().startsWith(QStringLiteral("a.h5 · K int8")));
    // B moves on; A stays A's dump under int8/int4.
    w.setSpecs(*parseSpec("int2"), *parseSpec("int4"));
    QTRY_VERIFY_WITH_TIMEOUT(w.layerQuant() && w.layerQuant()->keySpec == *parseSpec("int2") && w.comparisonComplete() &&
                                 w.summaryComplete() && !w.busy(),
                             kWaitMs);

    // A's layer summary is core's eval of A's dump alone: its 3 layers, the same numbers.
    const EvalReport expected = coreEval(a_.toStdString(), "int8", "int4");
    const std::vector<LayerResult>& summary = w.feed()->pinned()->summary();
    QCOMPARE(summary.size(), size_t{3});
    for (size_t l = 0; l < summary.size(); ++l) {
      for (size_t h = 0; h < summary[l].heads.size(); ++h) {
        QCOMPARE(summary[l].heads[h].key.relError, expected.layers[l].heads[h].key.relError);
        QCOMPARE(summary[l].heads[h].attention->joint.klMean, expected.layers[l].heads[h].attention->joint.klMean);
      }
    }

    // The summary's A, B and B − A columns at 1400×900: no header is cut (the table scrolls
    // sideways instead), and A's cells of layer 3, which A's dump lacks, say "–", not "…".
    auto* sv = viewOf<SummaryView>(w);
    w.showTab(3);
    QTest::qWait(50);
    QHeaderView* header = sv->table()->horizontalHeader();
    for (int c = 0; c < sv->model()->columnCount() - 2; ++c) {  // the spec columns elide (tooltip)
      if (header->isSectionHidden(c)) continue;
      int widest = 0;
      for (const QString& line : sv->model()->headerData(c, Qt::Horizontal).toString().split(QLatin1Char('\n')))
        widest = std::max(widest, header->fontMetrics().horizontalAdvance(line));
      QVERIFY2(header->sectionSize(c) >= widest,
               qPrintable(QStringLiteral("column %1: %2 < %3").arg(c).arg(header->sectionSize(c)).arg(widest)));
    }
    int dashes = 0;
    for (int r = 0; r < sv->model()->rowCount(); ++r) {
      if (sv->model()->item(r, 0)->text() == QStringLiteral("3")) {
        QCOMPARE(sv->model()->item(r, 2)->text(), QStringLiteral("–"));
        ++dashes;
      }
    }
    QCOMPARE(dashes, 2);

    // The histogram draws A's own reconstruction of layer 0, kv head 0 on B's bins.
    HistogramView* hist = viewOf<HistogramView>(w);
    QVERIFY(selectItemName(hist->countsBox(), QStringLiteral("linear")));
    w.showTab(0);
    const Tensor3 keyA = coreReconstruction(a_.toStdString(), 0, TensorKind::Key, *parseSpec("int8"));
    std::vector<double> expectedA;
    countOnEdges(keyA, 0, HistogramScope::Head, 0, hist->data().edges, expectedA);
    QCOMPARE(seriesCounts(hist->comparisonSeries()), expectedA);
    double total = 0;
    for (double c : expectedA) total += c;
    QCOMPARE(total, 128.0 * 64.0);  // A's 128 tokens, not B's 256

    // The drift row is matched from the end: B's last query (position 255) against A's (127).
    auto* drift = viewOf<DriftView>(w);
    QVERIFY(drift->data() && drift->data()->row && drift->comparison() && drift->comparison()->row);
    QCOMPARE(drift->data()->row->position, int64_t{255});
    QCOMPARE(drift->comparison()->row->position, int64_t{127});
    QCOMPARE(drift->comparison()->row->original.scores.size(), size_t{128});

    // Layer 3 is not in A's dump: said, nothing of another layer drawn, nothing waited for.
    w.session()->select(3, 0);
    QTRY_VERIFY_WITH_TIMEOUT(w.layerQuant() && w.layerQuant()->tensors->layer == 3 && !w.busy(), kWaitMs);
    QVERIFY(w.comparisonComplete());
    const ComparisonData c = w.feed()->comparison();
    QVERIFY(!c.layer);
    QVERIFY2(c.note.contains(QStringLiteral("3 layers")), qPrintable(c.note));
    QVERIFY2(hist->statsText().contains(QStringLiteral("layer 3 is not in it")), qPrintable(hist->statsText()));
    QVERIFY(hist->comparisonSeries()->points().isEmpty() || !hist->comparisonSeries()->isVisible());
    w.session()->select(1, 1);
    QTRY_VERIFY_WITH_TIMEOUT(w.layerQuant() && w.layerQuant()->tensors->layer == 1 && w.comparisonComplete() && !w.busy(),
                             kWaitMs);
    QVERIFY(w.feed()->comparison().note.isEmpty());
    QCOMPARE(w.feed()->comparison().layer->tensors->layer, 1);
    QCOMPARE(w.feed()->comparison().layer->tensors->key.tokens, int64_t{128});

    // Swap would put A's plans on a dump they were not chosen for: the button is off, and the
    // menu's action (or a session script) is refused, A unchanged.
    QVERIFY(!w.comparisonBar()->swapButton()->isEnabled());
    QSignalSpy errors(&w, &MainWindow::errorShown);
    w.swapAB();
    QCOMPARE(errors.count(), 1);
    QVERIFY2(errors.first().first().toString().contains(QStringLiteral("another dump")),
             qPrintable(errors.first().first().toString()));
    QVERIFY(w.session()->pinnedOnOtherDump());

    // Another B: A keeps its dump and its results.
    test::openAndWaitForViews(w, same_, kWaitMs);
    QTRY_VERIFY_WITH_TIMEOUT(w.comparisonComplete() && w.summaryComplete() && !w.busy(), kWaitMs);
    QVERIFY(w.session()->pinnedOnOtherDump());
    QCOMPARE(w.session()->pinned()->dump->info().path, a_.toStdString());
    QCOMPARE(w.feed()->pinned()->summary().size(), size_t{3});

    // Undo the pin: unpinned; redo: A is on its dump again.
    while (w.undoStack()->canUndo() && !w.undoStack()->undoText().startsWith(QStringLiteral("pin dump"))) {
      w.undoStack()->undo();
    }
    QVERIFY(w.undoStack()->canUndo());
    w.undoStack()->undo();
    QVERIFY(!w.session()->pinned());
    w.undoStack()->redo();
    QVERIFY(w.session()->pinnedOnOtherDump());
  }

  void aSettingThatDoesNotFitTheDumpIsRefused() {
    MainWindow w(false);
    w.setSpecs(*parseSpec("q4_0"), *parseSpec("q4_0"));
    test::openAndWaitForViews(w, b_, kWaitMs);
    QSignalSpy errors(&w, &MainWindow::errorShown);
    w.session()->pinDumpAsA(tiny_);
    QTRY_VERIFY_WITH_TIMEOUT(!errors.isEmpty(), kWaitMs);
    const QString message = errors.first().first().toString();
    QVERIFY2(message.contains(QStringLiteral("tiny.h5")) && message.contains(QStringLiteral("does not fit")),
             qPrintable(message));
    QVERIFY(!w.session()->pinned());
  }

  void aSessionKeepsAsOwnDump() {
    const QString session = dir_.filePath(QStringLiteral("two-dumps.json"));
    {
      MainWindow w(false);
      w.setSpecs(*parseSpec("int8"), *parseSpec("int4"));
      test::openAndWaitForViews(w, b_, kWaitMs);
      pinAndWait(w, a_);
      QVERIFY(w.saveSession(session).isOk());
      const auto j = nlohmann::json::parse(w.sessionJson());
      QCOMPARE(QString::fromStdString(j["compare"]["dump"].get<std::string>()), a_);
    }
    MainWindow w(false);
    QVERIFY(w.loadSession(session).isOk());
    QTRY_VERIFY_WITH_TIMEOUT(w.session()->pinnedOnOtherDump(), kWaitMs);
    QCOMPARE(w.session()->pinned()->dump->info().path, a_.toStdString());
    QVERIFY(w.session()->pinned()->key == Plan(*parseSpec("int8")));
    QTRY_VERIFY_WITH_TIMEOUT(w.dump() && w.comparisonComplete() && w.summaryComplete() && !w.busy(), kWaitMs);
    QCOMPARE(w.dump()->info().path, b_.toStdString());
  }

  void headlessCompareDumpMatchesTheCliOnEachDump() {
    const QString out = dir_.filePath(QStringLiteral("export"));
    QProcess p;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
    p.setProcessEnvironment(env);
    p.start(QStringLiteral(KVSCOPE_GUI_PATH),
            {b_, QStringLiteral("--compare-dump"), same_, QStringLiteral("--preset"), QStringLiteral("kivi-4"),
             QStringLiteral("--compare-preset"), QStringLiteral("kivi-2"), QStringLiteral("--export-dir"), out,
             QStringLiteral("--views"), QStringLiteral("summary"), QStringLiteral("--size"), QStringLiteral("800x500")});
    QVERIFY(p.waitForFinished(kWaitMs * 2));
    QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
    QFile file(QDir(out).filePath(QStringLiteral("comparison.json")));
    QVERIFY(file.open(QIODevice::ReadOnly));
    const auto j = nlohmann::json::parse(file.readAll().toStdString());
    // A is kivi-4 on the compare dump, B kivi-2 on the dump opened: each as the CLI reports it.
    const auto a = cliEval(same_, QStringLiteral("kivi-4"), dir_.filePath(QStringLiteral("a.json")));
    const auto b = cliEval(b_, QStringLiteral("kivi-2"), dir_.filePath(QStringLiteral("b.json")));
    QCOMPARE(j["a"]["layers"], a["layers"]);
    QCOMPARE(j["b"]["layers"], b["layers"]);
    QCOMPARE(j["a"]["dump"]["path"], a["dump"]["path"]);
    const auto& heads = j["differences"]["heads"];
    QCOMPARE(heads.size(), size_t{4 * 2});
    const double da = a["layers"][2]["heads"][1]["attention"]["joint"]["kl_mean"].get<double>();
    const double db = b["layers"][2]["heads"][1]["attention"]["joint"]["kl_mean"].get<double>();
    QCOMPARE(heads[5]["attention"]["joint"]["kl_mean"].get<double>(), db - da);

    // Dumps of different layer counts: the views and reports are written, comparison.json is not.
    const QString out2 = dir_.filePath(QStringLiteral("export2"));
    p.start(QStringLiteral(KVSCOPE_GUI_PATH),
            {b_, QStringLiteral("--compare-dump"), a_, QStringLiteral("--preset"), QStringLiteral("kivi-4"),
             QStringLiteral("--export-dir"), out2, QStringLiteral("--views"), QStringLiteral("summary"),
             QStringLiteral("--size"), QStringLiteral("800x500")});
    QVERIFY(p.waitForFinished(kWaitMs * 2));
    QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
    QVERIFY(QFile::exists(QDir(out2).filePath(QStringLiteral("summary.csv"))));
    QVERIFY(!QFile::exists(QDir(out2).filePath(QStringLiteral("comparison.json"))));
    QFile csv(QDir(out2).filePath(QStringLiteral("summary.csv")));
    QVERIFY(csv.open(QIODevice::ReadOnly));
    const QString text = QString::fromUtf8(csv.readAll());
    QVERIFY2(text.contains(QStringLiteral("# A dump: ") + a_), qPrintable(text.left(400)));

    // A missing compare dump is a clear error naming the flag.
    p.start(QStringLiteral(KVSCOPE_GUI_PATH), {b_, QStringLiteral("--compare-dump"), dir_.filePath(QStringLiteral("none.h5")),
                                               QStringLiteral("--preset"), QStringLiteral("kivi-4"),
                                               QStringLiteral("--export-dir"), out2});
    QVERIFY(p.waitForFinished(kWaitMs));
    QCOMPARE(p.exitCode(), 2);
    QVERIFY2(p.readAllStandardError().contains("--compare-dump"), "the error names the flag");
  }
};

QTEST_MAIN(TwoDumpsTest)
#include "two_dumps_test.moc"
