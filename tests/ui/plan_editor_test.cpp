// SPDX-License-Identifier: GPL-3.0-or-later
// Plans in the window (quantization.md §12): a plan typed in or built in the plan editor reaches
// the layer worker, the layer summary, the dataset tree, exports and sessions with each layer's
// own spec; a bad override shows an error and changes nothing.
#include <QtTest>

#include <QFont>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QStandardItemModel>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTreeWidget>

#include <nlohmann/json.hpp>

#include "core/io/dump.h"
#include "core/quant/plan.h"
#include "core/quant/quantize.h"
#include "core/synth/synth.h"
#include "ui/headless.h"
#include "ui/main_window.h"
#include "tests/ui/ui_test_support.h"
#include "ui/views/summary_view.h"
#include "ui/widgets/dataset_panel.h"
#include "ui/widgets/plan_editor.h"
#include "ui/widgets/spec_panel.h"

// Specs, plans and ranges compare as their canonical strings (parsePlan(toString(p)) == p), so a
// failure prints them.
#define COMPARE_CANONICAL(a, b) QCOMPARE(QString::fromStdString(toString(a)), QString::fromStdString(toString(b)))

using namespace kvscope;
using namespace kvscope::ui;

namespace {

constexpr int kWaitMs = 30000;

QuantSpec spec(const char* text) {
  auto s = parseSpec(text);
  if (!s) qFatal("%s", s.status().message().c_str());
  return *s;
}

// Core's reconstruction of kv head 0 of one layer's keys under `s`, computed here without the GUI.
std::vector<float> coreKeyHead0(const std::string& path, int layer, const QuantSpec& s) {
  auto dump = Dump::open(path);
  if (!dump) qFatal("%s", dump.status().message().c_str());
  const DumpInfo& info = (*dump)->info();
  auto x = (*dump)->read(layer, TensorKind::Key);
  QuantInput input{&*x, nullptr, info.rope()};
  auto out = quantizeTensor(input, s);
  if (!out) qFatal("%s", out.status().message().c_str());
  const Tensor3& r = out->reconstruction;
  return {r.row(0, 0), r.row(0, 0) + r.tokens * r.dim};
}

// Types `text` into a line edit as a user does and presses Enter.
void typeInto(QLineEdit* edit, const QString& text) {
  edit->setFocus();
  edit->setText(text);
  edit->setModified(true);
  emit edit->returnPressed();
}

// Edits one cell of an override table as a user does.
void editCell(QTableWidget* table, int row, int column, const QString& text) {
  table->item(row, column)->setText(text);  // itemChanged follows, as after an in-place edit
}

QTreeWidgetItem* layerItem(MainWindow& w, int layer) { return w.datasetPanel()->tree()->topLevelItem(0)->child(layer); }

}  // namespace

class PlanEditorTest : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString sample_;

  void openSample(MainWindow& w) {
    QSignalSpy layer(&w, &MainWindow::layerReady);
    QSignalSpy summary(&w, &MainWindow::summaryFinished);
    w.openDump(sample_);
    QVERIFY(layer.wait(kWaitMs));
    if (summary.isEmpty()) QVERIFY(summary.wait(kWaitMs));
  }

  // Waits for the summary of the specs now in force (a change restarts it after the layer).
  static void waitForSummary(MainWindow& w) {
    QSignalSpy summary(&w, &MainWindow::summaryFinished);
    QVERIFY(summary.wait(kWaitMs));
    QTRY_VERIFY_WITH_TIMEOUT(w.summaryComplete(), kWaitMs);
  }

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY(dir_.isValid());
    auto path = ensureSampleDump(dir_.filePath(QStringLiteral("sample")).toStdString());
    QVERIFY2(path.hasValue(), path.status().message().c_str());
    sample_ = QString::fromStdString(*path);
  }

  void planTypedInTheSpecFieldReachesEveryLayer() {
    MainWindow w(false);
    w.setSpecs(spec("int4"), spec("int4"));
    openSample(w);
    const int layers = w.dump()->info().layers;
    QCOMPARE(layers, 4);  // the sample: layers 0 and 3 are first1+last1

    typeInto(w.keyPanel()->specEdit(), QStringLiteral("int4;first1+last1:int8"));
    waitForSummary(w);
    // The panel keeps the default; the plan holds the override.
    COMPARE_CANONICAL(w.keyPanel()->spec(), spec("int4"));
    QCOMPARE(w.keyPlan().overrides.size(), size_t{1});
    COMPARE_CANONICAL(w.keyPlan(), *parsePlan("int4;first1+last1:int8"));
    QCOMPARE(w.planEditor()->table(true)->rowCount(), 1);
    QCOMPARE(w.planEditor()->table(true)->item(0, 0)->text(), QStringLiteral("first1+last1"));
    QCOMPARE(w.planEditor()->planEdit(true)->text(), QString::fromStdString(toString(w.keyPlan())));

    // Storage follows §12 (by hand: int4 per token with fp16 scale and minimum over D = 64 is
    // 4 + 32/64 = 4.5 bits, int8 8.5; the plan's K is (2·8.5 + 2·4.5)/4 = 6.5 bits per element).
    auto* storage = w.findChild<QLabel*>(QStringLiteral("storageSummary"));
    QVERIFY(storage);
    QVERIFY2(storage->text().contains(QStringLiteral("6.500")), qPrintable(storage->text()));
    QVERIFY2(storage->text().contains(QStringLiteral("4.500")), qPrintable(storage->text()));
    // 4 layers × 2 kv heads × 64 channels: K (2·8.5 + 2·4.5)·128/8 = 416 bytes, V 4·4.5·128/8 = 288.
    QVERIFY2(storage->text().contains(QStringLiteral("704.0")), qPrintable(storage->text()));

    // The summary evaluated each layer with its own K spec; V stays int4 everywhere.
    const std::vector<LayerResult>& rows = viewOf<SummaryView>(w)->layers();
    QCOMPARE(static_cast<int>(rows.size()), layers);
    for (const LayerResult& r : rows) {
      const bool edge = r.layer == 0 || r.layer == layers - 1;
      COMPARE_CANONICAL(r.keySpec, edge ? spec("int8") : spec("int4"));
      COMPARE_CANONICAL(r.valueSpec, spec("int4"));
    }
    // …and the table shows it: the K spec column of each row.
    QStandardItemModel* model = viewOf<SummaryView>(w)->model();
    int keyColumn = -1;
    for (int c = 0; c < model->columnCount(); ++c) {
      if (model->headerData(c, Qt::Horizontal).toString() == QStringLiteral("K spec")) keyColumn = c;
    }
    QVERIFY(keyColumn >= 0);
    for (int row = 0; row < model->rowCount(); ++row) {
      const int layer = model->item(row, 0)->data(Qt::UserRole).toInt();
      const bool edge = layer == 0 || layer == layers - 1;
      QCOMPARE(model->item(row, keyColumn)->text(), QString::fromStdString(toString(edge ? spec("int8") : spec("int4"))));
    }

    // Export All: the plan strings, and a plan report with each layer's specs and §12's figures
    // (K 6.5 bits per element as above; 704 bytes per token).
    {
      QTemporaryDir out;
      QVERIFY(out.isValid());
      const Status exported = w.exportAll(out.path(), {QStringLiteral("summary")}, QSize(400, 300));
      QVERIFY2(exported.isOk(), exported.message().c_str());
      QFile specs(out.filePath(QStringLiteral("specs.txt")));
      QVERIFY(specs.open(QIODevice::ReadOnly));
      QVERIFY(QString::fromUtf8(specs.readAll()).contains(QString::fromStdString(toString(w.keyPlan()))));
      QFile report(out.filePath(QStringLiteral("report.json")));
      QVERIFY(report.open(QIODevice::ReadOnly));
      const nlohmann::json j = nlohmann::json::parse(report.readAll().toStdString());
      QCOMPARE(QString::fromStdString(j["key"]["spec"].get<std::string>()), QString::fromStdString(toString(w.keyPlan())));
      QCOMPARE(j["key"]["bits_per_element"].get<double>(), 6.5);
      QCOMPARE(j["bytes_per_token"]["quantized"].get<double>(), 704.0);
      QCOMPARE(static_cast<int>(j["layers"].size()), layers);
      for (const auto& layer : j["layers"]) {
        const int l = layer["layer"].get<int>();
        const bool edge = l == 0 || l == layers - 1;
        QCOMPARE(QString::fromStdString(layer["key_spec"].get<std::string>()),
                 QString::fromStdString(toString(edge ? spec("int8") : spec("int4"))));
      }
    }

    // The layer worker quantizes the layer in view with that layer's spec: core's int8
    // reconstruction for layer 3, int4 for layer 1.
    const std::string path = sample_.toStdString();
    for (int layer : {3, 1}) {
      QSignalSpy ready(&w, &MainWindow::layerReady);
      w.select(layer, 0);
      QVERIFY(ready.wait(kWaitMs));
      QCOMPARE(w.layerQuant()->tensors->layer, layer);
      QCOMPARE(w.layerQuant()->keyHat.data, coreKeyHead0(path, layer, layer == 3 ? spec("int8") : spec("int4")));
    }

    // The tree marks the overridden layers, bold, and names their specs.
    for (int l = 0; l < layers; ++l) {
      const bool edge = l == 0 || l == layers - 1;
      QCOMPARE(w.datasetPanel()->layerMarked(l), edge);
      QCOMPARE(layerItem(w, l)->font(0).bold(), edge);
      QVERIFY(layerItem(w, l)->toolTip(0).contains(QString::fromStdString(toString(edge ? spec("int8") : spec("int4")))));
    }
  }

  void overrideAddedInTheEditorChangesThePlan() {
    MainWindow w(false);
    w.setSpecs(spec("int4"), spec("int4"));
    openSample(w);
    {
      QSignalSpy ready(&w, &MainWindow::layerReady);
      w.select(2, 0);
      QVERIFY(ready.wait(kWaitMs));
    }
    PlanEditor* editor = w.planEditor();
    // Add proposes the layer in view with the spec it has now: the plan gains `;2:int4`.
    editor->addButton(false)->click();
    QCOMPARE(w.valuePlan().overrides.size(), size_t{1});
    COMPARE_CANONICAL(w.valuePlan().overrides[0].layers, *parseLayerRanges("2"));
    QVERIFY(!w.datasetPanel()->layerMarked(2));  // same spec as the default: nothing differs yet
    editCell(editor->table(false), 0, 1, QStringLiteral("int8"));
    COMPARE_CANONICAL(w.valuePlan(), *parsePlan("int4;2:int8"));
    QCOMPARE(editor->planEdit(false)->text(), QString::fromStdString(toString(*parsePlan("int4;2:int8"))));
    QVERIFY(editor->messageLabel(false)->text().isEmpty());
    QVERIFY(w.datasetPanel()->layerMarked(2));
    QVERIFY(!w.datasetPanel()->layerMarked(1));
    QVERIFY(layerItem(w, 2)->toolTip(0).contains(QStringLiteral("V: int8")));
    QVERIFY(editor->layerLabel()->text().contains(QStringLiteral("int8")));
    // The K side is untouched.
    QVERIFY(w.keyPlan().overrides.empty());

    // The layer in view is recomputed with V = int8; the summary follows.
    waitForSummary(w);
    for (const LayerResult& r : viewOf<SummaryView>(w)->layers()) COMPARE_CANONICAL(r.valueSpec, r.layer == 2 ? spec("int8") : spec("int4"));

    // Remove takes it away again.
    editor->removeButton(false)->click();
    QVERIFY(w.valuePlan().overrides.empty());
    QVERIFY(!w.datasetPanel()->layerMarked(2));
  }

  void badOverrideShowsAnErrorAndChangesNothing() {
    MainWindow w(false);
    w.setSpecs(spec("int4"), spec("int4"));
    openSample(w);
    PlanEditor* editor = w.planEditor();
    typeInto(editor->planEdit(true), QStringLiteral("int4;last2:int8"));
    const Plan applied = w.keyPlan();
    COMPARE_CANONICAL(applied, *parsePlan("int4;last2:int8"));
    QTableWidget* table = editor->table(true);

    // A range that does not parse: the cell is marked, the message says why, the plan stays.
    editCell(table, 0, 0, QStringLiteral("3-1"));
    COMPARE_CANONICAL(w.keyPlan(), applied);
    QVERIFY2(editor->messageLabel(true)->text().contains(QStringLiteral("3-1")), qPrintable(editor->messageLabel(true)->text()));
    QVERIFY(table->item(0, 0)->background().style() != Qt::NoBrush);  // marked
    // A layer the sample (4 layers) does not have: resolve's error, the plan stays.
    editCell(table, 0, 0, QStringLiteral("7"));
    COMPARE_CANONICAL(w.keyPlan(), applied);
    QVERIFY2(editor->messageLabel(true)->text().contains(QStringLiteral("7")), qPrintable(editor->messageLabel(true)->text()));
    QVERIFY(table->item(0, 0)->background().style() != Qt::NoBrush);  // marked
    QCOMPARE(table->item(0, 1)->background().style(), Qt::NoBrush);
    // A bad spec in the spec cell.
    editCell(table, 0, 0, QStringLiteral("last2"));
    editCell(table, 0, 1, QStringLiteral("int99"));
    COMPARE_CANONICAL(w.keyPlan(), applied);
    QVERIFY(!editor->messageLabel(true)->text().isEmpty());
    // Fixing the cell applies it and clears the message.
    editCell(table, 0, 1, QStringLiteral("int6"));
    COMPARE_CANONICAL(w.keyPlan(), *parsePlan("int4;last2:int6"));
    QVERIFY(editor->messageLabel(true)->text().isEmpty());
    // A whole plan with a layer out of range, typed in the plan field or the spec field: nothing
    // is applied, the panel keeps its default.
    typeInto(editor->planEdit(true), QStringLiteral("int8;9:int2"));
    COMPARE_CANONICAL(w.keyPlan(), *parsePlan("int4;last2:int6"));
    QVERIFY(!editor->messageLabel(true)->text().isEmpty());
    typeInto(w.keyPanel()->specEdit(), QStringLiteral("int8;0-5:int2"));
    COMPARE_CANONICAL(w.keyPlan(), *parsePlan("int4;last2:int6"));
    QVERIFY(!w.keyPanel()->messageLabel()->text().isEmpty());
    QVERIFY(w.planEditor()->isValid());
  }

  void valueFollowsTheKeyPlanWhenLinked() {
    MainWindow w(false);
    w.setSpecs(spec("int4"), spec("int4"));
    openSample(w);
    typeInto(w.planEditor()->planEdit(true), QStringLiteral("int4;1:int8"));
    typeInto(w.planEditor()->planEdit(false), QStringLiteral("int4;2:int3"));
    COMPARE_CANONICAL(w.valuePlan(), *parsePlan("int4;2:int3"));
    w.valuePanel()->setLinkedToKey(true);
    COMPARE_CANONICAL(w.valuePlan(), *parsePlan("int4;1:int8"));
    QVERIFY(w.planEditor()->planEdit(false)->isReadOnly());
    QCOMPARE(w.planEditor()->table(false)->rowCount(), 1);  // the greyed list shows K's override
    QCOMPARE(w.planEditor()->table(false)->item(0, 1)->text(), QStringLiteral("int8"));
    // Unlinking keeps what V had.
    w.valuePanel()->setLinkedToKey(false);
    COMPARE_CANONICAL(w.valuePlan(), *parsePlan("int4;1:int8"));
    QVERIFY(w.planEditor()->table(false)->isEnabled());
  }

  void sessionsKeepPlansAndOldSessionsLoad() {
    const QString path = dir_.filePath(QStringLiteral("plan-session.json"));
    {
      MainWindow w(false);
      w.setPlans(*parsePlan("int4;first1:int8"), *parsePlan("int3;1-2+last1:fp8_e4m3"));
      QVERIFY(w.saveSession(path).isOk());
      const nlohmann::json j = nlohmann::json::parse(w.sessionJson());
      QCOMPARE(QString::fromStdString(j["key"].get<std::string>()), QString::fromStdString(toString(*parsePlan("int4;first1:int8"))));
      QCOMPARE(QString::fromStdString(j["value"].get<std::string>()), QString::fromStdString(toString(*parsePlan("int3;1-2+last1:fp8_e4m3"))));
    }
    {
      MainWindow w(false);
      QVERIFY(w.loadSession(path).isOk());
      COMPARE_CANONICAL(w.keyPlan(), *parsePlan("int4;first1:int8"));
      COMPARE_CANONICAL(w.valuePlan(), *parsePlan("int3;1-2+last1:fp8_e4m3"));
      QCOMPARE(w.planEditor()->table(false)->rowCount(), 1);
    }
    // A session written before plans: plain specs, no overrides.
    const QString old = dir_.filePath(QStringLiteral("old-session.json"));
    {
      QFile f(old);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(R"({"kvscope_session": 1, "dump": "", "key": "int3", "value": "int5", "value_same_as_key": false})");
    }
    MainWindow w(false);
    w.setPlans(*parsePlan("int4;0:int8"), spec("int4"));
    QVERIFY(w.loadSession(old).isOk());
    COMPARE_CANONICAL(w.keyPlan(), Plan(spec("int3")));
    COMPARE_CANONICAL(w.valuePlan(), Plan(spec("int5")));
    QCOMPARE(w.planEditor()->table(true)->rowCount(), 0);
  }

  void commandLinePlansAndPresetsClearOverrides() {
    LaunchOptions options;
    options.key = QStringLiteral("int4;last1:int8");
    options.value = QStringLiteral("int4");
    auto launch = resolveLaunch(options);
    QVERIFY2(launch.hasValue(), launch.status().message().c_str());
    COMPARE_CANONICAL(*launch->key, *parsePlan("int4;last1:int8"));
    options.key = QStringLiteral("int4;bad:int8");
    QVERIFY(!resolveLaunch(options).hasValue());

    MainWindow w(false);
    w.setPlans(*parsePlan("int4;last1:int8"), spec("int4"));
    QVERIFY(w.applyPreset(QStringLiteral("kivi-2")));
    QVERIFY(w.keyPlan().overrides.empty());
    QCOMPARE(w.planEditor()->table(true)->rowCount(), 0);
  }
};

QTEST_MAIN(PlanEditorTest)
#include "plan_editor_test.moc"
