// SPDX-License-Identifier: GPL-3.0-or-later
// The views behind one interface and one registry (ui/views/view.h, view_registry.h): the tabs,
// Export All, `--views`, `--tab` and sessions follow the registry; sessions store view state by
// name, and sessions written by kvscope 2b04415 (combo indexes, the old layout) still load to the
// same state; the one Selection is what the drift view's controls change and what the layer
// request reads.
#include <QtTest>

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFile>
#include <QLineEdit>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTemporaryDir>

#include <nlohmann/json.hpp>

#include "core/synth/synth.h"
#include "tests/ui/ui_test_support.h"
#include "ui/headless.h"
#include "ui/main_window.h"
#include "ui/views/budget_view.h"
#include "ui/views/drift_view.h"
#include "ui/views/heatmap_view.h"
#include "ui/views/histogram_view.h"
#include "ui/views/sensitivity_view.h"
#include "ui/views/summary_view.h"
#include "ui/views/view.h"
#include "ui/views/view_registry.h"

using namespace kvscope;
using namespace kvscope::ui;

namespace {
constexpr int kWaitMs = 60000;

QString name(const QComboBox* box) { return currentItemName(box); }

void writeFile(const QString& path, const std::string& text) {
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(QByteArray::fromStdString(text));
}

// Moves entry `from` of `box` to the front, keeping its text, data and name (a combo reordered
// in a later version).
void moveToFront(QComboBox* box, int from) {
  auto* model = qobject_cast<QStandardItemModel*>(box->model());
  QVERIFY(model);
  const QList<QStandardItem*> row = model->takeRow(from);
  model->insertRow(0, row);
  box->setCurrentIndex(box->count() - 1);  // somewhere else, so that loading must move it
}
}  // namespace

class ViewRegistryTest : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  QString sample_;

  // A session as kvscope 2b04415 wrote it (MainWindow::sessionJson there): the view settings as
  // combo indexes, the tab as an index, the summary's budgets under "budgets" and the budget
  // view's inputs under "capacity" and "search". No dump, so that only the settings load.
  static std::string legacySession() {
    return R"({
  "kvscope_session": 1,
  "dump": "",
  "key": "int4",
  "value": "int8",
  "value_same_as_key": false,
  "selection": {"layer": 1, "kv_head": 0, "query_head": 1, "query_index": 2, "channel": 3, "token": 4},
  "views": {
    "tab": 2,
    "heatmap": {"tensor": 2, "value": 1, "scale": 1},
    "histogram": {"tensor": 2, "scope": 1, "log": true, "space": 0, "bins": 64},
    "drift": {"case": 2},
    "budgets": {"key": 0.02, "value": 0.03},
    "summary": {"log": true},
    "capacity": {"memory_gib": 40.0, "weights_gib": 7.5, "context": 8192, "batch": 4, "device": ""},
    "search": {"key_field": "output_rel_error", "key_bound": 0.04, "value_field": "output_rel_error", "value_bound": 0.06},
    "sensitivity": {"candidates": "int4,int8", "metric": "kl_mean", "candidate": ""}
  }
}
)";
  }

  // What the legacy session above means, read from the widgets (by value and by data, not index).
  static void checkLegacyState(MainWindow& w) {
    QCOMPARE(w.viewTabs()->currentWidget(), static_cast<QWidget*>(viewOf<DriftView>(w)));
    QCOMPARE(viewOf<HeatmapView>(w)->tensor(), ViewTensor::Value);
    QCOMPARE(name(viewOf<HeatmapView>(w)->valueBox()), QStringLiteral("normalized"));
    QCOMPARE(viewOf<HeatmapView>(w)->valueBox()->currentData().toInt(), static_cast<int>(HeatmapValue::Normalized));
    QCOMPARE(name(viewOf<HeatmapView>(w)->scaleBox()), QStringLiteral("log"));
    QCOMPARE(viewOf<HistogramView>(w)->tensor(), ViewTensor::Value);
    QCOMPARE(viewOf<HistogramView>(w)->scopeBox()->currentData().toInt(), static_cast<int>(HistogramScope::Channel));
    QCOMPARE(name(viewOf<HistogramView>(w)->countsBox()), QStringLiteral("log"));  // "log": true
    QCOMPARE(viewOf<HistogramView>(w)->binsBox()->value(), 64);
    QCOMPARE(name(viewOf<HistogramView>(w)->spaceBox()), QStringLiteral("original"));
    QCOMPARE(name(viewOf<DriftView>(w)->caseBox()), QStringLiteral("joint"));
    QCOMPARE(viewOf<SummaryView>(w)->keyBudget(), 0.02);
    QCOMPARE(viewOf<SummaryView>(w)->valueBudget(), 0.03);
    QVERIFY(viewOf<SummaryView>(w)->logScaleBox()->isChecked());
    QCOMPARE(viewOf<BudgetView>(w)->memoryBox()->value(), 40.0);
    QCOMPARE(viewOf<BudgetView>(w)->weightsBox()->value(), 7.5);
    QCOMPARE(viewOf<BudgetView>(w)->contextBox()->value(), 8192);
    QCOMPARE(viewOf<BudgetView>(w)->batchBox()->value(), 4);
    QCOMPARE(viewOf<BudgetView>(w)->keyBoundBox()->value(), 0.04);
    QCOMPARE(viewOf<BudgetView>(w)->valueBoundBox()->value(), 0.06);
    QCOMPARE(viewOf<SensitivityView>(w)->candidatesField()->text(), QStringLiteral("int4,int8"));
    QCOMPARE(viewOf<SensitivityView>(w)->metricBox()->currentText(), QStringLiteral("kl_mean"));
    QCOMPARE(w.selection().layer, 1);
    QCOMPARE(w.selection().queryHead, 1);
    QCOMPARE(w.selection().queryIndex, 2);
    QCOMPARE(w.selection().channel, 3);
    QCOMPARE(w.selection().token, 4);
  }

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY(dir_.isValid());
    auto path = ensureSampleDump(dir_.filePath(QStringLiteral("sample")).toStdString());
    QVERIFY2(path.hasValue(), path.status().message().c_str());
    sample_ = QString::fromStdString(*path);
  }

  // The registry is the tabs, Export All's list and what --views and --tab accept, in one order.
  void tabsExportAndLaunchFollowTheRegistry() {
    const QStringList names{"histogram", "heatmap", "drift", "summary", "budget", "sensitivity", "diagnosis"};
    QCOMPARE(viewNames(), names);
    MainWindow w(false);
    QCOMPARE(static_cast<int>(w.views().size()), names.size());
    QCOMPARE(w.viewTabs()->count(), names.size());
    const auto exportable = w.exportableViews();
    for (int i = 0; i < names.size(); ++i) {
      View* v = w.views()[static_cast<size_t>(i)];
      QCOMPARE(v->exportName(), names[i]);
      QCOMPARE(w.viewTabs()->widget(i), v->widget());
      QCOMPARE(w.viewTabs()->tabText(i), v->tabTitle());
      QCOMPARE(exportable[static_cast<size_t>(i)]->exportName(), names[i]);
      QCOMPARE(w.view(names[i]), v);
    }
    QCOMPARE(w.viewTabs()->tabText(2), QStringLiteral("Attention drift"));
    QVERIFY(w.showTab(QStringLiteral("budget")));
    QCOMPARE(w.viewTabs()->currentWidget(), static_cast<QWidget*>(viewOf<BudgetView>(w)));
    QVERIFY(!w.showTab(QStringLiteral("nope")));
    QCOMPARE(w.viewTabs()->currentWidget(), static_cast<QWidget*>(viewOf<BudgetView>(w)));

    LaunchOptions options;
    options.views = {QStringLiteral("drift"), QStringLiteral("nope")};
    auto bad = resolveLaunch(options);
    QVERIFY(!bad.hasValue());
    QVERIFY2(QString::fromStdString(bad.status().message()).contains(names.join(QLatin1Char(','))),
             bad.status().message().c_str());
    options.views = {QStringLiteral("drift")};
    options.tab = QStringLiteral("sensitivity");
    auto byName = resolveLaunch(options);
    QVERIFY2(byName.hasValue(), byName.status().message().c_str());
    QCOMPARE(byName->tab, QStringLiteral("sensitivity"));
    options.tab = QStringLiteral("2");
    auto byIndex = resolveLaunch(options);
    QVERIFY(byIndex.hasValue());
    QCOMPARE(byIndex->tab, QStringLiteral("drift"));
    options.tab = QStringLiteral("7");
    auto outOfRange = resolveLaunch(options);
    QVERIFY(!outOfRange.hasValue());
    QVERIFY(QString::fromStdString(outOfRange.status().message()).contains(QStringLiteral("--tab")));
  }

  // A session written by main before view state was saved by name loads into the state it
  // meant, and saving it again writes names, which load into that same state.
  void legacySessionLoadsAndSavesByName() {
    const QString legacy = dir_.filePath(QStringLiteral("legacy.json"));
    writeFile(legacy, legacySession());
    MainWindow w(false);
    const Status s = w.loadSession(legacy);
    QVERIFY2(s.isOk(), s.message().c_str());
    checkLegacyState(w);

    const nlohmann::json j = nlohmann::json::parse(w.sessionJson());
    const nlohmann::json& v = j["views"];
    QCOMPARE(v["tab"].get<std::string>(), std::string("drift"));
    QCOMPARE(v["heatmap"]["tensor"].get<std::string>(), std::string("value"));
    QCOMPARE(v["heatmap"]["value"].get<std::string>(), std::string("normalized"));
    QCOMPARE(v["heatmap"]["scale"].get<std::string>(), std::string("log"));
    QCOMPARE(v["histogram"]["scope"].get<std::string>(), std::string("channel"));
    QCOMPARE(v["histogram"]["space"].get<std::string>(), std::string("original"));
    QCOMPARE(v["histogram"]["counts"].get<std::string>(), std::string("log"));
    QCOMPARE(v["drift"]["case"].get<std::string>(), std::string("joint"));
    QVERIFY(v["drift"]["log_p"].get<bool>());  // the defaults of options the legacy session lacks
    QVERIFY(!v["drift"]["difference"].get<bool>());
    QCOMPARE(v["summary"]["budgets"]["key"].get<double>(), 0.02);
    QCOMPARE(v["budget"]["capacity"]["context"].get<int>(), 8192);
    QCOMPARE(v["budget"]["search"]["key_bound"].get<double>(), 0.04);
    QVERIFY(!v.contains("budgets") && !v.contains("capacity") && !v.contains("search"));
    QCOMPARE(j["selection"]["query_head"].get<int>(), 1);
    QCOMPARE(j["selection"]["query_index"].get<int>(), 2);

    const QString renewed = dir_.filePath(QStringLiteral("renewed.json"));
    QVERIFY(w.saveSession(renewed).isOk());
    MainWindow again(false);
    QVERIFY(again.loadSession(renewed).isOk());
    checkLegacyState(again);
  }

  // A combo whose entries are reordered (a later version) does not change what a session
  // written by name means; the same session read by index would pick another entry.
  void reorderedCombosKeepASessionsMeaning() {
    const QString path = dir_.filePath(QStringLiteral("by-name.json"));
    {
      MainWindow w(false);
      QVERIFY(selectItemName(viewOf<HeatmapView>(w)->tensorBox(), QStringLiteral("value")));
      QVERIFY(selectItemName(viewOf<HistogramView>(w)->scopeBox(), QStringLiteral("token")));
      QVERIFY(selectItemName(viewOf<DriftView>(w)->caseBox(), QStringLiteral("value_only")));
      QVERIFY(w.showTab(QStringLiteral("summary")));
      QVERIFY(w.saveSession(path).isOk());
    }
    MainWindow w(false);
    moveToFront(viewOf<HeatmapView>(w)->tensorBox(), 2);    // V, K, pre-RoPE K
    moveToFront(viewOf<HistogramView>(w)->scopeBox(), 2);   // one token, whole head, one channel
    moveToFront(viewOf<DriftView>(w)->caseBox(), 1);        // value_only, key_only, joint
    // The tabs too: drift moved to the front.
    QWidget* drift = w.viewTabs()->widget(2);
    const QString title = w.viewTabs()->tabText(2);
    w.viewTabs()->removeTab(2);
    w.viewTabs()->insertTab(0, drift, title);
    QVERIFY(w.loadSession(path).isOk());
    QCOMPARE(viewOf<HeatmapView>(w)->tensor(), ViewTensor::Value);
    QCOMPARE(viewOf<HeatmapView>(w)->tensorBox()->currentIndex(), 0);  // where V is now, not index 2
    QCOMPARE(viewOf<HistogramView>(w)->scopeBox()->currentData().toInt(), static_cast<int>(HistogramScope::Token));
    QCOMPARE(viewOf<HistogramView>(w)->scopeBox()->currentIndex(), 0);
    QCOMPARE(name(viewOf<DriftView>(w)->caseBox()), QStringLiteral("value_only"));
    QCOMPARE(viewOf<DriftView>(w)->caseBox()->currentIndex(), 0);
    QCOMPARE(w.viewTabs()->currentWidget(), static_cast<QWidget*>(viewOf<SummaryView>(w)));
  }

  // The drift view's controls change the one Selection; the layer request and the drift row
  // are computed for it; select() moves the controls (they show the Selection, keep no copy).
  void driftControlsChangeTheOneSelection() {
    MainWindow w(false);
    w.setSpecs(*parseSpec("int4"), *parseSpec("int4"));
    test::openAndWaitForViews(w, sample_, kWaitMs);
    const DumpInfo& info = w.dump()->info();
    QVERIFY(info.hasQuery && info.kvHeads > 1 && info.queries > 2);
    const int group = info.groupSize();
    QCOMPARE(w.selection().queryIndex, info.queries - 1);  // "the last row", resolved
    QCOMPARE(viewOf<DriftView>(w)->queryRowBox()->value(), info.queries - 1);

    // Another kv head's query head: the Selection follows, the layer is computed for that head
    // and its request carries the query head and row.
    const int queryHead = group * (info.kvHeads - 1) + (group > 1 ? 1 : 0);
    QSignalSpy layer(&w, &MainWindow::layerReady);
    viewOf<DriftView>(w)->queryHeadBox()->setValue(queryHead);
    QCOMPARE(w.selection().queryHead, queryHead);
    QCOMPARE(w.selection().kvHead, queryHead / group);
    QVERIFY(layer.wait(kWaitMs));
    QCOMPARE(static_cast<int>(w.layerQuant()->request.kvHead), queryHead / group);
    QCOMPARE(w.layerQuant()->request.queryHead, queryHead);
    QCOMPARE(w.layerQuant()->request.queryIndex, info.queries - 1);
    QTRY_VERIFY_WITH_TIMEOUT(viewOf<DriftView>(w)->data() && viewOf<DriftView>(w)->data()->row &&
                                 viewOf<DriftView>(w)->data()->row->queryHead == queryHead,
                             kWaitMs);

    // Another row: the Selection, then the next layer request and the drift row.
    viewOf<DriftView>(w)->queryRowBox()->setValue(1);
    QCOMPARE(w.selection().queryIndex, 1);
    QTRY_VERIFY_WITH_TIMEOUT(viewOf<DriftView>(w)->data() && viewOf<DriftView>(w)->data()->row &&
                                 viewOf<DriftView>(w)->data()->row->queryIndex == 1,
                             kWaitMs);
    QSignalSpy again(&w, &MainWindow::layerReady);
    w.setSpecs(*parseSpec("int3"), *parseSpec("int4"));
    QVERIFY(again.wait(kWaitMs));
    QCOMPARE(w.layerQuant()->request.queryHead, queryHead);
    QCOMPARE(w.layerQuant()->request.queryIndex, 1);

    // The window's select() moves the drift controls: they show the one Selection.
    w.select(w.selection().layer, 0);
    QCOMPARE(w.selection().queryHead, 0);
    QCOMPARE(viewOf<DriftView>(w)->queryHeadBox()->value(), 0);
    QCOMPARE(viewOf<DriftView>(w)->queryRowBox()->value(), 1);

    // And the session stores that Selection.
    const nlohmann::json j = nlohmann::json::parse(w.sessionJson());
    QCOMPARE(j["selection"]["query_head"].get<int>(), 0);
    QCOMPARE(j["selection"]["query_index"].get<int>(), 1);
  }
};

QTEST_MAIN(ViewRegistryTest)
#include "view_registry_test.moc"
